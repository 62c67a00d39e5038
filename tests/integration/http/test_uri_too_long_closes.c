/* After its early 414 (a target past the URL limit, or a query of more than 64 parts), rowlock
 * lets go of the connection at once, whatever its client does next: the client here keeps its
 * end open and sends nothing more. With a connection limit of 1, the next connection is served
 * only once the refused one is gone, so a /healthz that answers within a second says it went
 * (a connection kept until libmicrohttpd's timeout, 10 s here, would refuse it). Each shape is
 * tried with its headers sent whole, and with the request line alone (headers never sent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define URL_LIMIT 2048

static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_CONNECTION_LIMIT=1", "ROWLOCK_CONNECTION_TIMEOUT_S=10",
                         "ROWLOCK_REQUEST_TIMEOUT_S=10", "ROWLOCK_URL_LIMIT=2048", NULL};
    return th_svc_start("uri_too_long_closes", env);
}

static int teardown(void **state)
{
    return th_svc_teardown(state);
}

/* "GET /healthz?<n × fill> HTTP/1.1\r\n", then the headers when whole; the caller frees it. */
static char *request_line(char fill, size_t n, int whole, size_t *len)
{
    size_t cap = n + 64;
    char *req = malloc(cap);
    assert_non_null(req);
    size_t at = (size_t)snprintf(req, cap, "GET /healthz?");
    memset(req + at, fill, n);
    at += n;
    at += (size_t)snprintf(req + at, cap - at, " HTTP/1.1\r\n%s", whole ? "Host: x\r\n\r\n" : "");
    *len = at;
    return req;
}

/* Seconds until a /healthz on a new connection is answered 200 (up to 5). */
static double until_served(void)
{
    static const char get[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    double start = th_now();
    while (th_now() - start < 5) {
        char buf[1024];
        int fd = th_tcp_connect(th_svc.port);
        if (write(fd, get, sizeof(get) - 1) == (ssize_t)(sizeof(get) - 1) &&
            th_raw_read(fd, buf, sizeof(buf), 1000) > 0 && strncmp(buf, "HTTP/1.1 200 ", 13) == 0) {
            close(fd);
            return th_now() - start;
        }
        close(fd);
        usleep(20 * 1000);
    }
    return th_now() - start;
}

static void refused_and_released(const char *name, char fill, size_t n, int whole)
{
    size_t len = 0;
    char *req = request_line(fill, n, whole, &len);
    char buf[2048];
    int fd = -1;
    /* the last /healthz's connection may still count against the limit: closed at once, then */
    for (int tries = 0; tries < 50; tries++) {
        fd = th_tcp_connect(th_svc.port);
        assert_int_equal(write(fd, req, len), (ssize_t)len);
        if (th_raw_read(fd, buf, sizeof(buf), 5000) > 0)
            break;
        close(fd);
        usleep(20 * 1000);
    }
    free(req);
    if (strncmp(buf, "HTTP/1.1 414 ", 13) != 0 || strstr(buf, "\"uri_too_long\"") == NULL)
        fail_msg("%s: not answered 414 uri_too_long:\n%s", name, buf);
    char rest[64];
    assert_int_equal(th_raw_read(fd, rest, sizeof(rest), 2000), 0); /* and its end */
    double took = until_served(); /* the client still holds its end open */
    close(fd);
    printf("%-44s next connection served after %.2f s\n", name, took);
    if (took > 1.0)
        fail_msg("%s: the refused connection was held %.1f s after its 414", name, took);
}

/* Each five times: whether libmicrohttpd is left stuck by the query depends on how much of the
 * request its first read took. */
static void the_connection_goes_with_the_414(void **state)
{
    for (int i = 0; i < 5; i++) {
        refused_and_released("2,000 '&', headers whole", '&', 2000, 1);
        refused_and_released("2,000 '&', the request line alone", '&', 2000, 0);
        refused_and_released("3,000 bytes of target, headers whole", 'a', 3000, 1);
        refused_and_released("3,000 bytes of target, the request line alone", 'a', 3000, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_connection_goes_with_the_414),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
