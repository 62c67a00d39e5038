/* The schema baseline at startup: an empty database gets it (with its version row), a second
 * start finds it current, and a database holding another version, or a rowlock schema without
 * a version row, makes startup fail with a message saying to recreate the database. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static void empty_database_gets_the_baseline_once(void **state)
{
    char url[1024];
    assert_int_equal(th_db_create("schema_ok", url, sizeof(url)), 0);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema baseline applied"));
    assert_int_equal(th_service_stop(&svc), 0);
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    assert_false(th_service_logged(&svc, "schema baseline applied"));
    assert_int_equal(th_service_stop(&svc), 0);
    PGconn *c = th_pg(url);
    PGresult *r = th_sql(c, "SELECT count(*), min(version) FROM rowlock.schema_version");
    assert_string_equal(PQgetvalue(r, 0, 0), "1");
    assert_true(atoi(PQgetvalue(r, 0, 1)) >= 1);
    PQclear(r);
    PQfinish(c);
}

static void other_version_is_refused(void **state)
{
    char url[1024];
    assert_int_equal(th_db_create("schema_old", url, sizeof(url)), 0);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_int_equal(th_service_stop(&svc), 0);
    PGconn *c = th_pg(url);
    PQclear(th_sql(c, "UPDATE rowlock.schema_version SET version = 9999"));
    PQfinish(c);
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "incompatible database schema"));
    assert_true(th_service_logged(&svc, "holds rowlock schema version 9999"));
    assert_true(th_service_logged(&svc, "recreate the database"));
}

static void partial_schema_is_refused(void **state)
{
    char url[1024];
    assert_int_equal(th_db_create("schema_partial", url, sizeof(url)), 0);
    PGconn *c = th_pg(url);
    PQclear(th_sql(c, "CREATE SCHEMA rowlock"));
    PQfinish(c);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "recreate the database"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_database_gets_the_baseline_once),
        cmocka_unit_test(other_version_is_refused),
        cmocka_unit_test(partial_schema_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
