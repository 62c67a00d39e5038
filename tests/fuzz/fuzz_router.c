/* Fuzz target: the router and percent-decoding against the real route table. Input: a request
 * line's "METHOD TARGET" (no space: GET and the whole input as target). Checks what a match
 * promises (decoded parameters without NUL, lengths that agree, the right method, nothing to
 * free on failure, an Allow list without the asked method) and compares svc_percent_decode with
 * a reference decoder written here. */
#include <stdlib.h>
#include <string.h>

#include "routes/routes.h"
#include "service/router.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_routes.h"

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The reference: RFC 3986 percent-decoding that refuses a short or non-hex escape and %00. */
static long ref_decode(const char *in, size_t len, char *out, int plus)
{
    size_t o = 0, i = 0;
    while (i < len) {
        if (in[i] != '%') {
            out[o++] = plus && in[i] == '+' ? ' ' : in[i];
            i++;
            continue;
        }
        if (len - i < 3 || hex(in[i + 1]) < 0 || hex(in[i + 2]) < 0)
            return -1;
        int v = hex(in[i + 1]) * 16 + hex(in[i + 2]);
        if (v == 0)
            return -1;
        out[o++] = (char)v;
        i += 3;
    }
    return (long)o;
}

static void check_decode(const char *in, size_t len, int plus)
{
    char *out = malloc(len + 1), *ref = malloc(len + 1), *enc = malloc(3 * len + 1);
    FUZZ_ASSERT(out && ref && enc);
    long n = svc_percent_decode(in, len, out, plus);
    FUZZ_ASSERT(n == ref_decode(in, len, ref, plus));
    if (n >= 0) {
        FUZZ_ASSERT((size_t)n <= len && out[n] == '\0' && strlen(out) == (size_t)n);
        FUZZ_ASSERT(memcmp(out, ref, (size_t)n) == 0);
        /* encoding every byte and decoding again gives the same bytes */
        static const char digits[] = "0123456789ABCDEF";
        for (long i = 0; i < n; i++) {
            unsigned char c = (unsigned char)out[i];
            enc[3 * i] = '%', enc[3 * i + 1] = digits[c >> 4], enc[3 * i + 2] = digits[c & 15];
        }
        FUZZ_ASSERT(svc_percent_decode(enc, 3 * (size_t)n, ref, plus) == n);
        FUZZ_ASSERT(memcmp(out, ref, (size_t)n) == 0);
    }
    free(out);
    free(ref);
    free(enc);
}

static size_t template_params(const char *tpl)
{
    size_t n = 0;
    for (const char *p = tpl; (p = strstr(p, "/{")) != NULL; p++)
        n++;
    return n;
}

static void check_ok(const struct svc_match *m, const char *method)
{
    FUZZ_ASSERT(m->route >= 0 && (size_t)m->route < fuzz_routes_count);
    const struct svc_route *r = &fuzz_routes_table[m->route];
    FUZZ_ASSERT(strcmp(r->method, strcmp(method, "HEAD") == 0 ? "GET" : method) == 0);
    FUZZ_ASSERT(m->nparams == template_params(r->path) && m->nparams <= SVC_MAX_PARAMS);
    for (size_t i = 0; i < m->nparams; i++) {
        const struct svc_param *p = &m->params[i];
        FUZZ_ASSERT(p->value != NULL && p->value_len > 0 && strlen(p->value) == p->value_len);
        FUZZ_ASSERT(p->name > r->path && p->name[-1] == '{' && p->name[p->name_len] == '}');
    }
    FUZZ_ASSERT(m->nquery <= SVC_MAX_QUERY);
    for (size_t i = 0; i < m->nquery; i++) {
        const struct svc_param *q = &m->query[i];
        FUZZ_ASSERT(strlen(q->name) == q->name_len && strlen(q->value) == q->value_len);
        FUZZ_ASSERT(svc_match_query(m, q->name) != NULL);
    }
}

static void check_refused(const struct svc_match *m, enum svc_match_result r, const char *method)
{
    FUZZ_ASSERT(m->route == -1 && m->nparams == 0 && m->nquery == 0);
    if (r != SVC_MATCH_METHOD_NOT_ALLOWED)
        return;
    /* the Allow list names other methods of a path that exists, never the asked one */
    FUZZ_ASSERT(m->allow[0] != '\0' && strlen(m->allow) < sizeof(m->allow));
    const char *asked = strcmp(method, "HEAD") == 0 ? "GET" : method;
    char allow[sizeof(m->allow)];
    memcpy(allow, m->allow, sizeof(allow));
    for (char *save = NULL, *tok = strtok_r(allow, ", ", &save); tok != NULL;
         tok = strtok_r(NULL, ", ", &save))
        FUZZ_ASSERT(strcmp(tok, asked) != 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = fuzz_cstr(data, size);
    char *space = strchr(line, ' ');
    const char *method = "GET", *target = line;
    if (space != NULL) {
        *space = '\0';
        method = line;
        target = space + 1;
    }
    struct svc_match m;
    enum svc_match_result r =
        svc_router_match(fuzz_routes_table, fuzz_routes_count, method, target, &m);
    FUZZ_ASSERT(r >= SVC_MATCH_OK && r <= SVC_MATCH_DUPLICATE_QUERY);
    if (r == SVC_MATCH_OK) {
        check_ok(&m, method);
        svc_match_free(&m);
        FUZZ_ASSERT(m.nparams == 0 && m.nquery == 0);
    } else {
        check_refused(&m, r, method);
    }
    check_decode(target, strlen(target), 0);
    check_decode(target, strlen(target), 1);
    free(line);
    return 0;
}
