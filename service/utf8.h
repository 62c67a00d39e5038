/* UTF-8: validation, and cleaning of untrusted bytes for problem details and logs. Pure
 * functions on strings. */
#ifndef SVC_UTF8_H
#define SVC_UTF8_H

#include <stddef.h>

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
