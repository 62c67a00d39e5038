/* Replies (see reply.h): every response a handler sends goes through reply_response, which adds
 * the request id and the handler's headers and queues it, or keeps it for the HTTP thread when a
 * worker prepared it. Also the early answers, written to the connection before libmicrohttpd has
 * the request whole: the 413 before the body is read, the 414 of a query it cannot hold, and
 * their bytes for the intake (intake.c), which answers before libmicrohttpd has the connection. */
#include "service/reply.h"

#include <gnutls/gnutls.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "service/http_internal.h"

int svc_req_add_header(struct svc_request *req, const char *name, const char *value)
{
    if (req->nheaders >= SVC_REQ_EXTRA_HEADERS)
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

enum MHD_Result svc_reply_prepared(struct svc_request *req)
{
    struct MHD_Response *r = req->pending;
    req->pending = NULL;
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_queue_response(req->conn, (unsigned)req->pending_status, r);
    MHD_destroy_response(r);
    req->phase = PHASE_DONE;
    return ok;
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

char *svc_reply_early_text(const struct svc_problem_info *info, const char *reason,
                           const char *detail, const char *request_id, size_t *len)
{
    size_t blen = 0;
    char *body = svc_problem_encode(info, detail, request_id, NULL, &blen);
    const char *b = body != NULL ? body : svc_problem_fallback;
    if (body == NULL)
        blen = svc_problem_fallback_len;
    char head[512];
    int hlen = snprintf(head, sizeof(head),
                        "HTTP/1.1 %d %s\r\nConnection: close\r\n"
                        "Content-Type: application/problem+json\r\nX-Request-Id: %s\r\n"
                        "Content-Length: %zu\r\n\r\n",
                        info->status, reason, request_id, blen);
    char *text = NULL;
    if (hlen > 0 && (size_t)hlen < sizeof(head) && (text = malloc((size_t)hlen + blen)) != NULL) {
        memcpy(text, head, (size_t)hlen);
        memcpy(text + hlen, b, blen);
        *len = (size_t)hlen + blen;
    }
    free(body);
    return text;
}

/* Writes text on the connection at once, without waiting (best effort: the connection is closed
 * next), then ends the sending side: in the clear, or as one TLS record and a close_notify over
 * HTTPS (this runs on the connection's own MHD thread, between its reads). */
static void early_send(struct MHD_Connection *conn, const char *text, size_t len)
{
    const union MHD_ConnectionInfo *tls =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (tls != NULL && tls->tls_session != NULL) {
        gnutls_session_t session = (gnutls_session_t)tls->tls_session;
        if (gnutls_record_send(session, text, len) > 0)
            gnutls_bye(session, GNUTLS_SHUT_WR);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci != NULL && send(ci->connect_fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
        shutdown(ci->connect_fd, SHUT_WR); /* the answer, then the end */
}

void svc_reply_early(struct svc_request *req, const struct svc_problem_info *info,
                     const char *reason, const char *detail)
{
    req->status = info->status;
    req->problem_code = info->code;
    size_t len = 0;
    char *text = svc_reply_early_text(info, reason, detail, req->request_id, &len);
    if (text != NULL)
        early_send(req->conn, text, len);
    free(text);
    req->phase = PHASE_DONE;
}

/* libmicrohttpd 0.9.75 refuses a response queued while a body is still arriving, and would
 * otherwise read the body to its end (gigabytes) before answering. The caller then returns
 * MHD_NO, which closes the connection; nothing else was written on it for this request. The
 * request is answered 413 whether or not the write reaches a client that may already have reset
 * the connection, as a queued response is: the access line and the metrics say so. */
void svc_reply_early_413(struct svc_request *req)
{
    char detail[96];
    snprintf(detail, sizeof(detail), "the body exceeds %ld bytes", req->server->cfg->body_limit);
    svc_reply_early(req, SVC_P(PAYLOAD_TOO_LARGE), "Content Too Large", detail);
}
