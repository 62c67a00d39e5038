/* JSON helpers for routes: RFC 7396 merge patch, validation of names and keys, and UTF-8
 * (validation, and cleaning of untrusted bytes for problem details and logs).
 * Pure functions on jansson values and strings; no HTTP, no database. */
#ifndef SVC_JSON_UTIL_H
#define SVC_JSON_UTIL_H

#include <jansson.h>
#include <stddef.h>

/* RFC 7396: applies patch to target (both borrowed; target may be NULL, meaning absent) and
 * returns a new reference to the result, or NULL when out of memory. */
json_t *svc_merge_patch(const json_t *target, const json_t *patch);

/* Resource names: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$. Returns 1, or 0 with the broken rule in
 * why (a sentence for a problem's detail). */
int svc_valid_name(const char *name, char *why, size_t whysize);
/* Message keys and object ids: non-empty UTF-8, at most 1024 bytes. Same result. */
int svc_valid_key(const char *key, char *why, size_t whysize);
/* An RFC 3339 timestamp with a zone: 2026-01-02T03:04:05Z, 2026-01-02T03:04:05.123+01:00. */
int svc_rfc3339_valid(const char *s);
/* Is s (len bytes) well-formed UTF-8 without NUL? */
int svc_utf8_valid(const char *s, size_t len);
/* Length (1 to 4) of the well-formed UTF-8 character at s, which has avail bytes, or 0 when the
 * bytes there are not one (a stray continuation, overlong, surrogate, truncated or NUL). */
size_t svc_utf8_char_len(const char *s, size_t avail);
/* Copies s (len bytes, any content) into out as well-formed UTF-8 without NUL: each byte that
 * does not begin a well-formed character becomes U+FFFD. Stops at the first character that
 * would take the copy past max bytes, so a character is never split. out holds max + 1 bytes;
 * the copy is NUL-terminated. Returns its length; *cut (may be NULL) tells whether input was
 * left over. */
size_t svc_utf8_clean(const char *s, size_t len, char *out, size_t max, int *cut);

#endif
