/* Malformed requests sent over raw TCP to a running rowlock, each on a connection of its own, and
 * what comes back: a problem+json answer, libmicrohttpd's own HTML page, or nothing before the
 * connection ends. Every case states what is expected. The ones rowlock answers itself must stay
 * problem+json; the others are answered (or not) by libmicrohttpd 0.9.75 before any callback of
 * rowlock can act, and each says where (docs/architecture.md, "What libmicrohttpd answers by
 * itself"): were the library to change, the case fails and the table is to be looked at again.
 * Short connection and request timeouts make the silent ones end within seconds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define GET_HEALTHZ "GET /healthz HTTP/1.1\r\nHost: x\r\n"
#define POST_TOPIC  "PUT /topics/t HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"

/* What came back on one connection: "problem <status> <code>", "other <status>" (not
 * problem+json: libmicrohttpd's HTML), or "none", of its first answer and of its last; and how
 * many answers in all. */
struct outcome {
    char first[96], last[96];
    int answers;
};

struct edge_case {
    const char *name;
    char *bytes; /* owned */
    size_t len;
    int half_close; /* the client ends its sending side after the bytes */
    const char *want;
    int want_answers;
    const char *why;       /* for an answer rowlock cannot give: libmicrohttpd's code path */
    const char *want_last; /* the last answer, when there are several (NULL: not looked at) */
};

static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_CONNECTION_TIMEOUT_S=2", "ROWLOCK_REQUEST_TIMEOUT_S=2", NULL};
    return th_svc_start("malformed_requests", env);
}

static int teardown(void **state)
{
    return th_svc_teardown(state);
}

/* A case whose bytes are text (copied). */
static struct edge_case text_case(const char *name, const char *text, int half_close,
                                  const char *want, int want_answers, const char *why)
{
    struct edge_case c = {.name = name,
                          .bytes = strdup(text),
                          .len = strlen(text),
                          .half_close = half_close,
                          .want = want,
                          .want_answers = want_answers,
                          .why = why};
    assert_non_null(c.bytes);
    return c;
}

/* A case of head, then n bytes of fill, then tail. */
static struct edge_case padded_case(const char *name, const char *head, char fill, size_t n,
                                    const char *tail, const char *want, const char *why)
{
    size_t hl = strlen(head), tl = strlen(tail);
    struct edge_case c = {.name = name,
                          .bytes = malloc(hl + n + tl),
                          .len = hl + n + tl,
                          .want = want,
                          .want_answers = 1,
                          .why = why};
    assert_non_null(c.bytes);
    memcpy(c.bytes, head, hl);
    memset(c.bytes + hl, fill, n);
    memcpy(c.bytes + hl + n, tail, tl);
    return c;
}

/* A pipeline whose first request is served (200) and whose second is refused (want_last),
 * the connection closed after it: the third is never read. */
static struct edge_case pipeline_case(const char *name, const char *text, const char *want_last)
{
    struct edge_case c = text_case(name, text, 0, "other 200", 2, NULL);
    c.want_last = want_last;
    return c;
}

/* n empty lines (CRLF), then tail. */
static struct edge_case empty_lines_case(const char *name, size_t n, const char *tail,
                                         const char *want, int want_answers, const char *why)
{
    size_t tl = strlen(tail);
    struct edge_case c = {.name = name,
                          .bytes = malloc(2 * n + tl + 1),
                          .len = 2 * n + tl,
                          .want = want,
                          .want_answers = want_answers,
                          .why = why};
    assert_non_null(c.bytes);
    for (size_t i = 0; i < n; i++)
        memcpy(c.bytes + 2 * i, "\r\n", 2);
    memcpy(c.bytes + 2 * n, tail, tl);
    return c;
}

