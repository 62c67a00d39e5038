/* A request's context: made on libmicrohttpd's first callback for the request and freed on its
 * completion (a spare kept per thread), and what a handler reads of it. Returned strings are
 * owned by the request and live until it completes. Replies are reply.h's. */
#ifndef SVC_REQUEST_H
#define SVC_REQUEST_H

#include <jansson.h>

struct svc_request;

/* The app handed to svc_server_start. */
void *svc_req_app(const struct svc_request *req);
const char *svc_req_param(const struct svc_request *req, const char *name);
const char *svc_req_query(const struct svc_request *req, const char *name);
const char *svc_req_header(const struct svc_request *req, const char *name);
const char *svc_req_id(const struct svc_request *req);
/* The parsed body of a route that takes JSON (borrowed), or NULL. */
json_t *svc_req_json(const struct svc_request *req);
/* Whether the request's bearer token also holds scope (an svc_scope of service/router.h),
 * beyond its route's: always true with no tokens configured. For a route that does more with
 * a body member that another scope governs. */
int svc_req_has_scope(const struct svc_request *req, int scope);

#endif
