/* rowlock-cli's shapes of a command on a REST resource: a body given as a JSON argument or on
 * stdin, one call whose answer is printed, and every page of a list with a name cursor. The
 * commands choose the paths and members; HTTP is in http.c, the printing in output.c. */
#ifndef CLI_REST_H
#define CLI_REST_H

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"

/* The JSON text argv[at], or stdin when at is argc, as a new value (the caller's: json_decref);
 * any JSON value, the service judges its shape. NULL after printing "usage: <what> is not JSON:
 * <why>" (the command exits 2, having sent nothing). */
json_t *cli_rest_body(int argc, char **argv, int at, const char *what);

/* Sends method path (escaped) with body (borrowed; NULL: none) on h and prints the answer as
 * cli_out_json does; flags as cli_http_call's. Returns the exit code (the problem printed when
 * it is not 0). */
int cli_rest_print(const struct cli_conf *conf, struct cli_http *h, const char *method,
                   const char *path, const json_t *body, int flags);

/* Every page of GET path (escaped, without a query) with limit=1000 and after=<the answer's
 * "next">, while "next" is a string: each element of the answer's array `member` printed as an
 * NDJSON line as its page comes or, on a terminal, one table of these columns (NULL-terminated)
 * after the last page. Returns the exit code of the first page that failed, else 0. */
int cli_rest_list(const struct cli_conf *conf, struct cli_http *h, const char *path,
                  const char *member, const char *const *columns);

#endif