/* The first bytes a TLS client sends: a TLS 1.2 ClientHello record (no LF, no space in it). */
static struct edge_case client_hello_case(const char *want, const char *why)
{
    static const unsigned char head[] = {0x16, 0x03, 0x01, 0x00, 0x31, 0x01,
                                         0x00, 0x00, 0x2d, 0x03, 0x03};
    static const unsigned char tail[] = {0x00, 0x00, 0x04, 0xc0, 0x2f, 0x00,
                                         0x9c, 0x01, 0x00, 0x00, 0x00};
    struct edge_case c = {.name = "TLS ClientHello on the plain port",
                          .bytes = malloc(54),
                          .len = 54,
                          .want = want,
                          .want_answers = 1,
                          .why = why};
    assert_non_null(c.bytes);
    memcpy(c.bytes, head, sizeof(head));
    memset(c.bytes + sizeof(head), 0x11, 32); /* the client's random */
    memcpy(c.bytes + sizeof(head) + 32, tail, sizeof(tail));
    return c;
}

/* The answer at a (up to the next one; NULL: none) as "problem <status> <code>", "other
 * <status>" or "none", into out. */
static void summarize(const char *a, char *out, size_t size)
{
    const char *next = a != NULL ? strstr(a + 1, "HTTP/1.1 ") : NULL;
    char *one = a != NULL ? strndup(a, next != NULL ? (size_t)(next - a) : strlen(a)) : NULL;
    int status = 0;
    char code[48] = "";
    const char *c = one != NULL ? strstr(one, "\"code\":\"") : NULL;
    if (one == NULL || sscanf(one, "HTTP/1.1 %d", &status) != 1)
        snprintf(out, size, "none");
    else if (strstr(one, "Content-Type: application/problem+json\r\n") != NULL && c != NULL &&
             sscanf(c + 8, "%47[a-z_]", code) == 1)
        snprintf(out, size, "problem %d %s", status, code);
    else
        snprintf(out, size, "other %d", status);
    free(one);
}

