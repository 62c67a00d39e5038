/* Wake plumbing: after a write commits, its handler wakes the waiters of the resource's channel
 * in this process (wait.h) and announces the channel to the other processes through the
 * publish functions main installs; or asks first for the announcement to ride in the write's own
 * transaction (inline publish). Knows nothing of how announcements travel (db/listener.c). */
#ifndef SVC_WAKE_H
#define SVC_WAKE_H

#include <stddef.h>

struct svc_server;
struct svc_request;

/* Wakes every request waiting on channel, in this process, and hands channel to the publish
 * function (svc_server_set_publish) for the other processes. Call it after the write committed. */
void svc_req_wake(struct svc_request *req, const char *channel);
/* Wakes at most n of them, oldest first (n jobs need no more than n claimers). */
void svc_req_wake_n(struct svc_request *req, const char *channel, long n);

/* The same from a thread that serves no request (a background pass): wakes at most n (-1:
 * every) waiters of channel in this process and announces it to the others. */
void svc_server_wake_publish(struct svc_server *s, const char *channel, long n);

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

#endif
