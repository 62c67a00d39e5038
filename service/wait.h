/* Long-poll waiters: a handler that found nothing to return suspends its connection on a wake
 * channel (no thread, no database connection held) until a wake of that channel, its deadline,
 * or its periodic re-check (which finds writes made by other processes); its handler then runs
 * again. The waiters and their counters; what announces a write is wake.h. */
#ifndef SVC_WAIT_H
#define SVC_WAIT_H

#include "service/clock.h"
#include "service/router.h"

struct svc_server;
struct svc_request;

/* A handler that found nothing to return may suspend its connection on a channel (a string such
 * as "topic:orders"); libmicrohttpd then calls the handler again. Typical use:
 *     unsigned gen = svc_wake_generation(req);
 *     ...query; nothing new...
 *     if (svc_req_may_wait(req, deadline)) return svc_req_wait(req, channel, deadline, gen);
 *     reply with what there is
 */
/* Seconds since the request began. */
double svc_req_age(const struct svc_request *req);
/* A counter of wakes, read before looking for data so that a wake in between is not lost. */
unsigned svc_wake_generation(const struct svc_request *req);
/* True when waiting makes sense: before the deadline and not shutting down. */
int svc_req_may_wait(const struct svc_request *req, double deadline);
/* Suspends the request (or re-runs its handler at once when a wake came after gen). */
enum svc_outcome svc_req_wait(struct svc_request *req, const char *channel, double deadline,
                              unsigned gen);
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
