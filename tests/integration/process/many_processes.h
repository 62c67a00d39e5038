/* The ways into test_many_processes' cluster: haproxy on the shipped configuration
 * (deploy/haproxy/rowlock.cfg) started and stopped by its PID, and an HTTP client that resends
 * what may not have arrived (many_processes.c). The workloads and the verdicts live in
 * test_many_processes.c, the queue's verdict in queue_verdict.c (shared). */
#ifndef TESTS_MANY_PROCESSES_H
#define TESTS_MANY_PROCESSES_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "harness.h"

#define MP_TARGETS 4    /* 0: haproxy, 1..3: each rowlock process directly */
#define MP_RETRY_S 30.0 /* how long a client keeps resending one request */

/* The port of each target; mp_haproxy_start fills [0], the test [1..]. */
extern int mp_ports[MP_TARGETS];
/* Requests resent after a failed try, and answers no rule allows (every thread adds). */
extern atomic_long mp_resent, mp_unexpected;

/* A free TCP port on 127.0.0.1 (closed again: the caller binds it soon), or -1. */
int mp_free_port(void);
/* Starts haproxy (found in PATH or /usr/sbin) on deploy/haproxy/rowlock.cfg, listening on a free
 * port (mp_ports[0]) in front of mp_ports[1..], its log in many_processes_haproxy.log; waits up
 * to 20 s for a request to pass through. Returns its PID, or -1 after saying why (*pid is set
 * as soon as it runs, so a failed start is stopped too). */
int mp_haproxy_start(pid_t *pid);
/* Stops haproxy by its PID (SIGTERM, SIGKILL after 5 s); sets *pid to 0. */
void mp_haproxy_stop(pid_t *pid);

/* One keep-alive connection to one target. */
struct mp_client {
    CURL *curl;
    struct th_buf buf;
    int target;
};
void mp_client_init(struct mp_client *c, int target);
void mp_client_free(struct mp_client *c);
/* Sends body (stolen, may be NULL) as ct (NULL: JSON) and resends the same bytes after a
 * transport error, 502, 503 or 504 for up to MP_RETRY_S. Returns the last status (-1: no
 * answer), *out the answer's JSON (the caller's, may be NULL), *resent 1 when a try before it
 * failed (that earlier try may have been applied). */
long mp_call(struct mp_client *c, const char *method, const char *path, json_t *body,
             const char *ct, json_t **out, int *resent);
/* mp_call that must end in a 2xx: returns its JSON (the caller's), or NULL after counting and
 * printing an unexpected answer. */
json_t *mp_call_ok(struct mp_client *c, const char *method, const char *path, json_t *body,
                   const char *ct);
/* Counts an answer no rule allows and prints the first 20. j is borrowed. */
void mp_unexpected_answer(const char *what, long st, json_t *j);

#endif
