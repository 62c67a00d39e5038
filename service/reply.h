/* Replies: JSON, problem+json, raw and static bodies, with the request id and the headers a
 * handler added. Each queues exactly one response (from a worker thread it is prepared, and the
 * HTTP thread queues it on resume). What a problem document holds is problem.h's. */
#ifndef SVC_REPLY_H
#define SVC_REPLY_H

#include <jansson.h>
#include <stddef.h>

#include "service/problem.h"
#include "service/router.h"

struct svc_request;

/* Adds a response header for the reply that follows (copied). Returns 0 or -1. */
int svc_req_add_header(struct svc_request *req, const char *name, const char *value);

/* Each returns SVC_REPLIED, or SVC_FATAL when the response could not be queued. */
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

#endif
