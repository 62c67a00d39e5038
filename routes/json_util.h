/* JSON helpers for routes: RFC 7396 merge patch, reading back stored JSON, and validation of
 * names, keys and RFC 3339 times. Pure functions on jansson values and strings; no HTTP, no
 * database. */
#ifndef ROUTES_JSON_UTIL_H
#define ROUTES_JSON_UTIL_H

#include <jansson.h>
#include <stddef.h>

/* RFC 7396: applies patch to target (both borrowed; target may be NULL, meaning absent) and
 * returns a new reference to the result, or NULL when out of memory. */
json_t *route_merge_patch(const json_t *target, const json_t *patch);

/* JSON text the service stored in a jsonb column and PostgreSQL wrote back (text, len bytes),
 * parsed (JSON_DECODE_ANY). jsonb writes every number in plain notation, so a double a client
 * sent as 1e19 comes back as 10000000000000000000, an integer jansson refuses; such a number is
 * read as a double instead, every other number as a strict parse reads it. Returns a new
 * reference, or NULL when the text is not JSON or memory ran out: the caller answers 500, never
 * null in place of stored data. */
json_t *route_json_stored(const char *text, size_t len);

/* Resource names: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$. Returns 1, or 0 with the broken rule in
 * why (a sentence for a problem's detail). */
int route_name_ok(const char *name, char *why, size_t whysize);
/* Message keys and object ids: non-empty UTF-8, at most 1024 bytes. Same result. */
int route_key_ok(const char *key, char *why, size_t whysize);
/* The key rule with a bound of the caller's: s (len bytes) is non-empty UTF-8 without NUL, at
 * most max bytes. Same result; why names the value "a <what>" (route_key_ok: "a key"). */
int route_text_ok(const char *s, size_t len, size_t max, const char *what, char *why,
                  size_t whysize);
/* An RFC 3339 timestamp with a zone: 2026-01-02T03:04:05Z, 2026-01-02T03:04:05.123+01:00. */
int route_rfc3339_ok(const char *s);
#endif
