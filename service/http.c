/* The daemon: libmicrohttpd started on the listening socket with our limits and callbacks (and
 * TLS when configured), and stopped with a drain. The request context is made in the URI-log
 * callback (the first one MHD makes for a request, which also gives the raw, still-encoded
 * target) and ended in the completion callback, which writes the access line, the audit line
 * of an operator's action and request metrics. The connection's entry (conn.h) holds the request
 * in progress, so that one MHD forgets to complete is ended when its connection closes. Plain
 * HTTP connections come through the intake (intake.c), which answers a malformed first request
 * line itself. What a route does belongs to routes/; this file only gets a request to its
 * handler. */
#include "service/http.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/audit.h"
#include "service/buf.h"
#include "service/clock.h"
#include "service/conn.h"
#include "service/http_internal.h"
#include "service/listen.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/request_id.h"
#include "service/tls.h"

/* Access lines are written by the batch while the server runs, at most this late (a kill -9
 * loses this much of them): a write(2) per line was a tenth of a /healthz request's CPU. */
#define ACCESS_LOG_FLUSH_MS 5
/* How often a shutdown looks whether the requests in flight have finished. */
#define DRAIN_POLL_MS 10
/* Most parts a target's query may have, split at each '&' (empty ones too); more are a 414 at
 * once, as is a target past the URL limit. libmicrohttpd 0.9.75 keeps one record per part (64
 * bytes) in the connection's memory and, when they do not fit, drops the request without a word:
 * it queues a 431 that is never sent, never completes the request, and holds the connection
 * until a timeout (a 1.5 KB target of 2,000 '&' did, and a 78 KB one of 64 parts). 64 parts
 * take 4 KiB, well within what MHD leaves free when it splits a target within the URL limit
 * (half its pool, which is larger than twice that limit), and a route reads at most
 * SVC_MAX_QUERY parameters. */
#define QUERY_PARTS_MAX 64

/* ---- connections: the global limit and the request deadline (service/conn.c) ---- */

/* Over the limit, or once the server drains, a connection is closed as soon as it is accepted
 * (libmicrohttpd's own limit is set higher, so that it never leaves connections waiting in the
 * listen backlog). */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    struct svc_server *s = cls;
    if (atomic_load(&s->draining))
        return MHD_NO;
    return svc_conns_admit(s->conns, 0) ? MHD_YES : MHD_NO;
}

/* ---- request life cycle ---- */

/* The end of a request: its access line, audit line and metrics, then it is freed and no longer
 * in flight. conn, when not NULL, tells the status libmicrohttpd sent for a request it answered
 * by itself; NULL when nothing was sent (a request MHD forgot, ended as its connection closes). */
static void request_end(struct svc_server *s, struct MHD_Connection *conn, struct svc_request *req)
{
    if (req->status == 0 && conn != NULL) {
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
    if (route >= 0 && svc_route_audited(&s->routes[route])) {
        struct svc_audit_request au = {
            .request_id = req->request_id,
            .token = req->token,
            .method = req->method,
            .route = &s->routes[route],
            .match = &req->match,
            .status = req->status,
            .code = req->problem_code,
        };
        svc_audit_request(&au);
    }
    if (svc_conns_request(req->slot) == req)
        svc_conns_set_request(req->slot, NULL);
    svc_conns_mark(s->conns, req->slot, 0, 1, end); /* the next request, if any */
    svc_request_free(req);
    atomic_fetch_sub(&s->in_flight, 1);
}

/* Called before libmicrohttpd closes the socket, so the deadline never cuts a reused one. A
 * request still on the connection is one MHD will never complete: libmicrohttpd 0.9.75 closes
 * some connections without calling the completion callback (a query of more parts than its
 * memory holds: it queues a 431, never sends it, and closes the connection at its timeout or
 * the client's hang-up; on_uri refuses those targets first, this is the net for any other). It
 * is ended here, with no status (nothing was sent), so that it is neither leaked nor counted in
 * flight forever. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct svc_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = svc_conns_opened(s->conns, info ? info->connect_fd : -1, svc_now());
        if (info != NULL && *socket_context != NULL)
            svc_conns_set_note(*socket_context, svc_intake_note_take(s, info->connect_fd));
        return;
    }
    free(svc_conns_note(*socket_context));
    struct svc_request *left = svc_conns_request(*socket_context);
    /* (a request with a worker is never left here: MHD closes no suspended connection) */
    if (left != NULL && left->phase != PHASE_WORKER)
        request_end(s, NULL, left);
    svc_conns_closed(s->conns, *socket_context);
    *socket_context = NULL;
}

