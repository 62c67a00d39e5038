/* What service/http.c and service/http_check.c share: the server's and a request's state, and
 * the checks a request passes before its handler runs. Internal to service/: handlers see only
 * http.h. */
#ifndef SVC_HTTP_INTERNAL_H
#define SVC_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "service/buf.h"
#include "service/http.h"

#define MAX_EXTRA_HEADERS 8
#define REQUEST_ID_MAX    128

struct waiter {
    struct svc_request *req;
    char *channel;
    double deadline;
    double recheck; /* when to look again for writes made by other processes */
    struct waiter *next;
};

struct svc_server {
    struct MHD_Daemon *daemon;
    pthread_mutex_t wait_mu;
    pthread_cond_t wait_cv;
    struct waiter *waiters;
    long nwaiting;
    unsigned generation;
    int stopping;
    pthread_t ticker;
    int ticker_started;
    int quiesced;         /* the listening socket is shut down */
    MHD_socket listen_fd; /* closed only after MHD_stop_daemon: MHD threads may still use it */
    uint16_t port;        /* bound (the configured one, or the one picked for port 0) */
    /* handlers of SVC_RUN_WORKER routes run here, their connections suspended meanwhile */
    pthread_mutex_t work_mu;
    pthread_cond_t work_cv;
    struct svc_request *work_head, *work_tail;
    struct svc_request *work_resumed; /* the last resumed long-poll queued (they come first) */
    int work_stop;
    pthread_t *workers;
    int nworkers;
    const struct svc_config *cfg;
    const struct svc_route *routes;
    size_t nroutes;
    const struct svc_auth *auth;
    void *app;
    atomic_long in_flight;
    struct svc_conns *conns; /* the connection limit and request deadlines */
    double next_deadline_scan;
    /* announces this process's wakes to the other processes (svc_server_set_publish) */
    _Atomic(svc_publish_fn) publish;
    _Atomic(svc_publish_inline_fn) publish_inline;
    _Atomic(svc_publish_inline_done_fn) publish_inline_done;
    void *_Atomic publish_ctx;
    atomic_ulong rechecks; /* waiters resumed by their periodic re-check */
    atomic_ulong woken;    /* waiters resumed by a wake (svc_req_wake_n, svc_server_wake) */
};

/* What the checks before the body need of the request's headers, gathered in one pass over them
 * (each first occurrence, as MHD_lookup_connection_value finds it): a lookup each walked the
 * list again, seven times a request. */
struct req_headers {
    size_t total; /* bytes of names and values, 4 a header more */
    const char *request_id, *content_type, *authorization, *content_length;
    int host, transfer_encoding;
    int lengths, lengths_differ; /* Content-Length headers, and whether their values differ */
};

/* NEW: first call; BODY: reading the body; WORKER: suspended, with a worker or waiting;
 * READY: a worker prepared the response (or gave up), to queue on resume; DONE: queued. */
enum req_phase { PHASE_NEW, PHASE_BODY, PHASE_WORKER, PHASE_READY, PHASE_DONE };

struct svc_request {
    struct svc_server *server;
    struct MHD_Connection *conn;
    enum req_phase phase;
    char *target; /* raw request target, as received */
    char method[16];
    struct svc_match match;
    int matched;
    char request_id[REQUEST_ID_MAX + 1];
    struct svc_buf body;
    int checked; /* request_check ran (before the body) */
    int http11;  /* HTTP/1.1, which must carry Host */
    json_t *json;
    double start; /* svc_now() at the first callback */
    int status;   /* 0 until a response is queued */
    const char *problem_code;
    int resumes; /* times a long-poll was resumed */
    int in_worker;
    struct MHD_Response *pending; /* prepared by a worker, queued on resume */
    int pending_status;
    struct svc_request *work_next;
    struct svc_conn *slot; /* may be NULL (out of memory when the connection opened) */
    struct req_headers seen;
    size_t nheaders;
    char *headers[MAX_EXTRA_HEADERS][2];
};

/* Notes one header in the struct req_headers cls (MHD_get_connection_values' iterator). */
enum MHD_Result svc_http_scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value);
/* Validates the request before its body: limits, framing, route, auth, media type. Returns 1
 * when a problem reply was queued (the outcome in *out), 0 to go on. */
int svc_http_request_check(struct svc_request *req, enum svc_outcome *out);
/* Depth of the deepest array/object nesting in JSON text, stopping once past limit. */
long svc_http_json_depth(const char *p, size_t len, long limit);

#endif
