/* libmicrohttpd glue (see http.h). The request context is created in the URI-log callback (the
 * first callback MHD makes for a request, which also gives the raw, still-encoded target) and
 * freed in the completion callback, where the access log line and request metrics are written.
 * What a route does belongs to routes/; this file only gets a request to its handler. */
#include "service/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "service/buf.h"
#include "service/clock.h"
#include "service/conn.h"
#include "service/http_internal.h"
#include "service/listen.h"
#include "service/log.h"
#include "service/metrics.h"

/* Access lines are written by the batch while the server runs, at most this late (a kill -9
 * loses this much of them): a write(2) per line was a tenth of a /healthz request's CPU. */
#define ACCESS_LOG_FLUSH_MS 5

/* ---- request ids ---- */

static int request_id_valid(const char *id)
{
    size_t n = 0;
    for (; id[n] != '\0'; n++) {
        unsigned char c = (unsigned char)id[n];
        if (n >= REQUEST_ID_MAX || c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return n > 0;
}

static void request_id_generate(char out[33])
{
    static _Thread_local uint64_t state[2];
    if (state[0] == 0 && state[1] == 0) {
        if (getrandom(state, sizeof(state), 0) != sizeof(state) || (state[0] | state[1]) == 0) {
            state[0] = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&state;
            state[1] = 0x9e3779b97f4a7c15ull;
        }
    }
    static const char hex[] = "0123456789abcdef";
    for (int half = 0; half < 2; half++) {
        /* xorshift128+ */
        uint64_t s1 = state[0];
        const uint64_t s0 = state[1];
        state[0] = s0;
        s1 ^= s1 << 23;
        state[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        uint64_t v = state[1] + s0;
        /* a byte at a time, low nibble first, as the ids always were */
        for (int i = 0; i < 8; i++, v >>= 8) {
            out[half * 16 + 2 * i] = hex[v & 15];
            out[half * 16 + 2 * i + 1] = hex[(v >> 4) & 15];
        }
    }
    out[32] = '\0';
}

/* ---- accessors ---- */

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

int svc_req_add_header(struct svc_request *req, const char *name, const char *value)
{
    if (req->nheaders >= MAX_EXTRA_HEADERS)
        return -1;
    char *n = strdup(name), *v = strdup(value);
    if (n == NULL || v == NULL) {
        free(n);
        free(v);
        return -1;
    }
    req->headers[req->nheaders][0] = n;
    req->headers[req->nheaders][1] = v;
    req->nheaders++;
    return 0;
}

/* ---- replies ---- */

static enum svc_outcome reply_response(struct svc_request *req, int status,
                                       const char *content_type, struct MHD_Response *r)
{
    if (r == NULL)
        return SVC_FATAL;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, "X-Request-Id", req->request_id);
    for (size_t i = 0; i < req->nheaders; i++)
        MHD_add_response_header(r, req->headers[i][0], req->headers[i][1]);
    if (req->in_worker) {
        /* queued by the HTTP thread when the worker resumes the connection */
        if (req->pending != NULL)
            MHD_destroy_response(req->pending);
        req->pending = r;
        req->pending_status = status;
        req->status = status;
        return SVC_REPLIED;
    }
    enum MHD_Result ok = MHD_queue_response(req->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    if (ok != MHD_YES)
        return SVC_FATAL;
    req->status = status;
    req->phase = PHASE_DONE;
    return SVC_REPLIED;
}

enum svc_outcome svc_reply_raw(struct svc_request *req, int status, const char *content_type,
                               char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL)
        free(body);
    return reply_response(req, status, content_type, r);
}

enum svc_outcome svc_reply_static(struct svc_request *req, int status, const char *content_type,
                                  const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
    return reply_response(req, status, content_type, r);
}

enum svc_outcome svc_reply_json(struct svc_request *req, int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(body);
    if (text == NULL) /* a problem reply cannot fail: it has a constant fallback */
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the response");
    return svc_reply_raw(req, status, "application/json", text, strlen(text));
}

/* Queues the problem document; out of memory, the constant internal_error one instead. */
static enum svc_outcome reply_problem_v(struct svc_request *req, const struct svc_problem_info *p,
                                        json_t *ext, const char *fmt, va_list ap)
{
    const struct svc_problem_info *info = p != NULL ? p : SVC_P(INTERNAL_ERROR);
    /* longer than the encoder keeps, so that its cut (at a character boundary) is the one made */
    char detail[SVC_PROBLEM_DETAIL_MAX + 64];
    vsnprintf(detail, sizeof(detail), fmt, ap);
    size_t len = 0;
    char *text = svc_problem_encode(p, detail, req->request_id, ext, &len);
    json_decref(ext);
    if (text == NULL) {
        req->problem_code = SVC_P(INTERNAL_ERROR)->code;
        return svc_reply_static(req, 500, "application/problem+json", svc_problem_fallback,
                                svc_problem_fallback_len);
    }
    if (info->status == 503)
        svc_req_add_header(req, "Retry-After", "1");
    req->problem_code = info->code;
    return svc_reply_raw(req, info->status, "application/problem+json", text, len);
}

enum svc_outcome svc_reply_problem(struct svc_request *req, const struct svc_problem_info *p,
                                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum svc_outcome o = reply_problem_v(req, p, NULL, fmt, ap);
    va_end(ap);
    return o;
}

enum svc_outcome svc_reply_problem_ext(struct svc_request *req, const struct svc_problem_info *p,
                                       json_t *ext, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum svc_outcome o = reply_problem_v(req, p, ext, fmt, ap);
    va_end(ap);
    return o;
}

/* ---- long-polls ---- */

double svc_req_age(const struct svc_request *req)
{
    return svc_now() - req->start;
}

int svc_req_resumes(const struct svc_request *req)
{
    return req->resumes;
}

unsigned svc_wake_generation(const struct svc_request *req)
{
    struct svc_server *s = req->server;
    pthread_mutex_lock(&s->wait_mu);
    unsigned g = s->generation;
    pthread_mutex_unlock(&s->wait_mu);
    return g;
}

int svc_req_may_wait(const struct svc_request *req, double deadline)
{
    struct svc_server *s = req->server;
    pthread_mutex_lock(&s->wait_mu);
    int stopping = s->stopping;
    pthread_mutex_unlock(&s->wait_mu);
    return !stopping && svc_now() < deadline;
}

enum svc_outcome svc_req_wait(struct svc_request *req, const char *channel, double deadline,
                              unsigned gen)
{
    struct svc_server *s = req->server;
    struct waiter *w = calloc(1, sizeof(*w));
    char *ch = strdup(channel);
    if (w == NULL || ch == NULL) {
        free(w);
        free(ch);
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
    }
    pthread_mutex_lock(&s->wait_mu);
    if (s->generation != gen || s->stopping) {
        /* something was written since the handler looked, or we are stopping: look again */
        pthread_mutex_unlock(&s->wait_mu);
        free(w);
        free(ch);
        return s->routes[req->match.route].handler(req);
    }
    w->req = req;
    w->channel = ch;
    w->deadline = deadline;
    /* jittered, so that many waiters that began together do not all look again together */
    w->recheck = svc_now() + (double)s->cfg->poll_interval_ms / 1000.0 *
                                 (0.5 + (double)(s->generation * 2654435761u % 1000) / 2000.0 +
                                  (double)((uintptr_t)w % 997) / 2000.0);
    /* appended: the list runs oldest first, the order svc_req_wake_n wakes in */
    w->next = NULL;
    struct waiter **tail = &s->waiters;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = w;
    s->nwaiting++;
    pthread_mutex_unlock(&s->wait_mu);
    return SVC_SUSPENDED; /* the connection stays suspended; a wake hands it to a worker */
}

/* ---- workers ---- */

/* Hands a suspended request to the workers: a new one behind those queued, a resumed long-poll
 * (front) ahead of them, since its client has waited already. */
static void work_push(struct svc_server *s, struct svc_request *req, int front)
{
    pthread_mutex_lock(&s->work_mu);
    if (front) { /* after the resumed ones queued: those stay oldest first */
        struct svc_request **at = s->work_resumed ? &s->work_resumed->work_next : &s->work_head;
        req->work_next = *at;
        *at = req;
        if (req->work_next == NULL)
            s->work_tail = req;
        s->work_resumed = req;
    } else {
        req->work_next = NULL;
        if (s->work_tail != NULL)
            s->work_tail->work_next = req;
        else
            s->work_head = req;
        s->work_tail = req;
    }
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->work_mu);
}

/* Runs handlers. A reply is prepared here and queued by the HTTP thread on resume; a handler
 * that waits (SVC_SUSPENDED) leaves the connection suspended until a wake pushes it again. */
static void *worker_main(void *arg)
{
    struct svc_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->work_mu);
        while (s->work_head == NULL && !s->work_stop)
            pthread_cond_wait(&s->work_cv, &s->work_mu);
        struct svc_request *req = s->work_head;
        if (req == NULL) {
            pthread_mutex_unlock(&s->work_mu);
            return NULL;
        }
        s->work_head = req->work_next;
        if (s->work_head == NULL)
            s->work_tail = NULL;
        if (s->work_resumed == req)
            s->work_resumed = NULL;
        pthread_mutex_unlock(&s->work_mu);
        enum svc_outcome o = s->routes[req->match.route].handler(req);
        if (o == SVC_SUSPENDED)
            continue;
        req->phase = PHASE_READY; /* with a pending response, or none: drop the connection */
        MHD_resume_connection(req->conn);
    }
}

