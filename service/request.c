/* A request's context (see request.h): made on libmicrohttpd's first callback for the request,
 * freed on its completion, and what a handler reads of it. The callbacks themselves are http.c's.
 */
#include "service/request.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "service/clock.h"
#include "service/http_internal.h"

/* One spare request context per MHD thread, reused by its next request: a context is 1.3 KB,
 * past what malloc keeps in its per-thread cache, and each calloc of it consolidated the
 * allocator's small free blocks first (malloc and free were a fifth of rowlock's own instructions
 * a request). The spare is freed when its thread ends. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static int spare_ok;

static void spare_key_make(void)
{
    spare_ok = pthread_key_create(&spare_key, free) == 0;
}

/* A zeroed request context (free it with request_release), or NULL. */
static struct svc_request *request_alloc(void)
{
    pthread_once(&spare_once, spare_key_make);
    struct svc_request *req = spare_ok ? pthread_getspecific(spare_key) : NULL;
    if (req == NULL)
        return calloc(1, sizeof(*req));
    pthread_setspecific(spare_key, NULL);
    memset(req, 0, sizeof(*req));
    return req;
}

/* Keeps req as the thread's spare, or frees it. */
static void request_release(struct svc_request *req)
{
    if (spare_ok && pthread_getspecific(spare_key) == NULL &&
        pthread_setspecific(spare_key, req) == 0)
        return;
    free(req);
}

struct svc_request *svc_request_new(struct svc_server *s, struct MHD_Connection *conn,
                                    const char *uri)
{
    struct svc_request *req = request_alloc();
    if (req == NULL)
        return NULL;
    req->start = svc_now();
    req->server = s;
    req->conn = conn;
    req->match.route = -1;
    req->target = strdup(uri ? uri : "");
    if (req->target == NULL) {
        request_release(req);
        return NULL;
    }
    svc_buf_init(&req->body, (size_t)s->cfg->body_limit);
    return req;
}

void svc_request_free(struct svc_request *req)
{
    if (req->pending != NULL)
        MHD_destroy_response(req->pending);
    svc_limits_poll_give_back(req->poll_held);
    svc_match_free(&req->match);
    svc_buf_free(&req->body);
    json_decref(req->json);
    for (size_t i = 0; i < req->nheaders; i++) {
        free(req->headers[i][0]);
        free(req->headers[i][1]);
    }
    free(req->target);
    request_release(req);
}

void *svc_req_app(const struct svc_request *req)
{
    return req->server->app;
}

const char *svc_req_param(const struct svc_request *req, const char *name)
{
    return svc_match_param(&req->match, name);
}

const char *svc_req_query(const struct svc_request *req, const char *name)
{
    return svc_match_query(&req->match, name);
}

const char *svc_req_header(const struct svc_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *svc_req_id(const struct svc_request *req)
{
    return req->request_id;
}

json_t *svc_req_json(const struct svc_request *req)
{
    return req->json;
}
