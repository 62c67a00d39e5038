/* Fuzz target: query strings. Input: the text after '?' of a real route's target. A reference
 * model written here (split at '&', name and value at the first '=', '+' as space, %XX escapes,
 * at most SVC_MAX_QUERY parameters, each name at most once) must agree with the router on the
 * result and on every decoded name and value; a parsed query, encoded again, parses to the same
 * parameters. */
#include <stdlib.h>
#include <string.h>

#include "routes/routes.h"
#include "service/router.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_routes.h"

#define PATH "/topics/t1/messages"

struct ref_param {
    char *name, *value;
};

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes in[0..len) into a new string; NULL for a bad escape or %00. */
static char *ref_decode(const char *in, size_t len)
{
    char *out = malloc(len + 1);
    FUZZ_ASSERT(out != NULL);
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i] == '+' ? ' ' : in[i];
        if (in[i] == '%') {
            if (len - i < 3 || hex(in[i + 1]) < 0 || hex(in[i + 2]) < 0 ||
                hex(in[i + 1]) * 16 + hex(in[i + 2]) == 0) {
                free(out);
                return NULL;
            }
            c = (char)(hex(in[i + 1]) * 16 + hex(in[i + 2]));
            i += 2;
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

/* The model: fills p (SVC_MAX_QUERY entries), sets *n, returns the expected result. */
static enum svc_match_result ref_parse(const char *q, struct ref_param *p, size_t *n)
{
    *n = 0;
    for (const char *piece = q; *piece != '\0';) {
        size_t len = strcspn(piece, "&");
        if (len > 0) {
            if (*n == SVC_MAX_QUERY)
                return SVC_MATCH_TOO_MANY_QUERY;
            const char *eq = memchr(piece, '=', len);
            size_t nlen = eq ? (size_t)(eq - piece) : len;
            p[*n].name = ref_decode(piece, nlen);
            p[*n].value = eq ? ref_decode(eq + 1, len - nlen - 1) : ref_decode("", 0);
            (*n)++;
            if (p[*n - 1].name == NULL || p[*n - 1].value == NULL)
                return SVC_MATCH_BAD_ENCODING;
            for (size_t k = 0; k + 1 < *n; k++)
                if (strcmp(p[k].name, p[*n - 1].name) == 0)
                    return SVC_MATCH_DUPLICATE_QUERY;
        }
        piece += len + (piece[len] == '&');
    }
    return SVC_MATCH_OK;
}

static void append_encoded(char *out, size_t *o, const char *s)
{
    static const char digits[] = "0123456789ABCDEF";
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        out[(*o)++] = '%';
        out[(*o)++] = digits[*c >> 4];
        out[(*o)++] = digits[*c & 15];
    }
}

/* Encodes every byte of the match's parameters and matches the result again. */
static void check_reencoded(const struct svc_match *m, size_t qlen)
{
    char *t = malloc(sizeof(PATH) + 1 + 3 * qlen + 2 * SVC_MAX_QUERY + 1);
    FUZZ_ASSERT(t != NULL);
    size_t o = strlen(PATH);
    memcpy(t, PATH "?", o + 1);
    o++;
    for (size_t i = 0; i < m->nquery; i++) {
        if (i > 0)
            t[o++] = '&';
        append_encoded(t, &o, m->query[i].name);
        t[o++] = '=';
        append_encoded(t, &o, m->query[i].value);
    }
    t[o] = '\0';
    struct svc_match again;
    FUZZ_ASSERT(svc_router_match(fuzz_routes_table, fuzz_routes_count, "GET", t, &again) ==
                SVC_MATCH_OK);
    FUZZ_ASSERT(again.nquery == m->nquery);
    for (size_t i = 0; i < m->nquery; i++) {
        FUZZ_ASSERT(strcmp(again.query[i].name, m->query[i].name) == 0);
        FUZZ_ASSERT(strcmp(again.query[i].value, m->query[i].value) == 0);
    }
    svc_match_free(&again);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *q = fuzz_cstr(data, size);
    size_t qlen = strlen(q);
    char *target = malloc(sizeof(PATH) + 1 + qlen);
    FUZZ_ASSERT(target != NULL);
    memcpy(target, PATH "?", sizeof(PATH) + 1);
    memcpy(target + sizeof(PATH), q, qlen + 1);

    struct ref_param ref[SVC_MAX_QUERY];
    size_t nref;
    enum svc_match_result want = ref_parse(q, ref, &nref);
    struct svc_match m;
    enum svc_match_result r =
        svc_router_match(fuzz_routes_table, fuzz_routes_count, "GET", target, &m);
    FUZZ_ASSERT(r == want);
    if (r == SVC_MATCH_OK) {
        FUZZ_ASSERT(m.nquery == nref);
        for (size_t i = 0; i < nref; i++) {
            FUZZ_ASSERT(strcmp(m.query[i].name, ref[i].name) == 0);
            FUZZ_ASSERT(strcmp(m.query[i].value, ref[i].value) == 0);
            FUZZ_ASSERT(m.query[i].name_len == strlen(ref[i].name));
            FUZZ_ASSERT(m.query[i].value_len == strlen(ref[i].value));
        }
        check_reencoded(&m, qlen);
        svc_match_free(&m);
    } else {
        FUZZ_ASSERT(m.route == -1 && m.nquery == 0);
        /* a repeated name is named (cut to fit) for the problem's detail */
        FUZZ_ASSERT(r != SVC_MATCH_DUPLICATE_QUERY ||
                    strncmp(ref[nref - 1].name, m.bad_query, strlen(m.bad_query)) == 0);
    }
    for (size_t i = 0; i < nref; i++) {
        free(ref[i].name);
        free(ref[i].value);
    }
    free(target);
    free(q);
    return 0;
}