/* How many parts the query of target has, split at each '&': as many records as libmicrohttpd
 * makes of it (0 without a query). */
static size_t query_parts(const char *target)
{
    const char *q = strchr(target, '?');
    if (q == NULL || q[1] == '\0')
        return 0;
    size_t n = 1;
    for (q++; *q != '\0'; q++)
        n += *q == '&';
    return n;
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct svc_server *s = cls;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct svc_conn *slot = info != NULL ? info->socket_context : NULL;
    struct svc_request *left = svc_conns_request(slot);
    if (left != NULL && left->phase != PHASE_WORKER) /* the previous one, never completed */
        request_end(s, NULL, left);
    struct svc_request *req = svc_request_new(s, conn, uri);
    if (req == NULL)
        return NULL;
    req->slot = slot;
    /* A Cookie header of ours, empty, ahead of the client's: libmicrohttpd parses the first one
     * found (which rowlock never reads) into a copy in the connection's memory before any other
     * callback, and answers a large one with its own HTML 431; the headers' size is checked by
     * rowlock instead (http_check.c skips this one) */
    MHD_set_connection_value(conn, MHD_HEADER_KIND, svc_http_cookie_stand_in, "");
    svc_conns_set_request(slot, req);
    svc_conns_mark(s->conns, req->slot, 1, 1, req->start);
    atomic_fetch_add(&s->in_flight, 1);
    /* MHD splits the query once this returns, before any header is read, into records in the
     * connection's memory: a target that may not fit is answered now (no header seen, so no
     * client request id and no method), the request ended, and MHD left to close the
     * connection (no context: its access handler refuses it) */
    char detail[160];
    size_t parts = query_parts(req->target), len = strlen(req->target);
    if (len > (size_t)s->cfg->url_limit)
        snprintf(detail, sizeof(detail), "the request target is longer than %ld bytes",
                 s->cfg->url_limit);
    else if (parts > QUERY_PARTS_MAX)
        snprintf(detail, sizeof(detail),
                 "the query has %zu parts separated by \"&\"; at most %d are read (and a route "
                 "takes at most %d parameters)",
                 parts, QUERY_PARTS_MAX, SVC_MAX_QUERY);
    else
        return req;
    svc_request_id_take(req->request_id, NULL);
    svc_reply_early(req, SVC_P(URI_TOO_LONG), "URI Too Long", detail);
    request_end(s, NULL, req);
    /* Then the connection closes at once, not at libmicrohttpd's timeout, whatever the client
     * does. The query is not split: libmicrohttpd 0.9.75 hands over the target where it lies in
     * its read buffer, and splits it at the '?' once this returns; a query that does not fit
     * its memory would leave it holding a 431 it never sends, with a read buffer of no size, so
     * that it reads nothing more until its timeout. The query ends at its first byte instead.
     * And nothing more is read: libmicrohttpd would wait for the rest of the headers, while the
     * end of reading makes it close (its access call, without a context, closes too). */
    char *query = strchr((char *)uri, '?');
    if (query != NULL)
        query[1] = '\0';
    const union MHD_ConnectionInfo *sock =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (sock != NULL)
        shutdown(sock->connect_fd, SHUT_RD);
    return NULL;
}

