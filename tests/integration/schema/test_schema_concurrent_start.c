/* Two processes started at the same moment (both spawned before either is awaited) on an empty
 * database, and on one of the release before migrations: exactly one applies the baseline or the
 * migrations, the other waits for the schema lock and then finds the schema current, both serve,
 * and neither logs an error. Without the schema lock both would apply (CREATE SCHEMA or CREATE
 * TABLE of the second fails, or migrations are recorded twice). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "schema_fixture.h"

#define ROUNDS 3

/* Starts two processes on url at once; asserts that exactly one logged applied (and the other
 * "schema current"), that both answer /readyz 200, and that neither logged an error. */
static void start_two(const char *url, const char *applied)
{
    struct th_service a, b;
    assert_int_equal(th_service_spawn(&a, url, NULL), 0);
    assert_int_equal(th_service_spawn(&b, url, NULL), 0);
    int ra = th_service_await(&a), rb = th_service_await(&b);
    if (ra == 0 && rb != 0)
        th_service_stop(&a);
    if (rb == 0 && ra != 0)
        th_service_stop(&b);
    if (ra != 0 || rb != 0)
        fail_msg("a process did not start: %s / %s", ra ? a.proc->log_tail : "ok",
                 rb ? b.proc->log_tail : "ok");
    int applied_a = th_service_logged(&a, applied), applied_b = th_service_logged(&b, applied);
    if (applied_a + applied_b != 1)
        fail_msg("%d processes logged \"%s\"", applied_a + applied_b, applied);
    assert_true(th_service_logged(applied_a ? &b : &a, "schema current"));
    json_t *ra_json = th_get_json(a.port, "/readyz"), *rb_json = th_get_json(b.port, "/readyz");
    json_decref(ra_json);
    json_decref(rb_json);
    assert_false(th_service_logged(&a, "\"level\":\"error\""));
    assert_false(th_service_logged(&b, "\"level\":\"error\""));
    assert_int_equal(th_service_stop(&a), 0);
    assert_int_equal(th_service_stop(&b), 0);
}

static void two_processes_on_an_empty_database(void **state)
{
    for (int i = 0; i < ROUNDS; i++) {
        char url[1024];
        assert_int_equal(th_db_create("race_empty", url, sizeof(url)), 0);
        start_two(url, "schema baseline applied");
        PGconn *c = th_pg(url);
        tsf_assert_all_recorded(c);
        PQfinish(c);
    }
}

static void two_processes_on_a_database_of_the_release_before(void **state)
{
    for (int i = 0; i < ROUNDS; i++) {
        char url[1024];
        assert_int_equal(tsf_create_released("race_old", url, sizeof(url)), 0);
        start_two(url, "schema migrated");
        PGconn *c = th_pg(url);
        tsf_assert_all_recorded(c);
        PQfinish(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_processes_on_an_empty_database),
        cmocka_unit_test(two_processes_on_a_database_of_the_release_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