/* Resumes the waiters for which pick() is true. Called with wait_mu held. */
static void resume_where(struct svc_server *s, int (*pick)(const struct waiter *, const void *),
                         const void *arg)
{
    for (struct waiter **pw = &s->waiters; *pw != NULL;) {
        struct waiter *w = *pw;
        if (!pick(w, arg)) {
            pw = &w->next;
            continue;
        }
        *pw = w->next;
        s->nwaiting--;
        w->req->resumes++;
        work_push(s, w->req, 1);
        free(w->channel);
        free(w);
    }
}

struct pick_n {
    const char *channel;
    long left;
};

static int pick_channel(const struct waiter *w, const void *arg)
{
    struct pick_n *p = (struct pick_n *)arg;
    if (p->left == 0 || strcmp(w->channel, p->channel) != 0)
        return 0;
    if (p->left > 0)
        p->left--;
    return 1;
}

static int pick_all(const struct waiter *w, const void *unused)
{
    return 1;
}

struct pick_due_arg {
    double now;
    int rechecks_left; /* re-checks are rate-limited: each one borrows a pool connection */
    unsigned long rechecked;
};

static int pick_due(const struct waiter *w, const void *arg)
{
    struct pick_due_arg *a = (struct pick_due_arg *)arg;
    if (w->deadline <= a->now)
        return 1;
    if (w->recheck > a->now || a->rechecks_left == 0)
        return 0;
    a->rechecks_left--;
    a->rechecked++;
    return 1;
}

