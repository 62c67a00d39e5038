/* The operations endpoints of a running rowlock: /healthz, /readyz, /metrics, /openapi.json
 * (the embedded copy of openapi/openapi.json), request ids accepted or generated and echoed,
 * and one JSON access-log line per request. */
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
    return th_svc_start("ops", NULL);
}

static void healthz_answers_ok(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "ok");
    th_response_free(&r);
}

static void readyz_reports_schema_version(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/readyz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "status")), "ready");
    assert_true(json_integer_value(json_object_get(r.json, "schema_version")) >= 1);
    th_response_free(&r);
}

static void openapi_is_the_document_in_the_tree(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/openapi.json", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *file = json_load_file(ROWLOCK_SOURCE_DIR "/openapi/openapi.json", 0, NULL);
    assert_non_null(file);
    assert_non_null(r.json);
    assert_true(json_equal(file, r.json));
    json_decref(file);
    th_response_free(&r);
}

static void request_id_is_echoed_or_generated(void **state)
{
    struct th_response r;
    char id[256];
    const char *mine[] = {"X-Request-Id: trace-abc.123", NULL};
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", mine, NULL, 0, &r), 0);
    assert_int_equal(th_header(&r, "X-Request-Id", id, sizeof(id)), 0);
    assert_string_equal(id, "trace-abc.123");
    th_response_free(&r);

    /* none sent, or one that is unsafe to log: a fresh one is generated */
    const char *bad[] = {"X-Request-Id: has\"quote", NULL};
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", bad, NULL, 0, &r), 0);
    assert_int_equal(th_header(&r, "X-Request-Id", id, sizeof(id)), 0);
    assert_int_equal(strlen(id), 32);
    th_response_free(&r);
    char other[256];
    assert_int_equal(th_http(th_svc.port, "GET", "/nowhere", NULL, NULL, 0, &r), 0);
    assert_int_equal(th_header(&r, "X-Request-Id", other, sizeof(other)), 0);
    assert_string_not_equal(id, other);
    /* problems carry it too */
    assert_string_equal(json_string_value(json_object_get(r.json, "request_id")), other);
    th_response_free(&r);
}

static void access_log_has_one_line_per_request(void **state)
{
    struct th_response r;
    const char *mine[] = {"X-Request-Id: access-log-probe-1", NULL};
    assert_int_equal(th_http(th_svc.port, "GET", "/readyz", mine, NULL, 0, &r), 0);
    th_response_free(&r);
    /* the line is written at completion, just after the response */
    for (int i = 0; i < 200 && !th_service_logged(&th_svc, "access-log-probe-1"); i++)
        usleep(10000);
    assert_true(th_service_logged(&th_svc,
                                  "\"request_id\":\"access-log-probe-1\",\"method\":\"GET\","
                                  "\"route\":\"/readyz\",\"path\":\"/readyz\","
                                  "\"status\":200"));
}

static void metrics_count_requests_by_route(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    char ct[128];
    assert_int_equal(th_header(&r, "Content-Type", ct, sizeof(ct)), 0);
    assert_non_null(strstr(ct, "text/plain"));
    assert_non_null(strstr(r.body,
                           "rowlock_http_requests_total{route=\"/healthz\",method=\"GET\",status="
                           "\"200\"}"));
    assert_non_null(strstr(r.body, "rowlock_http_request_duration_seconds_bucket{route="
                                   "\"/healthz\",method=\"GET\",le=\"+Inf\"}"));
    assert_non_null(strstr(r.body, "rowlock_db_pool_size "));
    assert_non_null(strstr(r.body, "rowlock_db_pool_in_use "));
    assert_non_null(strstr(r.body, "rowlock_db_pool_acquire_waits_total "));
    assert_non_null(strstr(r.body, "rowlock_db_pool_acquire_timeouts_total "));
    assert_non_null(strstr(r.body, "rowlock_build_info{version="));
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(healthz_answers_ok),
        cmocka_unit_test(readyz_reports_schema_version),
        cmocka_unit_test(openapi_is_the_document_in_the_tree),
        cmocka_unit_test(request_id_is_echoed_or_generated),
        cmocka_unit_test(access_log_has_one_line_per_request),
        cmocka_unit_test(metrics_count_requests_by_route),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
