/* rowlock-cli's HTTP client on libcurl: one request with the token, JSON in and out, retries with
 * backoff after 503s (honouring Retry-After) and connection errors, and problem+json answers
 * turned into one line and an exit code. Knows no command. One struct cli_http per thread. */
#ifndef CLI_HTTP_H
#define CLI_HTTP_H

#include <jansson.h>
#include <stdatomic.h>

#include "cli/cli.h"

struct cli_http;

/* Request flags. */
enum {
    /* Safe to send again after a transport error once the request may have reached the service
     * (GET, PUT, DELETE, a fenced lease write, a produce with producer sequences); without it only
     * a failure to connect and a 503 that is not outcome_unknown are retried. */
    CLI_HTTP_IDEMPOTENT = 1,
    /* Never retry (heartbeats: the caller has its own clock). */
    CLI_HTTP_ONCE = 2,
};

struct cli_reply {
    long status;      /* HTTP status, 0 when no answer came */
    json_t *json;     /* parsed body (owned), NULL when not JSON */
    char code[64];    /* problem code, or "" */
    char detail[512]; /* problem detail, or the transport error */
};

/* A client for conf (borrowed; must outlive it). NULL on allocation failure. */
struct cli_http *cli_http_new(const struct cli_conf *conf);
void cli_http_free(struct cli_http *h);

/* Sends method path (already percent-encoded where needed) with body (borrowed JSON, NULL: none)
 * and fills r (release with cli_reply_clear). timeout_s (seconds) bounds one attempt. Returns 0
 * when an answer other than a retryable 503 came, whatever its status, or CLI_EXIT_UNAVAILABLE when
 * every retry failed (r->detail says why). */
int cli_http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
                  int flags, double timeout_s, struct cli_reply *r);
void cli_reply_clear(struct cli_reply *r);

/* The exit code of an answer (0 for 2xx); prints "rowlock-cli: <code>: <detail>" for others. */
int cli_reply_exit(const struct cli_reply *r);
/* The exit code of a status alone, printing nothing. */
int cli_status_exit(long status);

/* Percent-encodes s for a path segment or query value into a new string (free()), NULL on
 * allocation failure. */
char *cli_http_escape(struct cli_http *h, const char *s);

/* One more request header ("Name: value", copied) on every later call of h; NULL: none. */
void cli_http_header(struct cli_http *h, const char *line);

/* The same without a client. */
char *cli_escape(const char *s);

/* Stop flag polled during retry sleeps (work's SIGTERM): when it becomes non-zero a retry loop
 * gives up at once with CLI_EXIT_UNAVAILABLE. NULL: none. */
void cli_http_set_abort(struct cli_http *h, const atomic_int *flag);

#endif