/* A request the client ended by closing its sending side (a half-close) before it was whole:
 * libmicrohttpd closes the connection without a word, but such a client still reads, so it is
 * told why. This runs before libmicrohttpd closes the socket, on the connection's thread. */
static void answer_cut_short(struct svc_request *req)
{
    char detail[192];
    if (req->phase == PHASE_NEW)
        snprintf(detail, sizeof(detail),
                 "the client ended the request before the end of its headers");
    else if (req->seen.content_length != NULL)
        snprintf(detail, sizeof(detail),
                 "the client ended the request after %zu bytes of its body of %.24s "
                 "(Content-Length)",
                 req->body.len, req->seen.content_length);
    else
        snprintf(detail, sizeof(detail),
                 "the client ended the request after %zu bytes of its chunked body, before the "
                 "last chunk",
                 req->body.len);
    if (req->phase == PHASE_NEW)
        svc_request_id_take(req->request_id, NULL);
    svc_reply_early(req, SVC_P(BAD_REQUEST), "Bad Request", detail);
}

/* A request not whole by its deadline: cut by the ticker (svc_conns_cut_late ends the reading
 * side, which libmicrohttpd reads as the client's end), or without a byte for libmicrohttpd's
 * own timeout. Told so with a 408 before the connection closes (over HTTPS only at
 * libmicrohttpd's timeout: GnuTLS refuses to write once its reading side met the cut). */
static void answer_late(struct svc_request *req, int cut)
{
    const struct svc_config *cfg = req->server->cfg;
    char detail[160];
    if (cut)
        snprintf(detail, sizeof(detail),
                 "the request did not arrive whole within %ld s of its request line",
                 cfg->request_timeout_s);
    else
        snprintf(detail, sizeof(detail), "no byte of the request came for %ld s",
                 cfg->connection_timeout_s);
    if (req->phase == PHASE_NEW)
        svc_request_id_take(req->request_id, NULL);
    svc_reply_early(req, SVC_P(REQUEST_TIMEOUT), "Request Timeout", detail);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct svc_request *req = *con_cls;
    if (req == NULL)
        return;
    *con_cls = NULL;
    int arriving = req->status == 0 && (req->phase == PHASE_NEW || req->phase == PHASE_BODY);
    int cut = svc_conns_was_cut(req->slot);
    if (arriving && cut &&
        (toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT || toe == MHD_REQUEST_TERMINATED_READ_ERROR))
        answer_late(req, 1);
    else if (arriving && toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED)
        answer_late(req, 0);
    else if (arriving && toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT)
        answer_cut_short(req);
    /* a pipeline the intake saw, with a request line libmicrohttpd would refuse after this one
     * (dropping it without a word, or with its HTML page): answered now, after this one's
     * answer, and libmicrohttpd closes the connection when it meets the line */
    struct svc_intake_note *note = svc_conns_note(req->slot);
    int answered = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && req->status != 0;
    struct svc_conn *slot = req->slot;
    request_end(cls, conn, req);
    if (note != NULL && answered && svc_intake_note_count(note)) {
        const union MHD_ConnectionInfo *sock =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (sock != NULL)
            svc_intake_note_answer(note, sock->connect_fd);
        free(note);
        svc_conns_set_note(slot, NULL);
    }
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
        size_t at = 0, n = 0, grow = 0;
        switch (svc_http_json_numbers(req->body.data, req->body.len, &at, &n, &grow)) {
        case SVC_JSON_NUMBER_RANGE:
            return svc_reply_problem(
                req, SVC_P(NUMBER_OUT_OF_RANGE),
                "the number %.*s%s at byte %zu is out of range: one other than 0 is at least "
                "1e-307 and below 1e308 in magnitude, and its exponent at most %d either way",
                (int)(n < 40 ? n : 40), req->body.data + at, n > 40 ? "..." : "", at + 1,
                SVC_JSON_EXPONENT_MAX);
        case SVC_JSON_NUMBERS_EXPAND:
            return svc_reply_problem(
                req, SVC_P(NUMBER_OUT_OF_RANGE),
                "the body's numbers would be stored written out in full, %zu bytes longer than "
                "sent: at most the body's length (%zu) plus %d; write them out (or as strings)",
                grow, req->body.len, SVC_JSON_EXPANSION_SLACK);
        case SVC_JSON_NUMBERS_OK:
            break;
        }
        json_error_t jerr;
        req->json = json_loadb(req->body.data, req->body.len, JSON_DECODE_ANY, &jerr);
        if (req->json == NULL)
            return svc_reply_problem(req, SVC_P(INVALID_JSON), "line %d column %d: %s", jerr.line,
                                     jerr.column, jerr.text);
    }
    if (route->run == SVC_RUN_INLINE)
        return route->handler(req);
    return svc_workers_run(req);
}