void svc_server_wake(struct svc_server *s, const char *channel, long n)
{
    struct pick_n p = {channel, n};
    pthread_mutex_lock(&s->wait_mu);
    s->generation++;
    long before = s->nwaiting;
    resume_where(s, pick_channel, &p);
    atomic_fetch_add(&s->woken, (unsigned long)(before - s->nwaiting));
    pthread_mutex_unlock(&s->wait_mu);
}

void svc_req_wake_n(struct svc_request *req, const char *channel, long n)
{
    struct svc_server *s = req->server;
    svc_server_wake(s, channel, n);
    svc_publish_fn publish = atomic_load(&s->publish);
    if (publish != NULL)
        publish(atomic_load(&s->publish_ctx), channel, n);
}

void svc_server_set_publish(struct svc_server *s, svc_publish_fn fn, void *ctx)
{
    atomic_store(&s->publish_ctx, ctx);
    atomic_store(&s->publish, fn);
}

void svc_server_set_publish_inline(struct svc_server *s, svc_publish_inline_fn fn,
                                   svc_publish_inline_done_fn done)
{
    atomic_store(&s->publish_inline_done, done);
    atomic_store(&s->publish_inline, fn);
}

int svc_req_wake_inline(struct svc_request *req, const char *channel, long n, char *payload,
                        size_t size)
{
    struct svc_server *s = req->server;
    svc_publish_inline_fn fn = atomic_load(&s->publish_inline);
    return fn != NULL && fn(atomic_load(&s->publish_ctx), channel, n, payload, size);
}

