/* What the intake (intake.c) makes of the first bytes of a connection: wait for more, hand the
 * connection to libmicrohttpd, or answer it. Pure: no socket, no clock. The line is split as
 * libmicrohttpd 0.9.75 splits it (spaces after the method skipped, the version after the last
 * space), so that what passes is what it takes, and what it would answer with its own HTML page
 * or drop is answered here instead. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "service/http_internal.h"

/* A byte of a method as libmicrohttpd takes it: anything but a space or a control byte (RFC 9110
 * asks for a token, but a method of other bytes is rowlock's 405, in problem+json, already). */
static int is_method_byte(unsigned char c)
{
    return c > 0x20 && c != 0x7f;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static enum svc_intake_outcome refuse(struct svc_intake_verdict *v,
                                      const struct svc_problem_info *p, const char *reason,
                                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static enum svc_intake_outcome refuse(struct svc_intake_verdict *v,
                                      const struct svc_problem_info *p, const char *reason,
                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof(v->detail), fmt, ap);
    va_end(ap);
    v->problem = p;
    v->reason = reason;
    return SVC_INTAKE_REFUSE;
}

/* The request line of len bytes at p (without its line end), after a method of mlen bytes:
 * PASS, or REFUSE for a line libmicrohttpd would not take. */
static enum svc_intake_outcome judge_line(const char *p, size_t len, size_t mlen,
                                          struct svc_intake_verdict *v)
{
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)p[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                          "the request line holds the control byte 0x%02x at byte %zu", c, k + 1);
    }
    size_t t = mlen, end = len;
    while (t < len && p[t] == ' ')
        t++;
    while (end > t && p[end - 1] == ' ')
        end--;
    size_t sp = end;
    while (sp > t && p[sp - 1] != ' ')
        sp--;
    if (t == end)
        return refuse(v, SVC_P(BAD_REQUEST), "Bad Request", "the request line has no target");
    if (sp == t)
        return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                      "the request line has no HTTP version (HTTP/0.9 is not served)");
    v->target = p + t;
    v->target_len = sp - 1 - t;
    while (v->target_len > 0 && v->target[v->target_len - 1] == ' ')
        v->target_len--;
    const char *ver = p + sp;
    size_t vlen = end - sp;
    if (vlen != 8 || memcmp(ver, "HTTP/", 5) != 0 || !is_digit(ver[5]) || ver[6] != '.' ||
        !is_digit(ver[7]))
        return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                      "the request line's version \"%.*s%s\" is not HTTP/<digit>.<digit>",
                      (int)(vlen < 16 ? vlen : 16), ver, vlen > 16 ? "..." : "");
    if (ver[5] != '1')
        return refuse(v, SVC_P(HTTP_VERSION_NOT_SUPPORTED), "HTTP Version Not Supported",
                      "HTTP/%c.%c is not served (only HTTP/1.x is)", ver[5], ver[7]);
    return SVC_INTAKE_PASS;
}

enum svc_intake_outcome svc_intake_judge(const char *buf, size_t n, int full, int ended,
                                         long url_limit, struct svc_intake_verdict *v)
{
    memset(v, 0, sizeof(*v));
    size_t i = 0;
    /* (a CR at the end is taken as one whose LF is still to come) */
    while (i < n && (buf[i] == '\n' || (buf[i] == '\r' && (i + 1 == n || buf[i + 1] == '\n'))))
        i++;
    v->blank = i;
    if (i == n)
        return ended ? SVC_INTAKE_CLOSE : SVC_INTAKE_WAIT;
    if (full && i > 0) /* judged again once they are read away, with the line in full view */
        return SVC_INTAKE_WAIT;
    const char *p = buf + i;
    size_t m = n - i;
    if ((unsigned char)p[0] == 0x16)
        return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                      "the connection opened with a TLS handshake: this port serves HTTP without "
                      "TLS (http://, not https://)");
    size_t mlen = 0;
    while (mlen < m && is_method_byte((unsigned char)p[mlen]))
        mlen++;
    if (mlen < m && (mlen == 0 || p[mlen] != ' '))
        return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                      "the request line does not begin with a method and a space");
    if (mlen < m) {
        size_t keep = mlen < sizeof(v->method) - 1 ? mlen : sizeof(v->method) - 1;
        memcpy(v->method, p, keep);
        v->method[keep] = '\0';
    }
    const char *lf = memchr(p, '\n', m);
    if (lf == NULL) {
        if (full && mlen == m)
            return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                          "the request line does not begin with a method and a space");
        if (full)
            return refuse(v, SVC_P(URI_TOO_LONG), "URI Too Long",
                          "the request target is longer than %ld bytes", url_limit);
        if (ended)
            return refuse(v, SVC_P(BAD_REQUEST), "Bad Request",
                          "the client ended the request before the end of its request line");
        return SVC_INTAKE_WAIT;
    }
    size_t len = (size_t)(lf - p);
    if (len > 0 && p[len - 1] == '\r')
        len--;
    return judge_line(p, len, mlen, v);
}

void svc_intake_late(struct svc_intake_verdict *v, double limit_s)
{
    memset(v, 0, sizeof(*v));
    v->problem = SVC_P(REQUEST_TIMEOUT);
    v->reason = "Request Timeout";
    snprintf(v->detail, sizeof(v->detail),
             "the request line did not arrive whole within %.0f s of the connection opening",
             limit_s);
}

/* Does the header line h (hl bytes) have one of these names? */
static int framing_header(const char *h, size_t hl)
{
    static const char *const names[] = {
        "content-length:", "transfer-encoding:", "connection:", "expect:", "upgrade:"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t n = strlen(names[i]);
        if (hl >= n && strncasecmp(h, names[i], n) == 0)
            return 1;
    }
    return 0;
}

/* The length of the HTTP/1.1 request at p (m bytes) without a body, up to the end of its header
 * block, or 0 when it is not whole or its end is not so plain: HTTP/1.0, a body or a header
 * that could close the connection after it (Content-Length, Transfer-Encoding, Connection,
 * Expect, Upgrade). Lines end as libmicrohttpd ends them, at a LF with or without a CR. */
static size_t plain_request_len(const char *p, size_t m)
{
    const char *lf = memchr(p, '\n', m);
    if (lf == NULL)
        return 0;
    size_t len = (size_t)(lf - p);
    size_t line = len > 0 && p[len - 1] == '\r' ? len - 1 : len;
    if (line < 8 || memcmp(p + line - 8, "HTTP/1.1", 8) != 0)
        return 0;
    size_t at = len + 1;
    for (;;) {
        const char *h = p + at, *end = memchr(h, '\n', m - at);
        if (end == NULL)
            return 0;
        size_t hl = (size_t)(end - h);
        at += hl + 1;
        if (hl > 0 && h[hl - 1] == '\r')
            hl--;
        if (hl == 0)
            return at;
        if (framing_header(h, hl))
            return 0;
    }
}

int svc_intake_judge_pipeline(const char *buf, size_t n, size_t first, long url_limit,
                              struct svc_intake_verdict *v)
{
    size_t at = first;
    for (int k = 1;; k++) {
        size_t len = plain_request_len(buf + at, n - at);
        if (len == 0)
            return 0;
        at += len;
        switch (svc_intake_judge(buf + at, n - at, 0, 0, url_limit, v)) {
        case SVC_INTAKE_PASS:
            at += v->blank;
            continue;
        case SVC_INTAKE_REFUSE:
            return k;
        case SVC_INTAKE_WAIT:
        case SVC_INTAKE_CLOSE:
            return 0;
        }
    }
}
