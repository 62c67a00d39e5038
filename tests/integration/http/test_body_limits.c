/* Request bodies through the real HTTP layer (service/http.c, over TCP) with a route table of
 * the test's own: 413 from Content-Length before the body is read, 413 for a chunked body that
 * grows past the limit (answered at once, and the connection closed), 415 for a wrong or missing
 * Content-Type, invalid_json, json_too_deep, and a valid body reaching the handler. No database is
 * involved. */
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

#include "harness.h"
#include "service/http.h"

static struct svc_config cfg;
static struct svc_server *server;
static int port;

static enum svc_outcome echo(struct svc_request *req)
{
    return svc_reply_json(req, 200, json_incref(svc_req_json(req)));
}

static const struct svc_route test_routes[] = {
    {"POST", "/echo", echo, SVC_SCOPE_WRITE, SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PATCH", "/merge", echo, SVC_SCOPE_WRITE, SVC_BODY_MERGE_PATCH, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
};

static const char *no_env(const char *name)
{
    return NULL;
}

static int setup(void **state)
{
    char *argv[] = {"test",
                    "--port=0",
                    "--listen-address=127.0.0.1",
                    "--body-limit=4096",
                    "--json-max-depth=8",
                    "--log-level=warn",
                    NULL};
    if (svc_config_load(&cfg, 6, argv, no_env, stdout, stderr) != SVC_CONFIG_OK)
        return -1;
    server = svc_server_start(&cfg, test_routes, 2, NULL, NULL);
    if (server == NULL)
        return -1;
    port = svc_server_port(server);
    return 0;
}

static int teardown(void **state)
{
    svc_server_shutdown(server, 5);
    svc_config_free(&cfg);
    return 0;
}

static void declared_oversize_body_is_refused_before_reading(void **state)
{
    const char *head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: 104857600\r\n\r\n{\"a\":";
    /* only a few bytes of the 100 MiB were sent: the answer cannot wait for the rest */
    char buf[4096];
    th_raw_exchange(port, head, strlen(head), buf, sizeof(buf), 5000);
    assert_non_null(strstr(buf, "HTTP/1.1 413"));
    assert_non_null(strstr(buf, "application/problem+json"));
    assert_non_null(strstr(buf, "\"code\":\"payload_too_large\""));
}

/* A chunked body past the limit is answered 413 at once and the connection ends there: the
 * client cannot make the service read gigabytes. It offers 256 MiB and must be stopped within
 * the first few MiB (what the socket buffers hold), with the 413 readable. */
static void chunked_body_over_the_limit_is_413_and_closed(void **state)
{
    int fd = th_tcp_connect(port);
    const char *head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    assert_int_equal(write(fd, head, strlen(head)), (ssize_t)strlen(head));
    static char chunk[65536 + 16];
    int hl = snprintf(chunk, sizeof(chunk), "10000\r\n");
    memset(chunk + hl, ' ', 65536);
    memcpy(chunk + hl + 65536, "\r\n", 2);
    size_t clen = (size_t)hl + 65536 + 2, sent = 0;
    char buf[4096];
    size_t got = 0;
    buf[0] = '\0';
    double start = th_now();
    while (sent < ((size_t)256 << 20) && th_now() - start < 20) {
        struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};
        if (poll(&p, 1, 1000) <= 0)
            continue;
        if (p.revents & (POLLIN | POLLHUP | POLLERR))
            break; /* answered, or closed */
        ssize_t n = send(fd, chunk, clen, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            break;
        sent += (size_t)n;
    }
    got = th_raw_read(fd, buf, sizeof(buf), 5000);
    close(fd);
    fprintf(stderr, "sent %zu bytes before the answer or the close\n", sent);
    assert_true(sent < ((size_t)64 << 20));
    assert_true(got > 0);
    assert_non_null(strstr(buf, "HTTP/1.1 413"));
    assert_non_null(strstr(buf, "application/problem+json"));
    assert_non_null(strstr(buf, "Connection: close"));
    assert_non_null(strstr(buf, "\"code\":\"payload_too_large\""));
    /* the service goes on */
    struct th_response r;
    const char *json[] = {"Content-Type: application/json", NULL};
    assert_int_equal(th_http(port, "POST", "/echo", json, "{}", 2, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void wrong_content_type_is_415(void **state)
{
    struct th_response r;
    const char *text[] = {"Content-Type: text/plain", NULL};
    assert_int_equal(th_http(port, "POST", "/echo", text, "{}", 2, &r), 0);
    th_assert_problem(&r, 415, "unsupported_media_type");
    th_response_free(&r);
    const char *none[] = {"Content-Type:", NULL};
    assert_int_equal(th_http(port, "POST", "/echo", none, "{}", 2, &r), 0);
    th_assert_problem(&r, 415, "unsupported_media_type");
    th_response_free(&r);
    /* merge-patch routes take application/merge-patch+json; JSON routes do not */
    const char *mp[] = {"Content-Type: application/merge-patch+json", NULL};
    assert_int_equal(th_http(port, "POST", "/echo", mp, "{}", 2, &r), 0);
    th_assert_problem(&r, 415, "unsupported_media_type");
    th_response_free(&r);
    assert_int_equal(th_http(port, "PATCH", "/merge", mp, "{\"a\":1}", 7, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void malformed_json_is_invalid_json(void **state)
{
    struct th_response r;
    const char *json[] = {"Content-Type: application/json; charset=utf-8", NULL};
    assert_int_equal(th_http(port, "POST", "/echo", json, "{\"a\":", 5, &r), 0);
    th_assert_problem(&r, 400, "invalid_json");
    th_response_free(&r);
    assert_int_equal(th_http(port, "POST", "/echo", json, "", 0, &r), 0);
    th_assert_problem(&r, 400, "invalid_json");
    th_response_free(&r);
    assert_int_equal(th_http(port, "POST", "/echo", json, "{\"a\":1,\"a\":2}", 13, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void deep_json_is_json_too_deep(void **state)
{
    struct th_response r;
    const char *json[] = {"Content-Type: application/json", NULL};
    const char *deep = "[[[[[[[[[[1]]]]]]]]]]";
    assert_int_equal(th_http(port, "POST", "/echo", json, deep, strlen(deep), &r), 0);
    th_assert_problem(&r, 400, "json_too_deep");
    th_response_free(&r);
    /* brackets inside strings do not count */
    const char *flat = "{\"s\":\"[[[[[[[[[[[[\"}";
    assert_int_equal(th_http(port, "POST", "/echo", json, flat, strlen(flat), &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static void valid_body_reaches_the_handler(void **state)
{
    struct th_response r;
    const char *json[] = {"Content-Type: application/json", NULL};
    const char *body = "{\"key\":\"k\",\"value\":[1,2,{\"x\":null}]}";
    assert_int_equal(th_http(port, "POST", "/echo", json, body, strlen(body), &r), 0);
    assert_int_equal(r.status, 200);
    json_t *want = json_loads(body, 0, NULL);
    assert_true(json_equal(want, r.json));
    json_decref(want);
    th_response_free(&r);
    /* exactly at the limit is accepted */
    static char at_limit[4096];
    memset(at_limit, ' ', sizeof(at_limit));
    at_limit[0] = '1';
    assert_int_equal(th_http(port, "POST", "/echo", json, at_limit, sizeof(at_limit), &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(declared_oversize_body_is_refused_before_reading),
        cmocka_unit_test(chunked_body_over_the_limit_is_413_and_closed),
        cmocka_unit_test(wrong_content_type_is_415),
        cmocka_unit_test(malformed_json_is_invalid_json),
        cmocka_unit_test(deep_json_is_json_too_deep),
        cmocka_unit_test(valid_body_reaches_the_handler),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
