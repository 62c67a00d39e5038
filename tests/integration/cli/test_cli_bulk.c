/* rowlock-cli retry and cancel with --all: every page of POST .../jobs:retry and jobs:cancel
 * until the service says none is left, printing the total. 11 jobs, 6 with key k1, go through
 * pages of 2 and 4: cancel --key k1 takes only those, cancel --all the rest, retry --all
 * --state cancelled all of them, each a page at a time. A state the action does not take exits
 * 2 with invalid_filter and changes nothing; --page out of range exits 2 before any request;
 * an unknown queue exits 3; without ID or --all, 2. */
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
    (void)state;
    return th_svc_start("clibulk", NULL);
}

/* Runs rowlock-cli with args; its standard output (and standard error after it) in out. */
static int cli(const char *args, char *out, size_t size)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "env ROWLOCK_URL=http://127.0.0.1:%d '%s' %s 2>&1", th_svc.port,
             ROWLOCK_CLI_BINARY, args);
    int rc = th_run(cmd, out, size);
    fprintf(stderr, "rowlock-cli %s -> %d: %s", args, rc, out);
    return rc;
}

static int64_t in_state(const char *state)
{
    return th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON q.id = "
                           "j.queue_id WHERE q.name = 'cq' AND j.state = '%s'",
                           state);
}

static void pages_until_done(void **state)
{
    (void)state;
    char out[4096];
    json_decref(th_svc_call("PUT", "/queues/cq", "{}", 201));
    for (int i = 0; i < 11; i++)
        json_decref(th_svc_call(
            "POST", "/queues/cq/jobs",
            i % 2 == 0 ? "{\"payload\":1,\"concurrency_key\":\"k1\"}" : "{\"payload\":1}", 201));
    assert_int_equal(cli("cancel cq --all --key k1 --page 2", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"cancelled\":6}\n");
    assert_int_equal(in_state("pending"), 5);
    assert_int_equal(cli("cancel cq --all --state pending --page 4", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"cancelled\":5}\n");
    assert_int_equal(in_state("cancelled"), 11);
    /* refused: nothing changes */
    assert_int_equal(cli("retry cq --all --state pending", out, sizeof(out)), 2);
    assert_non_null(strstr(out, "invalid_filter"));
    assert_int_equal(cli("retry cq --all --page 1001", out, sizeof(out)), 2);
    assert_int_equal(cli("retry nope --all", out, sizeof(out)), 3);
    assert_int_equal(cli("retry cq", out, sizeof(out)), 2);
    assert_int_equal(in_state("cancelled"), 11);
    assert_int_equal(cli("retry cq --all --state cancelled --page 4", out, sizeof(out)), 0);
    assert_string_equal(out, "{\"retried\":11}\n");
    assert_int_equal(in_state("pending"), 11);
    assert_int_equal(cli("retry --help", out, sizeof(out)), 0);
    assert_non_null(strstr(out, "rowlock-cli retry QUEUE --all [--state failed|cancelled]"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pages_until_done),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
