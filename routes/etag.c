/* The entity-tag parser and comparisons of conditional requests (see etag.h), written to RFC
 * 9110's grammar: If-Match = "*" / #entity-tag, entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE,
 * list elements separated by OWS "," OWS, empty elements accepted (section 5.6.1.2). */
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
    int weak = s[0] == 'W' && s[1] == '/';
    s += weak ? 2 : 0;
    if (*s != '"')
        return -1;
    const char *opaque = ++s;
    while (etagc((unsigned char)*s))
        s++;
    if (*s != '"')
        return -1;
    t->opaque = opaque;
    t->len = (size_t)(s - opaque);
    t->weak = weak;
    for (s++; ows(*s); s++)
        ;
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
    if (route_etag_any(field))
        return 1;
    const char *want = etag + 1;
    size_t wl = n - 2;
    int found = 0, rc;
    struct route_etag t;
    for (const char *p = field; (rc = route_etag_next(&p, &t)) == 1;)
        found |=
            (cmp == ROUTE_ETAG_WEAK || !t.weak) && t.len == wl && memcmp(t.opaque, want, wl) == 0;
    return rc == 0 && found;
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
