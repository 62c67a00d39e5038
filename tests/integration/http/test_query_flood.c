/* Targets libmicrohttpd cannot hold, sent by a client without a token: a query of 2,000 '&'
 * (a 2 KB target; libmicrohttpd keeps a record of each part and, out of room, used to drop the
 * request without a word, never completing it) and a 78 KB target of few parts (the same, its
 * request line filling the connection's memory). Each is a 414 problem+json at once, with
 * Connection: close and the connection ended; none stays counted in flight
 * (rowlock_http_requests_in_flight back at its baseline while the clients still hold their
 * connections open), and a SIGTERM right after 2,000 of them exits at once with nothing cut
 * short. A query of 64 parts is still read, and answered by its route. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define FLOOD 2000

static int setup(void **state)
{
    if (th_raise_fd_limit(FLOOD + 256) != 0)
        return -1;
    return th_svc_db("query_flood");
}

/* "GET <target> HTTP/1.1" with Host, in a new string (the caller frees it); *len its length. */
static char *request_for(const char *path, size_t query_parts, size_t pad, size_t *len)
{
    size_t cap = strlen(path) + query_parts + pad + 64;
    char *req = malloc(cap);
    assert_non_null(req);
    size_t n = (size_t)snprintf(req, cap, "GET %s?", path);
    for (size_t i = 1; i < query_parts; i++)
        req[n++] = '&';
    memset(req + n, 'a', pad);
    n += pad;
    n += (size_t)snprintf(req + n, cap - n, " HTTP/1.1\r\nHost: x\r\n\r\n");
    *len = n;
    return req;
}

/* Sends req on a new connection and reads its answer (asserted to be a 414 problem+json
 * uri_too_long with Connection: close, whose detail holds want). Returns the connection, open. */
static int send_refused(int port, const char *req, size_t len, const char *want)
{
    int fd = th_tcp_connect(port);
    assert_int_equal(write(fd, req, len), (ssize_t)len);
    char buf[2048];
    th_raw_read(fd, buf, sizeof(buf), 5000);
    if (strncmp(buf, "HTTP/1.1 414 ", 13) != 0 ||
        strstr(buf, "Content-Type: application/problem+json\r\n") == NULL ||
        strstr(buf, "Connection: close\r\n") == NULL ||
        strstr(buf, "\"code\":\"uri_too_long\"") == NULL || strstr(buf, want) == NULL)
        fail_msg("a target libmicrohttpd cannot hold was answered:\n%s", buf);
    return fd;
}

/* The connection's end arrives after the answer (rowlock ends its side at once). */
static void assert_ended(int fd)
{
    char rest[64];
    assert_int_equal(th_raw_read(fd, rest, sizeof(rest), 2000), 0);
}

static void many_query_parts_are_414_and_leave_nothing_in_flight(void **state)
{
    struct th_service svc;
    const char *env[] = {"ROWLOCK_DRAIN_TIMEOUT_S=20", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    double baseline = th_metric(svc.port, "rowlock_http_requests_in_flight");
    assert_true(baseline >= 1); /* the scrape itself */

    size_t len = 0;
    char *req = request_for("/topics/t/messages", FLOOD + 1, 0, &len);
    static int fds[FLOOD];
    for (int i = 0; i < FLOOD; i++)
        fds[i] = send_refused(svc.port, req, len, "the query has 2001 parts");
    free(req);
    assert_ended(fds[0]);
    assert_ended(fds[FLOOD - 1]);

    /* the other way to overflow it: a request line that fills its memory, few parts */
    req = request_for("/topics/t/messages", 64, 78000, &len);
    int fd = send_refused(svc.port, req, len, "the request target is longer than 8192 bytes");
    free(req);
    assert_ended(fd);
    close(fd);

    /* every one of them answered and ended, though their clients still hold the connections */
    double in_flight = th_metric(svc.port, "rowlock_http_requests_in_flight");
    if (in_flight != baseline)
        fail_msg("%.0f requests in flight after the refusals, %.0f before", in_flight, baseline);
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_true(th_service_logged(&svc, "\"status\":414,") &&
                th_service_logged(&svc, "\"code\":\"uri_too_long\""));

    /* nothing for a drain to wait for: it stops at once, the connections still open */
    double start = th_now();
    th_service_signal(&svc, SIGTERM);
    assert_int_equal(th_service_wait(&svc, 30), 0);
    double took = th_now() - start;
    for (int i = 0; i < FLOOD; i++)
        close(fds[i]);
    if (!th_service_logged(&svc, "\"requests_cut_short\":0"))
        fail_msg("the drain cut requests short (or never logged its end)");
    if (took > 10)
        fail_msg("SIGTERM took %.1f s: the drain waited for requests that had ended", took);
}

static void a_query_of_64_parts_is_read(void **state)
{
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, NULL), 0);
    struct th_response r;
    /* 64 parts, 63 of them empty: read, and the route's own rules apply (no such topic) */
    char path[128] = "/topics/nowhere/messages?";
    size_t n = strlen(path);
    memset(path + n, '&', 63);
    strcpy(path + n + 63, "limit=1");
    assert_int_equal(th_http(svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "topic_not_found");
    th_response_free(&r);
    /* one more is refused */
    memmove(path + n + 1, path + n, strlen(path + n) + 1);
    path[n] = '&';
    assert_int_equal(th_http(svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 414, "uri_too_long");
    th_response_free(&r);
    assert_int_equal(th_service_stop(&svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_query_parts_are_414_and_leave_nothing_in_flight),
        cmocka_unit_test(a_query_of_64_parts_is_read),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
