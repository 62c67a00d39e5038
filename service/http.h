/* The HTTP server as main runs it: libmicrohttpd in epoll thread-pool mode, started, quiesced
 * and shut down with its request deadlines, limits (413, 414, 431, 415), authentication, access
 * logs, request metrics and draining. It takes the route table from main and never includes
 * routes/. A handler's API comes with it: request.h, reply.h, wait.h (long-polls), wake.h. */
#ifndef SVC_HTTP_H
#define SVC_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "service/auth.h"
#include "service/buf.h"
#include "service/config.h"
#include "service/problem.h"
#include "service/reply.h"
#include "service/request.h"
#include "service/router.h"
#include "service/wait.h"
#include "service/wake.h"

struct svc_server;

/* Starts listening. routes must outlive the server; auth may be NULL (open). app is handed to
 * handlers through svc_req_app. Suspended long-polls are re-checked every cfg->poll_interval_ms.
 * Returns NULL after logging why. */
struct svc_server *svc_server_start(const struct svc_config *cfg, const struct svc_route *routes,
                                    size_t nroutes, const struct svc_auth *auth, void *app);
uint16_t svc_server_port(const struct svc_server *s);
/* Stops taking connections (each new one is closed as soon as it is accepted); requests in flight
 * and their connections go on. */
void svc_server_quiesce(struct svc_server *s);
/* Stops accepting connections, waits up to timeout_s for in-flight requests to finish, then
 * stops the daemon and frees the server. Returns the number of requests cut short. */
int svc_server_shutdown(struct svc_server *s, int timeout_s);
/* Appends rowlock_http_limited_total, the requests refused by their token's limits
 * (limits.h). Returns 0 or -1 (buffer full). */
int svc_server_render_limits(struct svc_server *s, struct svc_buf *b);
/* Requests between their first byte and their completion, across all threads. */
long svc_server_in_flight(const struct svc_server *s);

#endif
