/* Bearer-token authentication: tokens and their scopes loaded from a file, stored only as
 * SHA-256 digests and compared in constant time. Deciding which scope a route needs belongs
 * to the route table; writing 401/403 belongs to http_check.c. */
#ifndef SVC_AUTH_H
#define SVC_AUTH_H

#include <stddef.h>
#include <stdio.h>

#include "service/limits.h"
#include "service/router.h"

#define SVC_SCOPE_BIT(s) (1u << (s))
/* Longest token name (the name=<name> word of a tokens file line). */
#define SVC_AUTH_NAME_MAX 64

struct svc_auth;

/* Loads the tokens file: one token per line followed by its scopes (read, write, work, admin)
 * and optionally name=<name>, separated by spaces or commas; blank lines and lines starting with
 * '#' are ignored; tokens are at least 16 characters. A name (what logs call the token; never
 * the secret) is 1 to SVC_AUTH_NAME_MAX letters, digits, '.', '_' or '-' starting with a letter
 * or digit; a token without one is named _line-<n>, after its line. admin grants every scope; no
 * other scope implies another (write does not include read: auth.c says what each allows).
 * rate=<n>, burst=<n> and long_polls=<n> on a line set that token's limits (struct svc_limit;
 * rate and long_polls 0 to SVC_LIMIT_MAX, 0 for none; burst 1 to SVC_LIMIT_MAX), each at most
 * once; what a line leaves out comes from the settings. Returns a new set (svc_auth_free it), or
 * NULL after writing the file, line and reason to err. */
struct svc_auth *svc_auth_load(const char *path, FILE *err);
void svc_auth_free(struct svc_auth *a);
size_t svc_auth_count(const struct svc_auth *a);
/* Reads the tokens file again and, when it parses, makes its tokens the only ones accepted
 * (checks running on other threads meanwhile see the old set or the new one, never a mix).
 * Returns 0, or -1 with the old tokens kept and the file, line and reason in why. */
int svc_auth_reload(struct svc_auth *a, const char *path, char *why, size_t whylen);

enum svc_auth_result { SVC_AUTH_OK, SVC_AUTH_MISSING, SVC_AUTH_INVALID, SVC_AUTH_FORBIDDEN };

/* Checks an Authorization header value (may be NULL) for the scope; spaces and TABs after the
 * token are not part of it. Every stored digest is compared, whatever matches, so timing does
 * not depend on which token was presented. When name is not NULL it receives the token's name
 * for SVC_AUTH_OK and SVC_AUTH_FORBIDDEN, and "" otherwise; when limit is not NULL it receives
 * the limits of the token's line for them (-1 where the line sets none; all -1 otherwise). */
enum svc_auth_result svc_auth_check(const struct svc_auth *a, const char *authorization,
                                    enum svc_scope scope, char name[SVC_AUTH_NAME_MAX + 1],
                                    struct svc_limit *limit);

#endif
