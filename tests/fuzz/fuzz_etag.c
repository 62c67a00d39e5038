/* Fuzz target: the If-Match / If-None-Match parser (routes/etag.h). Input: a field value. Every
 * tag read lies inside the field between its quotes, of RFC 9110's etagc bytes, weak exactly when
 * W/ precedes it; a well-formed list written back canonically reads as the same elements; a tag
 * is named exactly when one of the elements read before anything malformed is "*" or matches it
 * (weakly: any tag with its opaque-tag; strongly: a strong one), and "*" alone names any. */
#include <stdlib.h>
#include <string.h>

#include "routes/etag.h"
#include "tests/fuzz/fuzz.h"

#define MAX_TAGS 64

static int etagc_ref(unsigned char c)
{
    return c == '!' || (c >= '#' && c <= '~') || c >= 0x80;
}

/* Reads every tag of field into tags (at most MAX_TAGS kept); the last result of
 * route_etag_next (0 or -1), checking each tag's place and bytes. */
static int read_all(const char *field, struct route_etag *tags, size_t *n)
{
    const char *p = field;
    size_t len = strlen(field);
    struct route_etag t;
    int rc;
    *n = 0;
    for (size_t steps = 0; (rc = route_etag_next(&p, &t)) == 1; steps++) {
        FUZZ_ASSERT(steps <= len); /* each element takes at least one byte */
        FUZZ_ASSERT(p > field && p <= field + len);
        if (t.any) {
            if (*n < MAX_TAGS)
                tags[(*n)++] = t;
            continue;
        }
        FUZZ_ASSERT(t.opaque > field && t.opaque + t.len < field + len);
        FUZZ_ASSERT(t.opaque[-1] == '"' && t.opaque[t.len] == '"');
        for (size_t i = 0; i < t.len; i++)
            FUZZ_ASSERT(etagc_ref((unsigned char)t.opaque[i]));
        int w = t.opaque - field >= 3 && t.opaque[-3] == 'W' && t.opaque[-2] == '/';
        FUZZ_ASSERT(t.weak == w);
        FUZZ_ASSERT(p > t.opaque + t.len && p <= field + len);
        if (*n < MAX_TAGS)
            tags[(*n)++] = t;
    }
    FUZZ_ASSERT(rc == 0 || rc == -1);
    return rc;
}

/* The strong tag "<opaque>" of t (malloc'd). */
static char *quoted(const struct route_etag *t)
{
    char *q = malloc(t->len + 3);
    FUZZ_ASSERT(q != NULL);
    q[0] = '"';
    memcpy(q + 1, t->opaque, t->len);
    memcpy(q + 1 + t->len, "\"", 2);
    return q;
}

/* Is opaque (len bytes) named by tags[0..n) under the strong or the weak comparison? */
static int model(const struct route_etag *tags, size_t n, const char *opaque, size_t len, int weak)
{
    for (size_t k = 0; k < n; k++)
        if (tags[k].any || ((weak || !tags[k].weak) && tags[k].len == len &&
                            memcmp(tags[k].opaque, opaque, len) == 0))
            return 1;
    return 0;
}

/* tags[0..n) written back as W/"a", "b", * (malloc'd). */
static char *canonical(const struct route_etag *tags, size_t n)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += tags[i].len + 6;
    char *out = malloc(cap), *o = out;
    FUZZ_ASSERT(out != NULL);
    for (size_t i = 0; i < n; i++) {
        if (i > 0) {
            *o++ = ',';
            *o++ = ' ';
        }
        if (tags[i].any) {
            *o++ = '*';
            continue;
        }
        if (tags[i].weak) {
            *o++ = 'W';
            *o++ = '/';
        }
        *o++ = '"';
        memcpy(o, tags[i].opaque, tags[i].len);
        o += tags[i].len;
        *o++ = '"';
    }
    *o = '\0';
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *field = fuzz_cstr(data, size);
    struct route_etag tags[MAX_TAGS];
    size_t n = 0;
    int rc = read_all(field, tags, &n);
    int any = route_etag_any(field);
    FUZZ_ASSERT(!any || (rc == 0 && n == 1 && tags[0].any)); /* "*" alone */
    static const char *const probes[] = {"\"0\"", "\"\"", "\"W/\""};
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        int strong = route_etag_listed(field, probes[i], ROUTE_ETAG_STRONG);
        int weak = route_etag_listed(field, probes[i], ROUTE_ETAG_WEAK);
        size_t len = strlen(probes[i]) - 2;
        FUZZ_ASSERT(!strong || weak);
        FUZZ_ASSERT(!any || strong);
        FUZZ_ASSERT(n == MAX_TAGS || weak == model(tags, n, probes[i] + 1, len, 1));
        FUZZ_ASSERT(n == MAX_TAGS || strong == model(tags, n, probes[i] + 1, len, 0));
    }
    for (size_t i = 0; i < n && n < MAX_TAGS; i++) {
        if (tags[i].any)
            continue;
        char *q = quoted(&tags[i]);
        FUZZ_ASSERT(route_etag_listed(field, q, ROUTE_ETAG_WEAK)); /* read, so named */
        FUZZ_ASSERT(route_etag_listed(field, q, ROUTE_ETAG_STRONG) ==
                    model(tags, n, tags[i].opaque, tags[i].len, 0));
        free(q);
    }
    if (rc == 0 && n < MAX_TAGS) {
        char *again = canonical(tags, n);
        struct route_etag back[MAX_TAGS];
        size_t m = 0;
        FUZZ_ASSERT(read_all(again, back, &m) == 0 && m == n);
        for (size_t i = 0; i < n; i++)
            FUZZ_ASSERT(
                back[i].any == tags[i].any &&
                (tags[i].any || (back[i].weak == tags[i].weak && back[i].len == tags[i].len &&
                                 memcmp(back[i].opaque, tags[i].opaque, tags[i].len) == 0)));
        free(again);
    }
    free(field);
    return 0;
}