void svc_req_wake_inlined(struct svc_request *req, const char *channel, long n, int sent)
{
    struct svc_server *s = req->server;
    svc_publish_inline_done_fn done = atomic_load(&s->publish_inline_done);
    if (done != NULL)
        done(atomic_load(&s->publish_ctx), sent);
    if (n > 0 && sent)
        svc_server_wake(s, channel, n);
    else if (n > 0)
        svc_req_wake_n(req, channel, n);
}

unsigned long svc_server_rechecks(const struct svc_server *s)
{
    return atomic_load(&((struct svc_server *)s)->rechecks);
}

unsigned long svc_server_woken(const struct svc_server *s)
{
    return atomic_load(&((struct svc_server *)s)->woken);
}

void svc_req_wake(struct svc_request *req, const char *channel)
{
    svc_req_wake_n(req, channel, -1);
}

long svc_server_waiting(const struct svc_server *s)
{
    struct svc_server *m = (struct svc_server *)s;
    pthread_mutex_lock(&m->wait_mu);
    long n = m->nwaiting;
    pthread_mutex_unlock(&m->wait_mu);
    return n;
}

/* ---- connections: the global limit and the request deadline (service/conn.c) ---- */

/* Over the limit a connection is closed as soon as it is accepted (libmicrohttpd's own limit is
 * set higher, so that it never leaves connections waiting in the listen backlog). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct svc_server *s = cls;
    return svc_conns_admit(s->conns) ? MHD_YES : MHD_NO;
}

/* Called before libmicrohttpd closes the socket, so the deadline never cuts a reused one. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct svc_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = svc_conns_opened(s->conns, info ? info->connect_fd : -1, svc_now());
        return;
    }
    svc_conns_closed(s->conns, *socket_context);
    *socket_context = NULL;
}

/* Shuts down the connections whose request has not arrived whole by its deadline. */
static void deadline_scan(struct svc_server *s, double now)
{
    int cut = svc_conns_cut_late(s->conns, now);
    if (cut > 0) {
        char n[16];
        snprintf(n, sizeof(n), "%d", cut);
        svc_log(SVC_LOG_WARN, "requests did not arrive whole in time; connections closed",
                SVC_NUM("connections"), n, NULL);
    }
}

/* Resumes waiters at their deadline, and each at its own re-check time (about every poll
 * interval, later when many wait), so that writes made by other rowlock processes are seen. */
static void *ticker_main(void *arg)
{
    struct svc_server *s = arg;
    pthread_mutex_lock(&s->wait_mu);
    while (!s->stopping) {
        struct timespec ts = svc_clock_after_ms(CLOCK_REALTIME, 20);
        pthread_cond_timedwait(&s->wait_cv, &s->wait_mu, &ts);
        /* at most a quarter of the workers' worth of re-checks per 20 ms tick, so that a
         * thousand waiters cannot crowd the pool: under many waiters each re-checks less often */
        struct pick_due_arg due = {svc_now(), s->nworkers / 4 > 0 ? s->nworkers / 4 : 1, 0};
        resume_where(s, pick_due, &due);
        atomic_fetch_add(&s->rechecks, due.rechecked);
        if (due.now >= s->next_deadline_scan) {
            s->next_deadline_scan = due.now + 0.25;
            deadline_scan(s, due.now);
        }
    }
    resume_where(s, pick_all, NULL);
    pthread_mutex_unlock(&s->wait_mu);
    return NULL;
}

/* ---- request life cycle ---- */

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

