/* The access line of a request the service cut short says how it answered. A chunked body that
 * grows past the body limit is answered 413 and the connection ended; a client that resets the
 * connection as soon as it has sent its bytes (a hostile one, or a load balancer giving up) made
 * the 413's write fail, and the request was logged with status 0 and no code, as if nothing had
 * been decided. */
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

#define BODY_LIMIT 8192
#define ROUNDS     40

static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_BODY_LIMIT=8192", NULL};
    if (th_svc_start("access_log_cut", env) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    return 0;
}

/* Sends the headers and twice the limit of chunked body in one write, then resets the
 * connection (SO_LINGER 0) without reading. The bytes are few enough to sit whole in the
 * service's receive buffer when the reset comes (a reset drops what the sender still holds), so
 * the service reads past the limit and answers 413 into a connection already reset. */
static void send_and_reset(const char *request_id)
{
    size_t body = 2 * BODY_LIMIT, chunk = 4096;
    char *buf = malloc(1024 + body + body / chunk * 16);
    assert_non_null(buf);
    size_t n = (size_t)sprintf(buf,
                               "POST /topics/t/messages HTTP/1.1\r\nHost: x\r\n"
                               "Content-Type: application/json\r\nX-Request-Id: %s\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n",
                               request_id);
    for (size_t sent = 0; sent < body; sent += chunk) {
        n += (size_t)sprintf(buf + n, "%zx\r\n", chunk);
        memset(buf + n, ' ', chunk);
        n += chunk;
        n += (size_t)sprintf(buf + n, "\r\n");
    }
    int fd = th_tcp_connect(th_svc.port);
    ssize_t w = send(fd, buf, n, MSG_NOSIGNAL); /* may stop short once the 413 closed it */
    (void)w;
    struct linger reset = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
    free(buf);
}

/* A reset may also reach the service before it reads the request line (libmicrohttpd then
 * drops the connection unlogged) or before the limit (status 0: nothing was decided); on
 * loopback, the service reads the whole body first in most rounds. Every round logged with its
 * 413 decided must say 413. */
static void chunked_413_cut_by_a_reset_is_logged_413(void **state)
{
    for (int i = 0; i < ROUNDS; i++) {
        char id[32];
        snprintf(id, sizeof(id), "cut-413-%d", i);
        send_and_reset(id);
        usleep(20000);
    }
    /* a request sent after them is logged after them */
    const char *last[] = {"X-Request-Id: cut-413-last", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", last, NULL, 0, &r), 0);
    th_response_free(&r);
    for (int k = 0; k < 300 && !th_service_logged(&th_svc, "\"request_id\":\"cut-413-last\""); k++)
        usleep(10000);
    int logged = 0;
    for (int i = 0; i < ROUNDS; i++) {
        char line[256];
        snprintf(line, sizeof(line), "\"request_id\":\"cut-413-%d\",", i);
        if (!th_service_logged(&th_svc, line))
            continue;
        logged++;
        snprintf(line, sizeof(line),
                 "\"request_id\":\"cut-413-%d\",\"method\":\"POST\",\"route\":\"/topics/"
                 "{topic}/messages\",\"path\":\"/topics/t/messages\",\"status\":413,",
                 i);
        if (!th_service_logged(&th_svc, line))
            fail_msg("request cut-413-%d is not logged with status 413", i);
    }
    fprintf(stderr, "%d of %d cut requests reached the service\n", logged, ROUNDS);
    assert_true(logged > 0);
    /* and nothing was produced */
    json_t *t = th_svc_get("/topics/t");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "counts"), "messages")),
                     0);
    json_decref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(chunked_413_cut_by_a_reset_is_logged_413),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