/* Reads everything until the connection ends (the service's timeouts bound it) and sums it up. */
static void read_outcome(int fd, struct outcome *o)
{
    size_t size = 1 << 20, got = 0;
    char *buf = malloc(size);
    assert_non_null(buf);
    struct timeval tv = {.tv_sec = 20};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n;
    while (got + 1 < size && (n = read(fd, buf + got, size - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    o->answers = 0;
    for (const char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p += 9)
        o->answers++;
    summarize(got > 0 ? buf : NULL, o->first, sizeof(o->first));
    const char *last = buf;
    for (const char *p = buf; (p = strstr(p + 1, "HTTP/1.1 ")) != NULL;)
        last = p;
    summarize(got > 0 ? last : NULL, o->last, sizeof(o->last));
    free(buf);
}

/* Sends every case on its own connection first (so that the silent ones wait out the timeouts
 * together), then reads each; prints the table and fails on any case that differs. */
static void run_cases(struct edge_case *cases, size_t n)
{
    int *fds = calloc(n, sizeof(int));
    assert_non_null(fds);
    for (size_t i = 0; i < n; i++) {
        fds[i] = th_tcp_connect(th_svc.port);
        size_t off = 0;
        while (off < cases[i].len) {
            ssize_t w = send(fds[i], cases[i].bytes + off, cases[i].len - off, MSG_NOSIGNAL);
            if (w <= 0)
                break; /* refused before the rest was read: what came back still counts */
            off += (size_t)w;
        }
    }
    /* the clients' ends come a moment after their bytes: sent with them, libmicrohttpd (its epoll
     * being edge-triggered) sometimes reads the bytes and never the end, and the request then
     * waits for the connection's timeout, whatever rowlock does at the end */
    usleep(300 * 1000);
    for (size_t i = 0; i < n; i++)
        if (cases[i].half_close)
            shutdown(fds[i], SHUT_WR);
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
        struct outcome o;
        read_outcome(fds[i], &o);
        close(fds[i]);
        int ok = strcmp(o.first, cases[i].want) == 0 && o.answers == cases[i].want_answers &&
                 (cases[i].want_last == NULL || strcmp(o.last, cases[i].want_last) == 0);
        wrong += !ok;
        printf("%-4s %-58s %-40s answers %d%s%s\n", ok ? "ok" : "FAIL", cases[i].name, o.first,
               o.answers, cases[i].why ? "  (" : "", cases[i].why ? cases[i].why : "");
        if (cases[i].want_last != NULL)
            printf("     the last answer: %s\n", o.last);
        if (!ok)
            printf("     expected %s, answers %d, the last %s\n", cases[i].want,
                   cases[i].want_answers, cases[i].want_last ? cases[i].want_last : "(any)");
        free(cases[i].bytes);
    }
    free(fds);
    if (wrong > 0)
        fail_msg("%d of %zu malformed requests were not answered as expected", wrong, n);
}

/* What rowlock answers itself: problem+json. */
static void answered_with_problem_json(void **state)
{
    struct edge_case cases[] = {
        text_case("Transfer-Encoding: gzip", POST_TOPIC "Transfer-Encoding: gzip\r\n\r\n{}", 0,
                  "problem 501 not_implemented", 1, NULL),
        text_case("Transfer-Encoding: chunked, chunked",
                  POST_TOPIC "Transfer-Encoding: chunked, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0,
                  "problem 400 bad_request", 1, NULL),
        text_case("Transfer-Encoding: gzip, chunked",
                  POST_TOPIC "Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 0,
                  "problem 501 not_implemented", 1, NULL),
        text_case("Transfer-Encoding twice",
                  POST_TOPIC "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "2\r\n{}\r\n0\r\n\r\n",
                  0, "problem 400 bad_request", 1, NULL),
        text_case("GET with Transfer-Encoding: identity",
                  GET_HEALTHZ "Transfer-Encoding: identity\r\n\r\n", 0,
                  "problem 501 not_implemented", 1, NULL),
        text_case("Content-Length 50, 7 bytes, then the client's end",
                  POST_TOPIC "Content-Length: 50\r\n\r\n{\"a\":1}", 1, "problem 400 bad_request", 1,
                  NULL),
        text_case("chunk size 7fffffffffffffff, 3 bytes, then the client's end",
                  POST_TOPIC "Transfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc", 1,
                  "problem 400 bad_request", 1, NULL),
        text_case("headers cut short by the client's end", GET_HEALTHZ "X-A: 1\r\n", 1,
                  "problem 400 bad_request", 1, NULL),
        padded_case("a 64 KiB Cookie header", GET_HEALTHZ "Cookie: a=", 'b', 65536, "\r\n\r\n",
                    "problem 431 headers_too_large", NULL),
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* The first request line of a connection, which rowlock reads before libmicrohttpd does (its
 * own answers were HTML, or nothing): problem+json, or the request served. */
static void request_lines_answered_with_problem_json(void **state)
{
    struct edge_case cases[] = {
        text_case("HTTP/2.0", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 0,
                  "problem 505 http_version_not_supported", 1, NULL),
        text_case("HTTP/9.9", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 0,
                  "problem 505 http_version_not_supported", 1, NULL),
        text_case("HTTP/0.9", "GET /healthz HTTP/0.9\r\n\r\n", 0,
                  "problem 505 http_version_not_supported", 1, NULL),
        text_case("the HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 0,
                  "problem 505 http_version_not_supported", 1, NULL),
        text_case("HTTP/1", "GET /healthz HTTP/1\r\nHost: x\r\n\r\n", 0, "problem 400 bad_request",
                  1, NULL),
        text_case("no version", "GET /healthz\r\nHost: x\r\n\r\n", 0, "problem 400 bad_request", 1,
                  NULL),
        text_case("GARBAGE", "GARBAGE\r\n\r\n", 0, "problem 400 bad_request", 1, NULL),
        text_case("a control byte in the target", "GET /a\001b HTTP/1.1\r\nHost: x\r\n\r\n", 0,
                  "problem 400 bad_request", 1, NULL),
        text_case("a request line cut by the client's end", "GET /healthz HTT", 1,
                  "problem 400 bad_request", 1, NULL),
        text_case("a request line cut short, the connection kept open", "GET /healthz HTT", 0,
                  "problem 408 request_timeout", 1, NULL),
        /* skipped, as RFC 9112 section 2.2 asks: libmicrohttpd shrank its read buffer by each
         * one and answered its HTML 414 once the buffer was gone */
        empty_lines_case("100,000 empty lines, then a request", 100000,
                         GET_HEALTHZ "Connection: close\r\n\r\n", "other 200", 1, NULL),
        client_hello_case("problem 400 bad_request", NULL),
        pipeline_case("GARBAGE inside a pipeline of three",
                      GET_HEALTHZ "\r\nGARBAGE\r\n" GET_HEALTHZ "\r\n", "problem 400 bad_request"),
        pipeline_case("HTTP/2.0 inside a pipeline of three",
                      GET_HEALTHZ "\r\nGET /healthz HTTP/2.0\r\n\r\n" GET_HEALTHZ "\r\n",
                      "problem 505 http_version_not_supported"),
        padded_case("a 200 KiB request line", "GET /", 'a', 204800, " HTTP/1.1\r\n\r\n",
                    "problem 414 uri_too_long", NULL),
        empty_lines_case("1,000 empty lines, and nothing asked", 1000, "", "none", 0,
                         "closed at the connection's timeout, without an answer"),
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* Requests libmicrohttpd has whole but for their headers or body, cut at the request deadline. */
static void late_requests_answered_408(void **state)
{
    struct edge_case cases[] = {
        text_case("the request line alone, the connection kept open", "GET /healthz HTTP/1.1\r\n",
                  0, "problem 408 request_timeout", 1, NULL),
        text_case("chunk size 7fffffffffffffff, 3 bytes, the connection kept open",
                  POST_TOPIC "Transfer-Encoding: chunked\r\n\r\n7fffffffffffffff\r\nabc", 0,
                  "problem 408 request_timeout", 1, NULL),
        text_case("Content-Length 50, 7 bytes, the connection kept open",
                  POST_TOPIC "Content-Length: 50\r\n\r\n{\"a\":1}", 0,
                  "problem 408 request_timeout", 1, NULL),
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

/* What libmicrohttpd answers, or drops, before rowlock's callbacks run. */
static void answered_by_libmicrohttpd(void **state)
{
    struct edge_case cases[] = {
        text_case("header line without a colon", GET_HEALTHZ "NoColon\r\n\r\n", 0, "other 400", 1,
                  "process_header_line, while the headers are read"),
        /* libmicrohttpd sends these two's status line and headers twice: parse_connection_headers
         * queues its answer, then the state machine goes on and builds the headers again */
        text_case("Content-Length: abc", POST_TOPIC "Content-Length: abc\r\n\r\n{}", 0, "other 400",
                  2, "parse_connection_headers, before the first access call"),
        text_case("Content-Length past 2^64",
                  POST_TOPIC "Content-Length: 99999999999999999999999\r\n\r\n{}", 0, "other 413", 2,
                  "parse_connection_headers, before the first access call"),
        text_case("chunk size not hexadecimal",
                  POST_TOPIC "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 0,
                  "other 400", 1, "process_request_body, between two access calls"),
        text_case("chunk size past 2^64",
                  POST_TOPIC "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n{}\r\n", 0,
                  "other 413", 1, "process_request_body, between two access calls"),
        padded_case("a 100 KiB header", GET_HEALTHZ "X-Big: ", 'b', 102400, "\r\n\r\n", "other 431",
                    "get_next_header_line: the read buffer cannot grow"),
        text_case("GARBAGE inside a pipeline, after a request with a body",
                  GET_HEALTHZ "Content-Length: 2\r\n\r\n{}GARBAGE\r\n", 0, "other 200", 1,
                  "the intake does not look past a body: parse_initial_message_line, unanswered"),
    };
    run_cases(cases, sizeof(cases) / sizeof(cases[0]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(answered_with_problem_json),
        cmocka_unit_test(request_lines_answered_with_problem_json),
        cmocka_unit_test(late_requests_answered_408),
        cmocka_unit_test(answered_by_libmicrohttpd),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