/* A zeroed request context (free it with request_free), or NULL. */
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

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct svc_server *s = cls;
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
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    req->slot = info != NULL ? info->socket_context : NULL;
    svc_conns_mark(s->conns, req->slot, 1, 1, req->start);
    svc_buf_init(&req->body, (size_t)s->cfg->body_limit);
    atomic_fetch_add(&s->in_flight, 1);
    return req;
}

static void request_free(struct svc_request *req)
{
    if (req->pending != NULL)
        MHD_destroy_response(req->pending);
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

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct svc_server *s = cls;
    struct svc_request *req = *con_cls;
    if (req == NULL)
        return;
    *con_cls = NULL;
    if (req->status == 0) {
        /* libmicrohttpd answered by itself (a malformed header, say): log what it sent */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        req->status = ci != NULL ? (int)ci->http_status : 0;
    }
    double end = svc_now(), secs = end - req->start;
    int route = req->matched ? req->match.route : -1;
    svc_metrics_observe_http(route, req->status, secs);
    struct svc_access a = {
        .request_id = req->request_id,
        .method = req->method,
        .route = route >= 0 ? s->routes[route].path : "unmatched",
        .path = req->target ? req->target : "",
        .path_len = req->target ? strcspn(req->target, "?") : 0,
        .status = req->status,
        .duration_ms = secs * 1000.0,
        .code = req->problem_code,
    };
    svc_log_access(&a);
    svc_conns_mark(s->conns, req->slot, 0, 1, end); /* the next request, if any */
    request_free(req);
    atomic_fetch_sub(&s->in_flight, 1);
}

/* Runs the route's handler once the body (if any) is complete. */
static enum svc_outcome request_dispatch(struct svc_request *req)
{
    struct svc_server *s = req->server;
    const struct svc_route *route = &s->routes[req->match.route];
    if (route->body != SVC_BODY_NONE) {
        if (req->body.len == 0)
            return svc_reply_problem(req, SVC_P(INVALID_JSON), "the request body is empty");
        if (svc_http_json_depth(req->body.data, req->body.len, s->cfg->json_max_depth) >
            s->cfg->json_max_depth)
            return svc_reply_problem(req, SVC_P(JSON_TOO_DEEP),
                                     "arrays and objects nest deeper than %ld levels",
                                     s->cfg->json_max_depth);
        json_error_t jerr;
        req->json = json_loadb(req->body.data, req->body.len, JSON_DECODE_ANY, &jerr);
        if (req->json == NULL)
            return svc_reply_problem(req, SVC_P(INVALID_JSON), "line %d column %d: %s", jerr.line,
                                     jerr.column, jerr.text);
    }
    if (route->run == SVC_RUN_INLINE)
        return route->handler(req);
    req->in_worker = 1;
    req->phase = PHASE_WORKER;
    MHD_suspend_connection(req->conn);
    work_push(s, req, 0);
    return SVC_SUSPENDED;
}

/* Writes a 413 problem straight to the socket, with Connection: close. libmicrohttpd 0.9.75
 * refuses a response queued while a body is still arriving, and would otherwise read the body to
 * its end (gigabytes) before answering. The caller then returns MHD_NO, which closes the
 * connection; nothing else was written on it for this request. */
static void reply_early_413(struct svc_request *req)
{
    const struct svc_problem_info *info = SVC_P(PAYLOAD_TOO_LARGE);
    char detail[96];
    snprintf(detail, sizeof(detail), "the body exceeds %ld bytes", req->server->cfg->body_limit);
    size_t blen = 0;
    char *body = svc_problem_encode(info, detail, req->request_id, NULL, &blen);
    char head[512];
    int hlen = snprintf(head, sizeof(head),
                        "HTTP/1.1 413 Content Too Large\r\nConnection: close\r\n"
                        "Content-Type: application/problem+json\r\nX-Request-Id: %s\r\n"
                        "Content-Length: %zu\r\n\r\n",
                        req->request_id, body ? blen : svc_problem_fallback_len);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL && hlen > 0 && (size_t)hlen < sizeof(head)) {
        struct iovec iov[2] = {
            {head, (size_t)hlen},
            {body ? body : (char *)svc_problem_fallback, body ? blen : svc_problem_fallback_len}};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
        if (sendmsg(ci->connect_fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) {
            req->status = info->status;
            req->problem_code = info->code;
            shutdown(ci->connect_fd, SHUT_WR); /* the answer, then the end */
        }
    }
    free(body);
    req->phase = PHASE_DONE;
}

