/* Problems a running rowlock answers before any handler runs: unknown route (404), wrong method
 * (405 with Allow), bad percent-encoding (400), request target too long (414), headers too large
 * (431). Each is application/problem+json with its code, and the connection stays usable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static struct th_service svc;

static int setup(void **state)
{
    char url[1024];
    const char *env[] = {"ROWLOCK_URL_LIMIT=1024", "ROWLOCK_HEADER_LIMIT=4096", NULL};
    if (th_db_create("routing", url, sizeof(url)) != 0)
        return -1;
    return th_service_start(&svc, url, env);
}

static int teardown(void **state)
{
    return th_service_stop(&svc) == 0 ? 0 : -1;
}

static void unknown_route_is_404(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/no/such/route", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "route_not_found");
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "type")),
                           "urn:rowlock:problem:route_not_found"));
    th_response_free(&r);
    /* a trailing slash is another path */
    assert_int_equal(th_http(svc.port, "GET", "/healthz/", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "route_not_found");
    th_response_free(&r);
}

static void wrong_method_is_405_with_allow(void **state)
{
    struct th_response r;
    char allow[64];
    assert_int_equal(th_http(svc.port, "DELETE", "/metrics", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 405, "method_not_allowed");
    assert_int_equal(th_header(&r, "Allow", allow, sizeof(allow)), 0);
    assert_string_equal(allow, "GET");
    th_response_free(&r);
}

static void bad_percent_encoding_is_400(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/healthz?x=%zz", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "bad_request");
    th_response_free(&r);
    assert_int_equal(th_http(svc.port, "GET", "/healthz?x=%00", NULL, NULL, 0, &r), 0);
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
    assert_int_equal(th_http(svc.port, "GET", path, NULL, NULL, 0, &r), 0);
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
    assert_int_equal(th_http(svc.port, "GET", "/healthz", headers, NULL, 0, &r), 0);
    th_assert_problem(&r, 431, "headers_too_large");
    th_response_free(&r);
}

static void service_still_answers_after_errors(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
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
        cmocka_unit_test(service_still_answers_after_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
