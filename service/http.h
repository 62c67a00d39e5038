/* The HTTP server: libmicrohttpd in epoll thread-pool mode, one request context per request
 * (route match, params, request id, bounded body, parsed JSON, start time), limits (413, 414,
 * 431, 415), authentication, problem+json replies, access logs, request metrics and draining.
 * It takes the route table from main and never includes routes/. */
#ifndef SVC_HTTP_H
#define SVC_HTTP_H

#include <jansson.h>
#include <stdint.h>

#include "service/auth.h"
#include "service/clock.h"
#include "service/config.h"
#include "service/problem.h"
#include "service/router.h"

struct svc_server;
struct svc_request;

/* Starts listening. routes must outlive the server; auth may be NULL (open). app is handed to
 * handlers through svc_req_app. Suspended long-polls are re-checked every cfg->poll_interval_ms.
 * Returns NULL after logging why. */
struct svc_server *svc_server_start(const struct svc_config *cfg, const struct svc_route *routes,
                                    size_t nroutes, const struct svc_auth *auth, void *app);
uint16_t svc_server_port(const struct svc_server *s);
/* Stops accepting connections (closes the listening socket); requests in flight go on. */
void svc_server_quiesce(struct svc_server *s);
/* Stops accepting connections, waits up to timeout_s for in-flight requests to finish, then
 * stops the daemon and frees the server. Returns the number of requests cut short. */
int svc_server_shutdown(struct svc_server *s, int timeout_s);
/* Requests between their first byte and their completion, across all threads. */
long svc_server_in_flight(const struct svc_server *s);

/* Request accessors. Returned strings are owned by the request and live until it completes. */
void *svc_req_app(const struct svc_request *req);
const char *svc_req_param(const struct svc_request *req, const char *name);
const char *svc_req_query(const struct svc_request *req, const char *name);
const char *svc_req_header(const struct svc_request *req, const char *name);
const char *svc_req_id(const struct svc_request *req);
/* The parsed body of a route that takes JSON (borrowed), or NULL. */
json_t *svc_req_json(const struct svc_request *req);

/* Adds a response header for the reply that follows (copied). Returns 0 or -1. */
int svc_req_add_header(struct svc_request *req, const char *name, const char *value);

/* Replies. Each queues exactly one response and returns SVC_REPLIED, or SVC_FATAL when the
 * response could not be queued. */
enum svc_outcome svc_reply_json(struct svc_request *req, int status, json_t *body /* stolen */);
enum svc_outcome svc_reply_raw(struct svc_request *req, int status, const char *content_type,
                               char *body /* stolen, malloc'd */, size_t len);
/* A body that outlives the server (a constant), sent without copying. */
enum svc_outcome svc_reply_static(struct svc_request *req, int status, const char *content_type,
                                  const char *body, size_t len);
enum svc_outcome svc_reply_problem(struct svc_request *req, const struct svc_problem_info *p,
                                   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with extra members (stolen, may be NULL) merged into the problem document. */
enum svc_outcome svc_reply_problem_ext(struct svc_request *req, const struct svc_problem_info *p,
                                       json_t *ext, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- long-polls: waiting without a thread or a database connection ----
 * A handler that found nothing to return may suspend its connection on a channel (a string
 * such as "topic:orders") until svc_req_wake on that channel, its deadline, or the periodic
 * re-check (which covers writers in other processes); libmicrohttpd then calls the handler
 * again. Typical use:
 *     unsigned gen = svc_wake_generation(req);
 *     ...query; nothing new...
 *     if (svc_req_may_wait(req, deadline)) return svc_req_wait(req, channel, deadline, gen);
 *     reply with what there is
 */
/* Seconds since the request began. */
double svc_req_age(const struct svc_request *req);
/* How many times this request's long-poll was resumed (0 on its first run). */
int svc_req_resumes(const struct svc_request *req);
/* A counter of wakes, read before looking for data so that a wake in between is not lost. */
unsigned svc_wake_generation(const struct svc_request *req);
/* True when waiting makes sense: before the deadline and not shutting down. */
int svc_req_may_wait(const struct svc_request *req, double deadline);
/* Suspends the request (or re-runs its handler at once when a wake came after gen). */
enum svc_outcome svc_req_wait(struct svc_request *req, const char *channel, double deadline,
                              unsigned gen);
/* Wakes every request waiting on channel, in this process, and hands channel to the publish
 * function (svc_server_set_publish) for the other processes. Call it after the write committed. */
void svc_req_wake(struct svc_request *req, const char *channel);
/* Wakes at most n of them, oldest first (n jobs need no more than n claimers). */
void svc_req_wake_n(struct svc_request *req, const char *channel, long n);
/* Requests suspended now. */
long svc_server_waiting(const struct svc_server *s);
/* Wakes at most n (-1: every) request waiting on channel, from any thread (a notification from
 * another process); unlike svc_req_wake_n it announces nothing. */
void svc_server_wake(struct svc_server *s, const char *channel, long n);
/* Called by svc_req_wake and svc_req_wake_n with each channel they wake and their n (-1: every
 * waiter), after the write they follow committed, from the thread of the request; it must not
 * block. */
typedef void (*svc_publish_fn)(void *ctx, const char *channel, long n);
/* Sets (fn NULL: clears) the function that announces wakes to other processes. */
void svc_server_set_publish(struct svc_server *s, svc_publish_fn fn, void *ctx);
/* Asked before a write that will wake channel: 1 when the announcement to the other processes
 * should ride in the write's own transaction, with payload (size bytes) written for it; 0 to
 * announce after the commit as usual. Called with svc_server_set_publish's ctx; must not block. */
typedef int (*svc_publish_inline_fn)(void *ctx, const char *channel, long n, char *payload,
                                     size_t size);
/* Told, after a 1 from svc_publish_inline_fn, whether the write's transaction did send it. */
typedef void (*svc_publish_inline_done_fn)(void *ctx, int sent);
void svc_server_set_publish_inline(struct svc_server *s, svc_publish_inline_fn fn,
                                   svc_publish_inline_done_fn done);
/* Before a write that will wake n waiters of channel: 1 with payload set when the write's
 * transaction is to announce it to the other processes itself (then, once the write ended,
 * call svc_req_wake_inlined), 0 otherwise (wake with svc_req_wake_n). */
int svc_req_wake_inline(struct svc_request *req, const char *channel, long n, char *payload,
                        size_t size);
/* After a write that svc_req_wake_inline answered 1, whatever its outcome: wakes at most n (0:
 * none) waiters of channel; sent 1 when its transaction committed with the announcement, else
 * it is announced now as by svc_req_wake_n. */
void svc_req_wake_inlined(struct svc_request *req, const char *channel, long n, int sent);
/* Waiters resumed by their periodic re-check (not a wake, not their deadline) since the start:
 * how often long-polls fall back to polling. */
unsigned long svc_server_rechecks(const struct svc_server *s);
/* Waiters resumed by a wake of their channel, from this process or another, since the start. */
unsigned long svc_server_woken(const struct svc_server *s);

#endif