static enum MHD_Result outcome_result(enum svc_outcome o)
{
    return o == SVC_FATAL ? MHD_NO : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct svc_request *req = *con_cls;
    if (req == NULL)
        return MHD_NO; /* out of memory in on_uri */
    if (req->phase == PHASE_NEW) {
        size_t mlen = strnlen(method, sizeof(req->method) - 1);
        memcpy(req->method, method, mlen);
        req->method[mlen] = '\0';
        req->http11 = version != NULL && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
        MHD_get_connection_values(conn, MHD_HEADER_KIND, svc_http_scan_header, &req->seen);
        const char *rid = req->seen.request_id;
        if (rid != NULL && request_id_valid(rid))
            snprintf(req->request_id, sizeof(req->request_id), "%s", rid);
        else
            request_id_generate(req->request_id);
        req->phase = PHASE_BODY;
        /* With a body on its way, refuse before reading it. Without one, wait for the next
         * call: MHD keeps the connection alive only for responses queued after the request
         * is complete. */
        req->checked = req->seen.lengths > 0 || req->seen.transfer_encoding;
        enum svc_outcome out;
        if (req->checked && svc_http_request_check(req, &out))
            return outcome_result(out);
        return MHD_YES;
    }
    if (req->phase == PHASE_DONE) {
        *upload_data_size = 0; /* a reply is queued: discard the rest */
        return MHD_YES;
    }
    if (req->phase == PHASE_READY) {
        /* a worker finished: queue what it prepared, or drop the connection */
        struct MHD_Response *r = req->pending;
        req->pending = NULL;
        if (r == NULL)
            return MHD_NO;
        enum MHD_Result ok = MHD_queue_response(conn, (unsigned)req->pending_status, r);
        MHD_destroy_response(r);
        req->phase = PHASE_DONE;
        return ok;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        /* A chunked body that grows past the limit: answer 413 and end the connection now,
         * rather than read the rest. Content-Length bodies never get here: see request_check. */
        if (svc_buf_append(&req->body, upload_data, n) != 0) {
            svc_buf_free(&req->body);
            reply_early_413(req);
            return MHD_NO;
        }
        return MHD_YES;
    }
    svc_conns_mark(req->server->conns, req->slot, 1, 0, svc_now()); /* the request is whole */
    enum svc_outcome out;
    if (!req->checked && svc_http_request_check(req, &out))
        return outcome_result(out);
    return outcome_result(request_dispatch(req));
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        msg[--n] = '\0';
    svc_log(SVC_LOG_WARN, "libmicrohttpd", "detail", msg, NULL);
}

/* libmicrohttpd on the listening socket fd, with our callbacks and limits; NULL on failure. */
static struct MHD_Daemon *start_daemon(struct svc_server *s, int fd)
{
    const struct svc_config *cfg = s->cfg;
    /* Room for our own 414/431 checks to fire before MHD's plain-text ones. */
    size_t memory = (size_t)(cfg->url_limit + cfg->header_limit) * 2 + 32768;
    /* Above ours (on_accept), so that libmicrohttpd, which splits its limit between its threads
     * and stops accepting at it, never leaves connections in the backlog before ours refuses. */
    unsigned mhd_limit = (unsigned)(cfg->connection_limit + 8 * cfg->threads + 16);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_TURBO;
    return MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, mhd_limit, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_connection_limit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_END);
}

