/* What a build is, said the same way everywhere: `rowlock --version` prints the release version,
 * the git commit and the schema version; /readyz answers the same under "build", and /metrics
 * labels rowlock_build_info with them. /metrics also carries the standard process metrics
 * (process_cpu_seconds_total, ...) with values that describe the running process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "db/schema.h"
#include "harness_svc.h"

static char version[64], commit[64];
static int schema;

static int setup(void **state)
{
    return th_svc_start("version", NULL);
}

/* "rowlock 0.1.0 (commit 1a2b3c4, schema version 7)": no database, no configuration needed
 * (a database URL that cannot work proves it is not touched). */
static void version_flag_prints_build(void **state)
{
    char cmd[1024], out[512];
    snprintf(cmd, sizeof(cmd),
             "env ROWLOCK_DATABASE_URL=postgresql://nobody@0.0.0.0:1/x '%s' --version",
             ROWLOCK_BINARY);
    assert_int_equal(th_run(cmd, out, sizeof(out)), 0);
    char tail[8];
    assert_int_equal(sscanf(out, "rowlock %63s (commit %63[^,], schema version %d%7s", version,
                            commit, &schema, tail),
                     4);
    assert_string_equal(tail, ")");
    assert_string_equal(version, ROWLOCK_VERSION);
    assert_int_equal(schema, DB_SCHEMA_VERSION);
    /* a short hash from git, or "unknown" outside a checkout */
    assert_true(strcmp(commit, "unknown") == 0 ||
                (strlen(commit) >= 7 && strspn(commit, "0123456789abcdef") == strlen(commit)));
}

static void readyz_names_the_build(void **state)
{
    json_t *r = th_svc_get("/readyz");
    json_t *build = json_object_get(r, "build");
    assert_string_equal(json_string_value(json_object_get(r, "status")), "ready");
    assert_int_equal(json_integer_value(json_object_get(r, "schema_version")), DB_SCHEMA_VERSION);
    assert_string_equal(json_string_value(json_object_get(build, "version")), version);
    assert_string_equal(json_string_value(json_object_get(build, "commit")), commit);
    assert_int_equal(json_integer_value(json_object_get(build, "schema_version")), schema);
    json_decref(r);
}

static void metrics_label_the_build_and_the_process(void **state)
{
    char series[256];
    snprintf(series, sizeof(series),
             "rowlock_build_info{version=\"%s\",commit=\"%s\",schema_version=\"%d\"}", version,
             commit, schema);
    assert_true(th_metric(th_svc.port, series) == 1);
    double open = th_metric(th_svc.port, "process_open_fds");
    double max = th_metric(th_svc.port, "process_max_fds");
    double rss = th_metric(th_svc.port, "process_resident_memory_bytes");
    double vsz = th_metric(th_svc.port, "process_virtual_memory_bytes");
    double cpu = th_metric(th_svc.port, "process_cpu_seconds_total");
    double start = th_metric(th_svc.port, "process_start_time_seconds");
    double now = (double)time(NULL);
    /* listening socket, log pipe, pool connections...: more than stdin/out/err */
    assert_true(open > 3 && max >= open);
    assert_true(rss > 1024 * 1024 && vsz >= rss);
    assert_true(cpu >= 0 && cpu < 600);
    /* started by this test program, seconds ago (whole seconds; the clock tick rounds down) */
    assert_true(start <= now && start > now - 600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version_flag_prints_build),
        cmocka_unit_test(readyz_names_the_build),
        cmocka_unit_test(metrics_label_the_build_and_the_process),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
