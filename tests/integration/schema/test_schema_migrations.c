/* Schema migrations at startup, one defence per test: an applied migration whose checksum
 * differs from the build's is refused; a build older than the database's schema refuses naming
 * both versions, unless the database declares it still serves that build; --migrate=check
 * refuses pending migrations and changes nothing, --migrate-only applies them and exits 0; a
 * migration missing between applied ones is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/schema.h"
#include "harness.h"
#include "schema_fixture.h"

/* A database migrated by this build, the service stopped again. */
static PGconn *migrated_database(const char *name, char *url, size_t size)
{
    assert_int_equal(th_db_create(name, url, size), 0);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_int_equal(th_service_stop(&svc), 0);
    return th_pg(url);
}

static void changed_checksum_is_refused(void **state)
{
    char url[1024];
    PGconn *c = migrated_database("mig_checksum", url, sizeof(url));
    PQclear(th_sql(c, "UPDATE rowlock.migrations SET checksum = repeat('0', 64) "
                      "WHERE number = 7"));
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "an applied schema migration has changed"));
    assert_true(th_service_logged(&svc, "migration 7 (migrations) was applied with checksum "
                                        "0000000000000000 but this build's"));
    PQfinish(c);
}

static void older_build_than_the_schema_is_refused(void **state)
{
    char url[1024];
    PGconn *c = migrated_database("mig_newer", url, sizeof(url));
    char sql[256];
    snprintf(sql, sizeof(sql),
             "INSERT INTO rowlock.migrations (number, name, checksum, applied_by, serves_from) "
             "VALUES (%d, 'future', repeat('a', 64), 'rowlock 9.9.9', %d)",
             DB_SCHEMA_VERSION + 1, DB_SCHEMA_VERSION + 1);
    PQclear(th_sql(c, sql));
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "database schema is newer than this build"));
    char both[160];
    snprintf(both, sizeof(both),
             "holds rowlock schema version %d, which serves builds of schema version %d and "
             "later; this build has schema version %d",
             DB_SCHEMA_VERSION + 1, DB_SCHEMA_VERSION + 1, DB_SCHEMA_VERSION);
    assert_true(th_service_logged(&svc, both));
    /* the same newer migration, declared compatible (an expand step): this build serves it */
    snprintf(sql, sizeof(sql), "UPDATE rowlock.migrations SET serves_from = %d WHERE number = %d",
             DB_SCHEMA_VERSION, DB_SCHEMA_VERSION + 1);
    PQclear(th_sql(c, sql));
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "newer than this build and declares it serves it"));
    json_t *ready = th_get_json(svc.port, "/readyz");
    assert_int_equal(json_integer_value(json_object_get(ready, "schema_version")),
                     DB_SCHEMA_VERSION + 1);
    json_decref(ready);
    /* the database stops serving this build while it runs: /readyz says so */
    snprintf(sql, sizeof(sql), "UPDATE rowlock.migrations SET serves_from = %d WHERE number = %d",
             DB_SCHEMA_VERSION + 1, DB_SCHEMA_VERSION + 1);
    PQclear(th_sql(c, sql));
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/readyz", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 503, "schema_not_ready");
    th_response_free(&r);
    assert_int_equal(th_service_stop(&svc), 0);
    PQfinish(c);
}

static void check_mode_refuses_pending_and_migrate_only_applies(void **state)
{
    static const char *const check[] = {"ROWLOCK_MIGRATE=check", NULL};
    static const char *const only[] = {"ROWLOCK_MIGRATE_ONLY=true", NULL};
    char url[1024];
    assert_int_equal(th_db_create("mig_check", url, sizeof(url)), 0);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, check), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "schema migrations pending"));
    assert_true(th_service_logged(&svc, "--migrate=check applies no migrations"));
    PGconn *c = th_pg(url);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_namespace WHERE nspname = 'rowlock'"), 0);
    /* a database of the release before migrations: pending too, and left as it was */
    char old[1024];
    assert_int_equal(tsf_create_released("mig_check_old", old, sizeof(old)), 0);
    assert_int_equal(th_service_start(&svc, old, check), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "schema migrations pending"));
    PGconn *o = th_pg(old);
    assert_int_equal(tsf_int(o, "SELECT count(*) FROM pg_tables WHERE tablename = 'migrations'"),
                     0);
    /* --migrate-only applies and exits 0 without listening; then check mode starts */
    assert_int_equal(th_service_start(&svc, old, only), -1);
    assert_int_equal(svc.exit_code, 0);
    assert_true(th_service_logged(&svc, "schema migrations done; exiting (--migrate-only)"));
    tsf_assert_all_recorded(o);
    assert_int_equal(th_service_start(&svc, old, check), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    assert_int_equal(th_service_stop(&svc), 0);
    PQfinish(o);
    PQfinish(c);
}

static void skipped_migration_is_refused(void **state)
{
    char url[1024];
    PGconn *c = migrated_database("mig_skipped", url, sizeof(url));
    PQclear(th_sql(c, "DELETE FROM rowlock.migrations WHERE number = 6"));
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "records migration 7 (migrations) but not migration 6"));
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(changed_checksum_is_refused),
        cmocka_unit_test(older_build_than_the_schema_is_refused),
        cmocka_unit_test(check_mode_refuses_pending_and_migrate_only_applies),
        cmocka_unit_test(skipped_migration_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
