/* Token file parsing and constant-time digest comparison (see auth.h). Tokens themselves are
 * never kept in memory after loading: only their SHA-256 digests. A reload swaps the digest
 * array under a write lock; checks hold the read lock, so none sees a freed or half-made set. */
#include "service/auth.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DIGEST_LEN 32

struct auth_token {
    unsigned char digest[DIGEST_LEN];
    unsigned scopes;
    char name[SVC_AUTH_NAME_MAX + 1];
    struct svc_limit limit; /* -1: the setting's */
};

struct svc_auth {
    pthread_rwlock_t lock; /* guards tokens and n: read by checks, written by a reload */
    struct auth_token *tokens;
    size_t n;
};

static int digest(const char *token, size_t len, unsigned char out[DIGEST_LEN])
{
    unsigned int outlen = 0;
    return EVP_Digest(token, len, out, &outlen, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

/* A scope word of the tokens file and the route scopes it grants (each route names its scope in
 * its family's route table). No word implies another but admin:
 * - read: every GET, and the ops endpoints when they are not open (ROWLOCK_OPEN_OPS=false);
 * - write: produce, a head's put, patch and delete, consumers' create, commit and delete,
 *   enqueue, the operator's retry and cancel, ledger transactions and checkpoints; not read, so
 *   a client that also reads what it writes needs read,write;
 * - work: claims and every lease write (heartbeat, complete, fail, hand-back, release,
 *   leases:complete), all that rowlock-cli work needs;
 * - admin: all of them, and the routes that create, change and delete topics, producers,
 *   queues and ledgers. */
static int scope_bits(const char *word, unsigned *bits)
{
    static const struct {
        const char *name;
        unsigned bits;
    } names[] = {
        {"read", SVC_SCOPE_BIT(SVC_SCOPE_READ) | SVC_SCOPE_BIT(SVC_SCOPE_OPS)},
        {"write", SVC_SCOPE_BIT(SVC_SCOPE_WRITE)},
        {"work", SVC_SCOPE_BIT(SVC_SCOPE_WORK)},
        {"admin", ~0u},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(word, names[i].name) == 0) {
            *bits |= names[i].bits;
            return 0;
        }
    }
    return -1;
}

/* Takes the value of a name=<name> word into t->name. 0, or -1 when it breaks the rule. */
static int parse_name(const char *value, struct auth_token *t)
{
    size_t n = strlen(value);
    if (n == 0 || n > SVC_AUTH_NAME_MAX || !isalnum((unsigned char)value[0]))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)value[i]) && strchr("._-", value[i]) == NULL)
            return -1;
    memcpy(t->name, value, n + 1);
    return 0;
}

/* Takes a limit word (rate=, burst=, long_polls=) into t->limit. Returns 1 when w is none, 0
 * when taken, or -1 with a reason in *why. */
static int parse_limit(const char *w, struct auth_token *t, const char **why)
{
    static const struct {
        const char *key;
        size_t off;
        long min;
        const char *why;
    } keys[] = {
        {"rate=", offsetof(struct svc_limit, rate), 0,
         "bad rate= (requests a second: a whole number from 0, no limit, to 1000000)"},
        {"burst=", offsetof(struct svc_limit, burst), 1,
         "bad burst= (requests at once: a whole number from 1 to 1000000)"},
        {"long_polls=", offsetof(struct svc_limit, long_polls), 0,
         "bad long_polls= (long-polls at once: a whole number from 0, no cap, to 1000000)"},
    };
    _Static_assert(SVC_LIMIT_MAX == 1000000, "the reasons above name the largest value");
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        size_t n = strlen(keys[i].key);
        if (strncmp(w, keys[i].key, n) != 0)
            continue;
        long *field = (long *)((char *)&t->limit + keys[i].off);
        char *end = NULL;
        errno = 0;
        long v = strtol(w + n, &end, 10);
        if (*field != -1) {
            *why = "a limit given twice for one token";
            return -1;
        }
        if (!isdigit((unsigned char)w[n]) || *end != '\0' || errno != 0 || v < keys[i].min ||
            v > SVC_LIMIT_MAX) {
            *why = keys[i].why;
            return -1;
        }
        *field = v;
        return 0;
    }
    return 1;
}

/* Parses non-comment line number lineno into t. Returns 0, or -1 with a reason in *why. */
static int parse_line(char *line, size_t lineno, struct auth_token *t, const char **why)
{
    const char *sep = " \t,\r\n";
    char *save = NULL;
    char *token = strtok_r(line, sep, &save);
    if (token == NULL) {
        *why = "no token on the line";
        return -1;
    }
    if (strlen(token) < 16) {
        *why = "token shorter than 16 characters";
        return -1;
    }
    t->scopes = 0;
    t->name[0] = '\0';
    t->limit = (struct svc_limit){-1, -1, -1};
    for (char *w = strtok_r(NULL, sep, &save); w != NULL; w = strtok_r(NULL, sep, &save)) {
        int limit = parse_limit(w, t, why);
        if (limit < 0)
            return -1;
        if (limit == 0) {
            continue;
        } else if (strncmp(w, "name=", 5) == 0) {
            if (t->name[0] != '\0') {
                *why = "two names for one token";
                return -1;
            }
            if (parse_name(w + 5, t) != 0) {
                *why = "bad token name (1 to 64 letters, digits, '.', '_' or '-', starting with a "
                       "letter or digit)";
                return -1;
            }
        } else if (scope_bits(w, &t->scopes) != 0) {
            *why = "unknown scope (expected read, write, work or admin)";
            return -1;
        }
    }
    if (t->scopes == 0) {
        *why = "token without scopes";
        return -1;
    }
    if (t->name[0] == '\0') /* never a name of the file's: those start with a letter or digit */
        snprintf(t->name, sizeof(t->name), "_line-%zu", lineno);
    if (digest(token, strlen(token), t->digest) != 0) {
        *why = "cannot compute SHA-256";
        return -1;
    }
    OPENSSL_cleanse(token, strlen(token));
    return 0;
}

