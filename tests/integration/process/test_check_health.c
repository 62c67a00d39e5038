/* `rowlock --check-health URL`, the container health check without curl, run as a process:
 * exit 0 when a running rowlock answers 200 (/healthz and /readyz, by address and by name), 1
 * when it answers anything else (404 from the service, 503 from a stand-in server), when the
 * port is closed, when a listener never answers (within --timeout-ms, not hanging), and when
 * https:// meets plain HTTP; 2 for a malformed URL. */
#include <netinet/in.h>
#include <pthread.h>
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
    return th_svc_start("check_health", NULL);
}

/* Runs `rowlock --check-health URL [extra]`; returns its exit status, its output in out. */
static int check(const char *url, const char *extra, char *out, size_t outsize)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s' --check-health '%s' %s 2>&1", ROWLOCK_BINARY, url,
             extra ? extra : "");
    return th_run(cmd, out, outsize);
}

/* A listening socket on 127.0.0.1 on a free port (written to *port). */
static int listener(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void healthy_service_passes(void **state)
{
    char url[128], out[1024];
    const char *paths[] = {"/healthz", "/readyz"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", th_svc.port, paths[i]);
        if (check(url, NULL, out, sizeof(out)) != 0)
            fail_msg("%s: %s", url, out);
    }
    snprintf(url, sizeof(url), "http://localhost:%d/healthz", th_svc.port);
    if (check(url, "--timeout-ms=3000", out, sizeof(out)) != 0)
        fail_msg("%s: %s", url, out);
}

static void other_status_fails(void **state)
{
    char url[128], out[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/no-such-route", th_svc.port);
    assert_int_equal(check(url, NULL, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "answered 404"));
}

static void *answer_503(void *arg)
{
    int lfd = *(int *)arg;
    int c = accept(lfd, NULL, NULL);
    if (c >= 0) {
        char buf[2048];
        (void)!read(c, buf, sizeof(buf));
        static const char reply[] = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
                                    "Content-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!write(c, reply, sizeof(reply) - 1);
        close(c);
    }
    return NULL;
}

static void unavailable_fails(void **state)
{
    int port, lfd = listener(&port);
    pthread_t t;
    pthread_create(&t, NULL, answer_503, &lfd);
    char url[128], out[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
    assert_int_equal(check(url, NULL, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "answered 503"));
    pthread_join(t, NULL);
    close(lfd);
}

static void closed_port_fails(void **state)
{
    int port, lfd = listener(&port);
    close(lfd); /* nothing listens there now */
    char url[128], out[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
    assert_int_equal(check(url, NULL, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "cannot connect"));
}

static void silent_listener_times_out(void **state)
{
    int port, lfd = listener(&port); /* the kernel completes the handshake; nobody answers */
    char url[128], out[1024];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
    double t0 = th_now();
    assert_int_equal(check(url, "--timeout-ms=400", out, sizeof(out)), 1);
    double took = th_now() - t0;
    assert_non_null(strstr(out, "timeout"));
    assert_true(took >= 0.35);
    assert_true(took < 5.0);
    close(lfd);
}

/* https:// to a service speaking plain HTTP: the handshake fails, quickly (the service over
 * HTTPS is test_tls's) */
static void https_to_plain_http_fails(void **state)
{
    char url[128], out[1024];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", th_svc.port);
    assert_int_equal(check(url, "--timeout-ms=3000", out, sizeof(out)), 1);
    assert_non_null(strstr(out, "TLS handshake failed"));
}

static void malformed_url_exits_2(void **state)
{
    char out[1024];
    assert_int_equal(check("ftp://127.0.0.1/healthz", NULL, out, sizeof(out)), 2);
    assert_int_equal(check("127.0.0.1:8080/healthz", NULL, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "usage"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthy_service_passes),    cmocka_unit_test(other_status_fails),
        cmocka_unit_test(unavailable_fails),         cmocka_unit_test(closed_port_fails),
        cmocka_unit_test(https_to_plain_http_fails), cmocka_unit_test(silent_listener_times_out),
        cmocka_unit_test(malformed_url_exits_2),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
