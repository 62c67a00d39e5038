/* Long-poll waiters: a handler that found nothing to return suspends its connection on a wake
 * channel (no thread, no database connection held) until a wake of that channel, its deadline,
 * or its periodic re-check (which finds writes made by other processes); its handler then runs
 * again. The long-poll steps, the waiters and their counters; what announces a write is wake.h. */
#ifndef SVC_WAIT_H
#define SVC_WAIT_H

#include "service/router.h"

struct svc_server;
struct svc_request;

/* Room for a wake channel's name with its NUL: "<resource>:<resource name>" (a resource name
 * has at most DB_NAME_MAX characters; svc_families_check makes sure every family's fit) or
 * "gate:<slot>". */
#define SVC_CHANNEL_MAX 160

/* One run of a long-polling handler, which reads like the contract:
 *     struct svc_poll poll = svc_poll_begin(req, wait_s);      before looking for data
 *     ...look; nothing new...
 *     if (svc_poll_may_wait(req, &poll))
 *         return svc_poll_wait(req, &poll, channel);
 *     reply with what there is
 * A wake, the deadline or the re-check runs the handler again from the top. */
struct svc_poll {
    unsigned generation; /* the wakes counted before the handler looked */
    double deadline;     /* on the svc_now() clock: when the request began, plus its wait */
};

/* Admits a long-poll the client asked for (wait_s above 0), before its handler looks for
 * anything: it takes one of its token's long-poll places (struct svc_limit), held until the
 * request completes; a resumed run holds its place already. Returns 0 to go on, or 1 with a 429
 * too_many_long_polls queued (the outcome in *out) when they are all taken. */
int svc_poll_admit(struct svc_request *req, double wait_s, enum svc_outcome *out);
/* Starts a run: reads the wake generation before the handler looks for data (so that a wake in
 * between is not lost) and sets the deadline wait_s after the request began (every run of one
 * request has the same deadline). */
struct svc_poll svc_poll_begin(const struct svc_request *req, double wait_s);
/* 1 when waiting makes sense: before the deadline, and the server not stopping; else 0. */
int svc_poll_may_wait(const struct svc_request *req, const struct svc_poll *poll);
/* Suspends req on channel (copied) and returns SVC_SUSPENDED; when a wake came since
 * svc_poll_begin, or the server is stopping, runs the handler again at once instead and returns
 * what it returns. Out of memory: a 500 problem. */
enum svc_outcome svc_poll_wait(struct svc_request *req, const struct svc_poll *poll,
                               const char *channel);
/* How many times this request's long-poll was resumed (0 on its first run). */
int svc_req_resumes(const struct svc_request *req);

/* Wakes at most n (-1: every) request waiting on channel, oldest first, from any thread (a
 * notification from another process, say); announces nothing (see svc_req_wake_n). */
void svc_server_wake(struct svc_server *s, const char *channel, long n);
/* Requests suspended now. */
long svc_server_waiting(const struct svc_server *s);
/* Waiters resumed by their periodic re-check (not a wake, not their deadline) since the start:
 * how often long-polls fall back to polling. */
unsigned long svc_server_rechecks(const struct svc_server *s);
/* Waiters resumed by a wake of their channel, from this process or another, since the start. */
unsigned long svc_server_woken(const struct svc_server *s);

#endif
