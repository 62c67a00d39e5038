/* The entity-tag parser and comparisons of conditional requests (see etag.h): RFC 9110's
 * grammar (If-Match = "*" / #entity-tag, entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, elements
 * separated by OWS "," OWS, empty elements accepted, section 5.6.1.2). A list is read from its
 * start until a match, a "*" or something malformed, as rowlock always read it. */
#include "routes/etag.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "service/http.h"

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

/* etagc = %x21 / %x23-7E / obs-text: no space, quote, control or DEL */
static int etagc(unsigned char c)
{
    return c == 0x21 || (c >= 0x23 && c != 0x7f);
}

int route_etag_any(const char *field)
{
    if (field == NULL)
        return 0;
    while (ows(*field))
        field++;
    if (*field++ != '*')
        return 0;
    while (ows(*field))
        field++;
    return *field == '\0';
}

int route_etag_next(const char **p, struct route_etag *t)
{
    const char *s = *p;
    while (ows(*s) || *s == ',')
        s++;
    if (*s == '\0') {
        *p = s;
        return 0;
    }
    *t = (struct route_etag){0};
    if (s[0] == '*' && (ows(s[1]) || s[1] == ',' || s[1] == '\0')) {
        t->any = 1;
        s++;
    } else {
        t->weak = s[0] == 'W' && s[1] == '/';
        s += t->weak ? 2 : 0;
        if (*s != '"') /* a bare token (a number, say) is no entity tag */
            return -1;
        t->opaque = ++s;
        while (etagc((unsigned char)*s))
            s++;
        t->len = (size_t)(s - t->opaque);
        if (*s++ != '"')
            return -1;
    }
    while (ows(*s))
        s++;
    if (*s != ',' && *s != '\0') /* "1" "2": tags without the comma between them */
        return -1;
    *p = s;
    return 1;
}

int route_etag_listed(const char *field, const char *etag, enum route_etag_compare cmp)
{
    size_t n = strlen(etag);
    if (field == NULL || n < 2 || etag[0] != '"' || etag[n - 1] != '"')
        return 0;
    const char *want = etag + 1;
    size_t wl = n - 2;
    struct route_etag t;
    for (const char *p = field; route_etag_next(&p, &t) == 1;)
        if (t.any ||
            ((cmp == ROUTE_ETAG_WEAK || !t.weak) && t.len == wl && memcmp(t.opaque, want, wl) == 0))
            return 1;
    return 0;
}

int route_etag_names(const char *field, int64_t version, enum route_etag_compare cmp)
{
    char etag[ROUTE_ETAG_SIZE];
    return route_etag_listed(field, route_etag_of(version, etag), cmp);
}

const char *route_etag_of(int64_t version, char buf[ROUTE_ETAG_SIZE])
{
    snprintf(buf, ROUTE_ETAG_SIZE, "\"%" PRId64 "\"", version);
    return buf;
}

int route_etag_set(struct svc_request *req, int64_t version)
{
    char etag[ROUTE_ETAG_SIZE];
    return svc_req_add_header(req, "ETag", route_etag_of(version, etag));
}
