/* Entity tags (RFC 9110 section 8.8.3) and the conditional requests that list them: the one
 * parser of an If-Match / If-None-Match field value (section 13.1), its strong and weak
 * comparisons, and the ETag header of a version number. What a version stands for (a head
 * offset, a ledger item's version, a consumer's offset) is the caller's; no SQL, no JSON. */
#ifndef ROUTES_ETAG_H
#define ROUTES_ETAG_H

#include <stddef.h>
#include <stdint.h>

struct svc_request;

/* Bytes of the strong entity tag of any int64 version, quotes and NUL included
 * ("\"-9223372036854775808\"": 23). */
#define ROUTE_ETAG_SIZE 24

/* If-Match compares strongly (a weak tag never matches), If-None-Match weakly (section 13.1). */
enum route_etag_compare { ROUTE_ETAG_STRONG, ROUTE_ETAG_WEAK };

/* One element of a field value: "*" (any), or an entity tag: its opaque-tag between the quotes
 * (len bytes, pointing into the field) and whether it came as W/"...". */
struct route_etag {
    const char *opaque;
    size_t len;
    int weak;
    int any;
};

/* Is the field value "*" (spaces around it aside)? NULL is not. */
int route_etag_any(const char *field);
/* Reads the next element of the list at *p (start with *p at the field value; commas, empty
 * elements and spaces between them are skipped): "*" or an entity tag. Returns 1 with *t, *p
 * moved past it; 0 at the end of the list (an empty value ends at once); -1 when what follows is
 * malformed (a bare token such as a number, an unterminated tag, a character no tag holds, two
 * tags without a comma). */
int route_etag_next(const char **p, struct route_etag *t);
/* Does the field value (NULL: absent) name etag, a strong tag with its quotes ("\"42\"")? The
 * list is read from its start: a "*" names any (whether a current representation exists is the
 * caller's to say), a tag that matches by cmp names it, and what follows something malformed is
 * not read. An empty value names nothing. */
int route_etag_listed(const char *field, const char *etag, enum route_etag_compare cmp);
/* route_etag_listed of the strong tag of version. */
int route_etag_names(const char *field, int64_t version, enum route_etag_compare cmp);
/* Writes the strong entity tag of version ("\"42\"") into buf and returns buf. */
const char *route_etag_of(int64_t version, char buf[ROUTE_ETAG_SIZE]);
/* Sets the answer's ETag header to the strong tag of version. 0, or -1 when out of memory. */
int route_etag_set(struct svc_request *req, int64_t version);

#endif
