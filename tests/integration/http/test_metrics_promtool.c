/* /metrics of a running rowlock, after traffic on several routes and statuses, passes
 * `promtool check metrics` (ROWLOCK_TEST_PROMTOOL, from Debian's prometheus package) and holds
 * every family the operations contract names. */
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
    return th_svc_start("promtool", NULL);
}

static void metrics_pass_promtool(void **state)
{
    const char *promtool = getenv("ROWLOCK_TEST_PROMTOOL");
    if (promtool == NULL || promtool[0] == '\0')
        fail_msg("ROWLOCK_TEST_PROMTOOL is not set: run the suite with deploy/local.sh test");
    const char *paths[] = {"/healthz", "/readyz", "/nowhere", "/openapi.json", "/healthz?%zz"};
    struct th_response r;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(th_http(th_svc.port, "GET", paths[i], NULL, NULL, 0, &r), 0);
        th_response_free(&r);
    }
    assert_int_equal(th_http(th_svc.port, "POST", "/metrics", NULL, NULL, 0, &r), 0);
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);

    const char *families[] = {"rowlock_http_requests_total",
                              "rowlock_http_request_duration_seconds",
                              "rowlock_db_pool_size",
                              "rowlock_db_pool_in_use",
                              "rowlock_db_pool_acquire_waits_total",
                              "rowlock_db_pool_acquire_timeouts_total",
                              "rowlock_db_transactions_total",
                              "rowlock_build_info",
                              "rowlock_http_connection_limit",
                              "rowlock_http_requests_in_flight",
                              "process_cpu_seconds_total",
                              "process_resident_memory_bytes",
                              "process_virtual_memory_bytes",
                              "process_open_fds",
                              "process_max_fds",
                              "process_start_time_seconds",
                              NULL};
    for (size_t i = 0; families[i]; i++) {
        char type[160];
        snprintf(type, sizeof(type), "# TYPE %s ", families[i]);
        if (strstr(r.body, type) == NULL)
            fail_msg("/metrics lacks the family %s", families[i]);
    }

    char path[] = "/tmp/rowlock-metrics-XXXXXX";
    int fd = mkstemp(path);
    assert_int_equal(write(fd, r.body, r.len), (ssize_t)r.len);
    close(fd);
    th_response_free(&r);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' check metrics < '%s' 2>&1", promtool, path);
    char out[8192];
    int status = th_run(cmd, out, sizeof(out));
    unlink(path);
    if (status != 0 || out[0] != '\0')
        fail_msg("promtool check metrics failed:\n%s", out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(metrics_pass_promtool),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