struct svc_server *svc_server_start(const struct svc_config *cfg, const struct svc_route *routes,
                                    size_t nroutes, const struct svc_auth *auth, void *app)
{
    struct svc_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cfg = cfg;
    s->listen_fd = MHD_INVALID_SOCKET;
    s->routes = routes;
    s->nroutes = nroutes;
    s->auth = auth;
    s->app = app;
    double request_s = (double)cfg->request_timeout_s;
    double idle_s = (double)cfg->connection_timeout_s;
    s->conns =
        svc_conns_new(cfg->connection_limit, request_s, idle_s > request_s ? idle_s : request_s);
    if (s->conns == NULL) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->wait_mu, NULL);
    pthread_cond_init(&s->wait_cv, NULL);
    pthread_mutex_init(&s->work_mu, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    char why[160], port[16];
    snprintf(port, sizeof(port), "%ld", cfg->port);
    int fd = svc_listen_open(cfg->listen_address, cfg->port, &s->port, why, sizeof(why));
    if (fd < 0) {
        svc_log(SVC_LOG_ERROR, "cannot listen", "address", cfg->listen_address, SVC_NUM("port"),
                port, "detail", why, NULL);
        svc_conns_free(s->conns);
        free(s);
        return NULL;
    }
    s->daemon = start_daemon(s, fd);
    if (s->daemon == NULL) {
        close(fd);
        svc_log(SVC_LOG_ERROR, "cannot start the HTTP server", "address", cfg->listen_address,
                SVC_NUM("port"), port, NULL);
        svc_conns_free(s->conns);
        free(s);
        return NULL;
    }
    s->workers = calloc((size_t)cfg->workers, sizeof(pthread_t));
    for (long i = 0; s->workers != NULL && i < cfg->workers; i++)
        if (pthread_create(&s->workers[s->nworkers], NULL, worker_main, s) == 0)
            s->nworkers++;
    /* the ticker reads nworkers: start it once that is settled */
    s->ticker_started = pthread_create(&s->ticker, NULL, ticker_main, s) == 0;
    if (s->nworkers == 0) {
        svc_log(SVC_LOG_ERROR, "cannot start the worker threads", NULL);
        svc_server_shutdown(s, 0);
        return NULL;
    }
    if (svc_log_buffer_start(ACCESS_LOG_FLUSH_MS) != 0)
        svc_log(SVC_LOG_WARN, "access lines are written one by one: no thread to batch them", NULL);
    return s;
}

uint16_t svc_server_port(const struct svc_server *s)
{
    return s->port;
}

long svc_server_in_flight(const struct svc_server *s)
{
    return atomic_load(&((struct svc_server *)s)->in_flight);
}

void svc_server_quiesce(struct svc_server *s)
{
    if (s == NULL || s->quiesced)
        return;
    /* MHD stops polling the socket; shutting it down makes new connections fail at once. It is
     * closed after MHD_stop_daemon, as MHD's threads may still hold it until then. */
    s->listen_fd = MHD_quiesce_daemon(s->daemon);
    if (s->listen_fd != MHD_INVALID_SOCKET)
        shutdown(s->listen_fd, SHUT_RDWR);
    s->quiesced = 1;
}

int svc_server_shutdown(struct svc_server *s, int timeout_s)
{
    if (s == NULL)
        return 0;
    svc_server_quiesce(s);
    /* long-polls answer now with what they have; no handler suspends again */
    pthread_mutex_lock(&s->wait_mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->wait_cv);
    pthread_mutex_unlock(&s->wait_mu);
    if (s->ticker_started)
        pthread_join(s->ticker, NULL);
    double start = svc_now();
    while (atomic_load(&s->in_flight) > 0 && svc_now() - start < timeout_s)
        svc_clock_sleep_ms(10);
    int cut = (int)atomic_load(&s->in_flight);
    MHD_stop_daemon(s->daemon);
    if (s->listen_fd != MHD_INVALID_SOCKET)
        close(s->listen_fd);
    pthread_mutex_lock(&s->work_mu);
    s->work_stop = 1;
    pthread_cond_broadcast(&s->work_cv);
    pthread_mutex_unlock(&s->work_mu);
    for (int i = 0; i < s->nworkers; i++)
        pthread_join(s->workers[i], NULL);
    svc_log_buffer_stop(); /* every request has completed: its access line is written now */
    free(s->workers);
    pthread_mutex_destroy(&s->work_mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->wait_mu);
    pthread_cond_destroy(&s->wait_cv);
    svc_conns_free(s->conns);
    free(s);
    return cut;
}
