/* Every request gets a whole problem+json answer of well-formed UTF-8, whatever bytes it held,
 * and its access-log line is JSON. Before, a detail
 * cut inside a character or holding raw request bytes made the encoding fail, and the
 * connection was dropped with no answer (access log status 0). Raw sockets send what libcurl
 * would not: a target with \xff, a method G\xffT, 600 raw é. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    if (th_svc_start("http_utf8", NULL) != 0)
        return -1;
    struct th_response r;
    const char *json[] = {"Content-Type: application/json", NULL};
    if (th_http(th_svc.port, "PUT", "/topics/t1", json, "{}", 2, &r) != 0)
        return -1;
    long status = r.status;
    th_response_free(&r);
    return status == 201 || status == 200 ? 0 : -1;
}

/* Well-formed UTF-8 without NUL (the test's own check, independent of the service's). */
static int utf8_ok(const char *s, size_t len)
{
    json_t *j = json_stringn(s, len);
    int ok = j != NULL;
    json_decref(j);
    return ok;
}

/* Sends len raw bytes of req and asserts a complete problem+json answer of this status and code,
 * with a UTF-8 JSON body. */
static void assert_raw_problem(const char *req, size_t reqlen, const char *status, const char *code)
{
    char answer[8192];
    size_t len = th_raw_exchange(th_svc.port, req, reqlen, answer, sizeof(answer), 5000);
    if (strncmp(answer, status, strlen(status)) != 0)
        fail_msg("expected %s, got: %.200s", status, answer);
    assert_non_null(strcasestr(answer, "Content-Type: application/problem+json"));
    const char *body = strstr(answer, "\r\n\r\n");
    assert_non_null(body);
    body += 4;
    size_t blen = len - (size_t)(body - answer);
    assert_int_equal(blen, (size_t)atol(strcasestr(answer, "Content-Length: ") + 16));
    assert_true(utf8_ok(body, blen));
    json_t *doc = json_loadb(body, blen, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "code")), code);
    json_decref(doc);
}

/* The access-log line of request id rid parses as JSON, with this status. */
static void assert_logged(const char *rid, long status)
{
    char needle[128], line[8192];
    snprintf(needle, sizeof(needle), "\"request_id\":\"%s\"", rid);
    double until = th_now() + 5;
    line[0] = '\0';
    while (th_now() < until && line[0] == '\0') {
        pthread_mutex_lock(&th_svc.proc->mu);
        const char *at = strstr(th_svc.proc->log_tail, needle);
        if (at != NULL) {
            const char *start = at;
            while (start > th_svc.proc->log_tail && start[-1] != '\n')
                start--;
            size_t n = strcspn(start, "\n");
            if (start[n] == '\n' && n < sizeof(line)) {
                memcpy(line, start, n);
                line[n] = '\0';
            }
        }
        pthread_mutex_unlock(&th_svc.proc->mu);
        if (line[0] == '\0')
            usleep(20 * 1000);
    }
    if (line[0] == '\0')
        fail_msg("no access line for %s", rid);
    assert_true(utf8_ok(line, strlen(line)));
    json_error_t err;
    json_t *doc = json_loads(line, 0, &err);
    if (doc == NULL)
        fail_msg("access line is not JSON (%s): %s", err.text, line);
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), status);
    json_decref(doc);
}

static void target_with_ff_byte(void **state)
{
    const char req[] = "GET /nope\xff HTTP/1.1\r\nHost: x\r\nX-Request-Id: u8-ff\r\n\r\n";
    assert_raw_problem(req, sizeof(req) - 1, "HTTP/1.1 404", "route_not_found");
    assert_logged("u8-ff", 404);
}

static void method_with_ff_byte(void **state)
{
    const char req[] = "G\xffT /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: u8-method\r\n\r\n";
    assert_raw_problem(req, sizeof(req) - 1, "HTTP/1.1 405", "method_not_allowed");
    assert_logged("u8-method", 405);
}

static void target_of_600_raw_e_acute(void **state)
{
    char req[4096];
    size_t n = (size_t)snprintf(req, sizeof(req), "GET /nop/");
    for (int i = 0; i < 600; i++, n += 2)
        memcpy(req + n, "\xc3\xa9", 2);
    n += (size_t)snprintf(req + n, sizeof(req) - n,
                          " HTTP/1.1\r\nHost: x\r\nX-Request-Id: u8-600\r\n\r\n");
    assert_raw_problem(req, n, "HTTP/1.1 404", "route_not_found");
    assert_logged("u8-600", 404);
}

static void unknown_member_of_100_e_acute(void **state)
{
    char body[512];
    size_t n = (size_t)snprintf(body, sizeof(body), "{\"");
    for (int i = 0; i < 100; i++, n += 2)
        memcpy(body + n, "\xc3\xa9", 2);
    n += (size_t)snprintf(body + n, sizeof(body) - n, "\":1}");
    const char *h[] = {"Content-Type: application/json", "X-Request-Id: u8-member", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "PUT", "/topics/t1", h, body, n, &r), 0);
    th_assert_problem(&r, 400, "invalid_config");
    assert_true(utf8_ok(r.body, r.len));
    th_response_free(&r);
    assert_logged("u8-member", 400);
}

static void head_key_of_510_encoded_e_acute(void **state)
{
    char path[8192];
    size_t n = (size_t)snprintf(path, sizeof(path), "/topics/t1/keys/");
    for (int i = 0; i < 510; i++)
        n += (size_t)snprintf(path + n, sizeof(path) - n, "%%C3%%A9");
    snprintf(path + n, sizeof(path) - n, "/head");
    const char *h[] = {"X-Request-Id: u8-head", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, h, NULL, 0, &r), 0);
    assert_true(r.status == 404);
    assert_non_null(r.json);
    assert_true(utf8_ok(r.body, r.len));
    th_response_free(&r);
    assert_logged("u8-head", 404);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(target_with_ff_byte),
        cmocka_unit_test(method_with_ff_byte),
        cmocka_unit_test(target_of_600_raw_e_acute),
        cmocka_unit_test(unknown_member_of_100_e_acute),
        cmocka_unit_test(head_key_of_510_encoded_e_acute),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