static enum MHD_Result outcome_result(enum svc_outcome o)
{
    return o == SVC_FATAL ? MHD_NO : MHD_YES;
}

/* The first call for a request: its method, version, headers and id; a request announcing a
 * body is checked now, before the body is read. */
static enum MHD_Result request_begin(struct svc_request *req, struct MHD_Connection *conn,
                                     const char *method, const char *version)
{
    size_t mlen = strnlen(method, sizeof(req->method) - 1);
    memcpy(req->method, method, mlen);
    req->method[mlen] = '\0';
    req->http11 = version != NULL && strcmp(version, MHD_HTTP_VERSION_1_1) == 0;
    svc_http_scan_headers(&req->seen, conn, method);
    svc_request_id_take(req->request_id, req->seen.request_id);
    req->phase = PHASE_BODY;
    /* With a body on its way, refuse before reading it. Without one, wait for the next call:
     * MHD keeps the connection alive only for responses queued after the request is complete. */
    req->checked = req->seen.lengths > 0 || req->seen.transfer_encoding;
    enum svc_outcome out;
    if (req->checked && svc_http_request_check(req, &out))
        return outcome_result(out);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct svc_request *req = *con_cls;
    if (req == NULL)
        return MHD_NO; /* answered early by on_uri, or out of memory there: close */
    if (req->phase == PHASE_NEW)
        return request_begin(req, conn, method, version);
    if (req->phase == PHASE_DONE) {
        *upload_data_size = 0; /* a reply is queued: discard the rest */
        return MHD_YES;
    }
    if (req->phase == PHASE_READY) /* a worker finished: queue what it prepared, or drop */
        return svc_reply_prepared(req);
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        /* A chunked body that grows past the limit: answer 413 and end the connection now,
         * rather than read the rest. Content-Length bodies never get here: see request_check. */
        if (svc_buf_append(&req->body, upload_data, n) != 0) {
            svc_buf_free(&req->body);
            svc_reply_early_413(req);
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
    /* libmicrohttpd's line for every failed TLS handshake: the client's doing (plain HTTP on the
     * HTTPS port, an old protocol, a scanner), which would otherwise let anyone fill the log
     * with warnings; nginx logs it at info, here it is debug */
    if (strcmp(msg, "Error: received handshake message out of context.") == 0) {
        svc_log(SVC_LOG_DEBUG, "TLS handshake failed", NULL);
        return;
    }
    svc_log(SVC_LOG_WARN, "libmicrohttpd", "detail", msg, NULL);
}

/* ---- start and stop ---- */

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
    /* HTTPS (main loaded the pair first): each handshake asks svc_tls_retrieve for the pair in
     * force, which a reload swaps, and libmicrohttpd accepts on the socket itself. In the clear
     * the intake (intake.c) accepts, and hands it the connections whose first request line it
     * takes. */
    struct MHD_OptionItem https_listen[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, 0, (void *)svc_tls_retrieve},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)SVC_TLS_PRIORITIES},
        {MHD_OPTION_LISTEN_SOCKET, fd, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_OptionItem plain[] = {{MHD_OPTION_END, 0, NULL}};
    int tls = cfg->tls_cert_file[0] != '\0';
    flags |= tls ? MHD_USE_TLS : MHD_USE_NO_LISTEN_SOCKET;
    return MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_ARRAY, tls ? https_listen : plain, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)cfg->threads, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->connection_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, mhd_limit, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->per_ip_connection_limit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
}

