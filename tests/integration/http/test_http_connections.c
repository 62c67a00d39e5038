/* Connections a client cannot hold on to, against a running rowlock with
 * small limits: over ROWLOCK_CONNECTION_LIMIT a new connection is closed at once instead of
 * waiting unanswered in the listen backlog, and /healthz answers as soon as a slot frees; a
 * request must arrive whole within ROWLOCK_REQUEST_TIMEOUT_S of its first line (forty clients
 * sending a header line every second are all cut by then, though the idle timeout never fires
 * for them), and its first line within the longer of that and the idle timeout. */
#include <errno.h>
#include <poll.h>
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

static int setup(void **state)
{
    return th_svc_db("http_connections");
}

static void send_all(int fd, const char *s)
{
    assert_int_equal(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/* Reads within timeout_ms: 1 when the peer closed (EOF or reset), 0 when data came (copied to
 * buf), -1 when nothing happened. */
static int wait_closed(int fd, int timeout_ms, char *buf, size_t size)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    ssize_t n = recv(fd, buf, size - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        return 0;
    }
    return n == 0 || errno == ECONNRESET ? 1 : -1;
}

static const char healthz[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

static void over_the_limit_is_closed_at_once(void **state)
{
    const char *env[] = {"ROWLOCK_CONNECTION_LIMIT=4", NULL};
    assert_int_equal(th_svc_run(env), 0);
    int held[4];
    char buf[4096];
    for (int i = 0; i < 4; i++) {
        /* answered, and kept open (keep-alive): each holds a slot */
        held[i] = th_tcp_connect(th_svc.port);
        send_all(held[i], healthz);
        assert_int_equal(wait_closed(held[i], 5000, buf, sizeof(buf)), 0);
        assert_non_null(strstr(buf, "HTTP/1.1 200"));
    }
    int extra = th_tcp_connect(th_svc.port);
    send(extra, healthz, strlen(healthz), MSG_NOSIGNAL);
    double start = th_now();
    int closed = wait_closed(extra, 3000, buf, sizeof(buf));
    double took = th_now() - start;
    close(extra);
    if (closed != 1)
        fail_msg("the connection over the limit was not closed (%d after %.1f s)", closed, took);
    assert_true(took < 1.0);
    /* a freed slot serves /healthz again */
    close(held[0]);
    struct th_response r;
    long status = 0;
    for (double until = th_now() + 5; status != 200 && th_now() < until;) {
        if (th_http(th_svc.port, "GET", "/healthz", NULL, NULL, 0, &r) == 0)
            status = r.status;
        th_response_free(&r); /* filled on a transport error too */
        if (status != 200)
            usleep(50 * 1000);
    }
    assert_int_equal(status, 200);
    for (int i = 1; i < 4; i++)
        close(held[i]);
}

#define SLOW_HEADERS 40
#define SLOW_LINES   5

static void slow_requests_are_cut_at_the_deadline(void **state)
{
    const char *env[] = {"ROWLOCK_REQUEST_TIMEOUT_S=3", "ROWLOCK_CONNECTION_TIMEOUT_S=5", NULL};
    assert_int_equal(th_svc_run(env), 0);
    int fds[SLOW_HEADERS + SLOW_LINES];
    double closed_at[SLOW_HEADERS + SLOW_LINES];
    const int n = SLOW_HEADERS + SLOW_LINES;
    for (int i = 0; i < n; i++) {
        fds[i] = th_tcp_connect(th_svc.port);
        closed_at[i] = 0;
        send_all(fds[i], i < SLOW_HEADERS ? "GET /healthz HTTP/1.1\r\nHost: x\r\n" : "G");
    }
    /* a well-behaved keep-alive client that idles between requests is not cut */
    int idle = th_tcp_connect(th_svc.port);
    double start = th_now();
    int open = n;
    char buf[4096];
    for (int tick = 0; open > 0 && th_now() - start < 12; tick++) {
        for (int i = 0; i < n; i++) {
            if (closed_at[i] != 0)
                continue;
            /* one header line, or one byte of the request line, every second */
            if (send(fds[i], i < SLOW_HEADERS ? "X-Slow: 1\r\n" : "E", i < SLOW_HEADERS ? 11 : 1,
                     MSG_NOSIGNAL) < 0 ||
                wait_closed(fds[i], 0, buf, sizeof(buf)) == 1) {
                closed_at[i] = th_now() - start;
                open--;
            }
        }
        if (tick == 2) { /* 2 s in: still under every deadline */
            assert_int_equal(open, n);
            send_all(idle, healthz);
            assert_int_equal(wait_closed(idle, 5000, buf, sizeof(buf)), 0);
            assert_non_null(strstr(buf, "HTTP/1.1 200"));
        }
        usleep(1000 * 1000);
    }
    for (int i = 0; i < n; i++) {
        close(fds[i]);
        if (closed_at[i] == 0)
            fail_msg("client %d (%s) was still connected after 12 s", i,
                     i < SLOW_HEADERS ? "slow headers" : "slow request line");
        /* headers: 3 s after the request line; request line: the 5 s idle timeout */
        assert_true(closed_at[i] < (i < SLOW_HEADERS ? 6.0 : 8.0));
    }
    close(idle);
}

int main(void)
{
    /* each case starts th_svc with its limits; its teardown stops it even when it fails */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(over_the_limit_is_closed_at_once, th_svc_teardown),
        cmocka_unit_test_teardown(slow_requests_are_cut_at_the_deadline, th_svc_teardown),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
