/* Problems a running rowlock answers before any handler runs: unknown route (404), wrong method
 * (405 with Allow), bad percent-encoding (400), request target too long (414), headers too large
 * (431), a repeated query parameter (400 invalid_parameter), ambiguous framing (two different
 * Content-Length headers, Content-Length with Transfer-Encoding) and HTTP/1.1 without Host (400).
 * Each is application/problem+json with its code, and the service goes on answering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_URL_LIMIT=1024", "ROWLOCK_HEADER_LIMIT=4096", NULL};
    return th_svc_start("routing", env);
}

static void unknown_route_is_404(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/no/such/route", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "route_not_found");
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "type")),
                           "urn:rowlock:problem:route_not_found"));
    th_response_free(&r);
    /* a trailing slash is another path */
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz/", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "route_not_found");
    th_response_free(&r);
}

static void wrong_method_is_405_with_allow(void **state)
{
    struct th_response r;
    char allow[64];
    assert_int_equal(th_http(th_svc.port, "DELETE", "/metrics", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 405, "method_not_allowed");
    assert_int_equal(th_header(&r, "Allow", allow, sizeof(allow)), 0);
    assert_string_equal(allow, "GET");
    th_response_free(&r);
}

static void bad_percent_encoding_is_400(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz?x=%zz", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "bad_request");
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz?x=%00", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "bad_request");
    th_response_free(&r);
}

static void long_target_is_414(void **state)
{
    char path[4096] = "/healthz?pad=";
    size_t n = strlen(path);
    memset(path + n, 'a', 2000);
    path[n + 2000] = '\0';
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 414, "uri_too_long");
    th_response_free(&r);
}

static void large_headers_are_431(void **state)
{
    static char big[6000];
    strcpy(big, "X-Padding: ");
    memset(big + strlen(big), 'b', 5000);
    const char *headers[] = {big, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", headers, NULL, 0, &r), 0);
    th_assert_problem(&r, 431, "headers_too_large");
    th_response_free(&r);
}

static void repeated_query_parameter_is_invalid_parameter(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/topics?limit=1&limit=2", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "invalid_parameter");
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "detail")), "limit"));
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/topics?limit=1&limit=1", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "invalid_parameter");
    th_response_free(&r);
}

/* Sends req; the answer (status line, headers, body) read until the body is whole, the peer
 * closes, or 5 s pass without data. */
static void raw_exchange(const char *req, char *buf, size_t size)
{
    th_raw_exchange(th_svc.port, req, strlen(req), buf, size, 5000);
}

static void assert_raw_bad_request(const char *req, const char *detail_part)
{
    char buf[8192];
    raw_exchange(req, buf, sizeof(buf));
    if (strncmp(buf, "HTTP/1.1 400", 12) != 0 || strstr(buf, "application/problem+json") == NULL ||
        strstr(buf, "\"code\":\"bad_request\"") == NULL || strstr(buf, detail_part) == NULL)
        fail_msg("expected a bad_request problem about %s, got: %s", detail_part, buf);
}

static void ambiguous_framing_is_400(void **state)
{
    assert_raw_bad_request("POST /topics/t/messages HTTP/1.1\r\nHost: x\r\n"
                           "Content-Type: application/json\r\nContent-Length: 2\r\n"
                           "Content-Length: 3\r\n\r\n{}",
                           "Content-Length headers with different values");
    assert_raw_bad_request("POST /topics/t/messages HTTP/1.1\r\nHost: x\r\n"
                           "Content-Type: application/json\r\nContent-Length: 2\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
                           "both Content-Length and Transfer-Encoding");
    assert_raw_bad_request("GET /healthz HTTP/1.1\r\n\r\n", "Host");
    /* the same value twice is one length, and HTTP/1.0 needs no Host */
    char buf[8192];
    raw_exchange("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                 "Content-Length: 0\r\n\r\n",
                 buf, sizeof(buf));
    assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
    raw_exchange("GET /healthz HTTP/1.0\r\n\r\n", buf, sizeof(buf));
    assert_int_equal(strncmp(buf, "HTTP/1.1 200", 12), 0);
}

static void service_still_answers_after_errors(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unknown_route_is_404),
        cmocka_unit_test(wrong_method_is_405_with_allow),
        cmocka_unit_test(bad_percent_encoding_is_400),
        cmocka_unit_test(long_target_is_414),
        cmocka_unit_test(large_headers_are_431),
        cmocka_unit_test(repeated_query_parameter_is_invalid_parameter),
        cmocka_unit_test(ambiguous_framing_is_400),
        cmocka_unit_test(service_still_answers_after_errors),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