/* Frees a server whose daemon did not start. */
static void server_free_unstarted(struct svc_server *s)
{
    svc_workers_stop(s);
    svc_waiters_destroy(&s->waiters);
    svc_conns_free(s->conns);
    svc_limits_free(s->limits);
    free(s);
}

/* The listening socket and the daemon on it: 0, or -1 after logging why. */
static int server_listen(struct svc_server *s)
{
    const struct svc_config *cfg = s->cfg;
    char why[160], port[16];
    snprintf(port, sizeof(port), "%ld", cfg->port);
    int fd = svc_listen_open(cfg->listen_address, cfg->port, &s->port, why, sizeof(why));
    if (fd < 0) {
        svc_log(SVC_LOG_ERROR, "cannot listen", "address", cfg->listen_address, SVC_NUM("port"),
                port, "detail", why, NULL);
        return -1;
    }
    s->daemon = start_daemon(s, fd);
    int tls = cfg->tls_cert_file[0] != '\0';
    if (s->daemon != NULL && !tls && svc_intake_start(s, fd) != 0) {
        MHD_stop_daemon(s->daemon);
        s->daemon = NULL;
    }
    if (s->daemon == NULL) {
        close(fd);
        svc_log(SVC_LOG_ERROR, "cannot start the HTTP server", "address", cfg->listen_address,
                SVC_NUM("port"), port, NULL);
        return -1;
    }
    return 0;
}

int svc_server_render_limits(struct svc_server *s, struct svc_buf *b)
{
    return svc_limits_render(s->limits, b);
}

struct svc_server *svc_server_start(const struct svc_config *cfg, const struct svc_route *routes,
                                    size_t nroutes, const struct svc_auth *auth, void *app)
{
    struct svc_server *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->cfg = cfg;
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
    s->limits = svc_limits_new(); /* out of memory: no limits, rather than no service */
    svc_waiters_init(&s->waiters);
    svc_workers_init(&s->workers); /* requests may queue before the workers have started */
    if (server_listen(s) != 0) {
        server_free_unstarted(s);
        return NULL;
    }
    int nworkers = svc_workers_start(s, cfg->workers);
    svc_ticker_start(s); /* it reads the workers' count: start it once that is settled */
    if (nworkers == 0) {
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
    /* Not MHD_quiesce_daemon: with an epoll thread of its own, libmicrohttpd 0.9.75 removes the
     * listening socket from its epoll set both there and in that thread's loop, unguarded, and
     * aborts the process when the thread's removal comes second. The socket stays open and
     * polled; on_accept closes every new connection at once, so that it fails at once. */
    if (s != NULL)
        atomic_store(&s->draining, 1);
}

int svc_server_shutdown(struct svc_server *s, int timeout_s)
{
    if (s == NULL)
        return 0;
    svc_server_quiesce(s);
    /* long-polls answer now with what they have; no handler suspends again */
    svc_waiters_stop(s);
    svc_ticker_stop(s);
    svc_waiters_resume_all(s);
    double start = svc_now();
    while (atomic_load(&s->in_flight) > 0 && svc_now() - start < timeout_s)
        svc_clock_sleep_ms(DRAIN_POLL_MS);
    int cut = (int)atomic_load(&s->in_flight);
    svc_intake_stop(s);         /* closes the listening socket (plain HTTP) */
    MHD_stop_daemon(s->daemon); /* closes it (HTTPS) */
    svc_workers_stop(s);
    svc_log_buffer_stop(); /* every request has completed: its access line is written now */
    svc_waiters_destroy(&s->waiters);
    svc_conns_free(s->conns);
    svc_limits_free(s->limits);
    free(s);
    return cut;
}