struct svc_auth *svc_auth_load(const char *path, FILE *err)
{
    struct svc_auth *a = calloc(1, sizeof(*a));
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0, lineno = 0, alloc = 0;
    if (a != NULL && pthread_rwlock_init(&a->lock, NULL) != 0) {
        free(a);
        a = NULL;
    }
    if (a == NULL || f == NULL) {
        fprintf(err, "rowlock: cannot read tokens file %s\n", path);
        goto fail;
    }
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        if (a->n == alloc) {
            alloc = alloc ? alloc * 2 : 8;
            struct auth_token *grown = realloc(a->tokens, alloc * sizeof(*grown));
            if (grown == NULL)
                goto fail;
            a->tokens = grown;
        }
        const char *why = NULL;
        if (parse_line(p, lineno, &a->tokens[a->n], &why) != 0) {
            fprintf(err, "rowlock: tokens file %s line %zu: %s\n", path, lineno, why);
            goto fail;
        }
        a->n++;
    }
    if (a->n == 0) {
        fprintf(err, "rowlock: tokens file %s holds no tokens\n", path);
        goto fail;
    }
    if (line != NULL)
        OPENSSL_cleanse(line, cap);
    free(line);
    fclose(f);
    return a;
fail:
    if (line != NULL)
        OPENSSL_cleanse(line, cap);
    free(line);
    if (f != NULL)
        fclose(f);
    svc_auth_free(a);
    return NULL;
}

void svc_auth_free(struct svc_auth *a)
{
    if (a == NULL)
        return;
    pthread_rwlock_destroy(&a->lock);
    free(a->tokens);
    free(a);
}

size_t svc_auth_count(const struct svc_auth *a)
{
    if (a == NULL)
        return 0;
    struct svc_auth *m = (struct svc_auth *)a; /* the lock is not the set's value */
    pthread_rwlock_rdlock(&m->lock);
    size_t n = m->n;
    pthread_rwlock_unlock(&m->lock);
    return n;
}

int svc_auth_reload(struct svc_auth *a, const char *path, char *why, size_t whylen)
{
    char *msg = NULL;
    size_t msglen = 0;
    FILE *err = open_memstream(&msg, &msglen);
    struct svc_auth *fresh = err != NULL ? svc_auth_load(path, err) : NULL;
    if (err != NULL)
        fclose(err);
    if (fresh == NULL) {
        const char *text = msg != NULL && msglen > 0 ? msg : "out of memory\n";
        size_t n = strcspn(text, "\n");
        if (strncmp(text, "rowlock: ", 9) == 0) {
            text += 9;
            n -= 9;
        }
        snprintf(why, whylen, "%.*s", (int)n, text);
        free(msg);
        return -1;
    }
    free(msg);
    pthread_rwlock_wrlock(&a->lock);
    struct auth_token *old = a->tokens;
    a->tokens = fresh->tokens;
    a->n = fresh->n;
    pthread_rwlock_unlock(&a->lock);
    fresh->tokens = old; /* freed with the spent holder, no reader can hold it any more */
    svc_auth_free(fresh);
    return 0;
}

enum svc_auth_result svc_auth_check(const struct svc_auth *a, const char *authorization,
                                    enum svc_scope scope, char name[SVC_AUTH_NAME_MAX + 1],
                                    struct svc_limit *limit)
{
    if (name != NULL)
        name[0] = '\0';
    if (limit != NULL)
        *limit = (struct svc_limit){-1, -1, -1};
    if (authorization == NULL)
        return SVC_AUTH_MISSING;
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return SVC_AUTH_INVALID;
    const char *token = authorization + 7;
    while (*token == ' ')
        token++;
    /* Whitespace after a field value is not part of it (RFC 9110 section 5.5), and libmicrohttpd
     * keeps it: the token ends before any trailing SP or HTAB. */
    size_t len = strlen(token);
    while (len > 0 && (token[len - 1] == ' ' || token[len - 1] == '\t'))
        len--;
    unsigned char d[DIGEST_LEN];
    if (len == 0 || digest(token, len, d) != 0)
        return SVC_AUTH_INVALID;
    unsigned scopes = 0;
    int found = 0;
    size_t first = 0;                          /* the first line that holds the token names it */
    struct svc_auth *m = (struct svc_auth *)a; /* the lock is not the set's value */
    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->n; i++) {
        int same = CRYPTO_memcmp(d, m->tokens[i].digest, DIGEST_LEN) == 0;
        first = same && !found ? i : first;
        found |= same;
        scopes |= same ? m->tokens[i].scopes : 0;
    }
    if (found && name != NULL)
        memcpy(name, m->tokens[first].name, sizeof(m->tokens[first].name));
    if (found && limit != NULL)
        *limit = m->tokens[first].limit;
    pthread_rwlock_unlock(&m->lock);
    if (!found)
        return SVC_AUTH_INVALID;
    return (scopes & SVC_SCOPE_BIT(scope)) ? SVC_AUTH_OK : SVC_AUTH_FORBIDDEN;
}
