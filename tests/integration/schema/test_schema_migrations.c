/* Schema migrations at startup, one defence per test: an applied migration whose checksum
 * differs from the build's is refused; a build older than the database's schema refuses naming
 * both versions, unless the database declares it still serves that build; --migrate=check
 * refuses pending migrations and changes nothing, --migrate-only applies them and exits 0; a
 * migration missing between applied ones is refused; a migration recorded before its comments
 * were reworded keeps the checksum it was first recorded with, never taken for another's; the
 * upkeep rows of a filled database of schema 12 move to rowlock.upkeep with their due times. */
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

/* Migration 10 as first applied (db/schema.c, reworded[]): its comments changed since. */
static const char migration_10_applied[] =
    "b227e061c6daad105bd26bbcedae0aa63d6153378801641910bc77f8dee6d9e7";

static void reworded_migration_keeps_its_first_checksum(void **state)
{
    char url[1024], sql[256];
    PGconn *c = migrated_database("mig_reworded", url, sizeof(url));
    /* recorded as first applied, so that older builds, which compare checksums exactly, accept
     * a database this build made */
    PGresult *r = th_sql(c, "SELECT checksum FROM rowlock.migrations WHERE number = 10");
    assert_string_equal(PQgetvalue(r, 0, 0), migration_10_applied);
    PQclear(r);
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    assert_int_equal(th_service_stop(&svc), 0);
    /* the same checksum recorded for another migration is that migration changed */
    snprintf(sql, sizeof(sql),
             "UPDATE rowlock.migrations SET checksum = (SELECT checksum FROM rowlock.migrations "
             "WHERE number = 9) WHERE number = 10; UPDATE rowlock.migrations SET checksum = '%s' "
             "WHERE number = 11",
             migration_10_applied);
    PQclear(th_sql(c, sql));
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_true(
        th_service_logged(&svc, "migration 10 (resource_upkeep) was applied with checksum"));
    PQfinish(c);
}

/* A database of schema 12 with a topic, a ledger and a queue, each due at its own time in the
 * per-family tables: after the upgrade each has its row in rowlock.upkeep, due when it was. */
static void upkeep_rows_move_to_one_table(void **state)
{
    char url[1024];
    assert_int_equal(tsf_create_released("mig_upkeep", url, sizeof(url)), 0);
    PGconn *c = th_pg(url);
    tsf_migrate_to(c, 12);
    PQclear(th_sql(c, "INSERT INTO rowlock.topics (name, headless_ttl_seconds, "
                      "default_schema_version) VALUES ('t', 60, 1)"));
    PQclear(
        th_sql(c, "WITH l AS (INSERT INTO rowlock.ledgers (name, tombstone_retention_seconds) "
                  "VALUES ('l', 60) RETURNING id) SELECT rowlock.ledger_create_tables(id) FROM l"));
    PQclear(th_sql(c, "INSERT INTO rowlock.queues (name, max_attempts, lease_seconds, "
                      "backoff_base_seconds, backoff_max_seconds, retention_seconds) "
                      "VALUES ('q', 5, 30, 1, 60, 3600)"));
    PQclear(th_sql(c, "UPDATE rowlock.topic_upkeep SET due_at = now() + interval '1 day'; "
                      "UPDATE rowlock.ledger_upkeep SET due_at = now() + interval '2 days'; "
                      "UPDATE rowlock.queue_upkeep SET due_at = now() + interval '3 days'"));
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema migrated"));
    assert_int_equal(th_service_stop(&svc), 0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.upkeep"), 3);
    assert_int_equal(
        tsf_int(c, "SELECT count(*) FROM rowlock.upkeep u JOIN rowlock.topics t ON t.id = "
                   "u.resource_id JOIN rowlock.topic_upkeep o ON o.topic_id = t.id WHERE "
                   "u.family = 'topics' AND t.name = 't' AND u.due_at = o.due_at"),
        1);
    assert_int_equal(
        tsf_int(c, "SELECT count(*) FROM rowlock.upkeep u JOIN rowlock.ledgers l ON l.id = "
                   "u.resource_id JOIN rowlock.ledger_upkeep o ON o.ledger_id = l.id WHERE "
                   "u.family = 'ledgers' AND l.name = 'l' AND u.due_at = o.due_at"),
        1);
    assert_int_equal(
        tsf_int(c, "SELECT count(*) FROM rowlock.upkeep u JOIN rowlock.queues q ON q.id = "
                   "u.resource_id JOIN rowlock.queue_upkeep o ON o.queue_id = q.id WHERE "
                   "u.family = 'queues' AND q.name = 'q' AND u.due_at = o.due_at"),
        1);
    tsf_assert_all_recorded(c);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(changed_checksum_is_refused),
        cmocka_unit_test(older_build_than_the_schema_is_refused),
        cmocka_unit_test(check_mode_refuses_pending_and_migrate_only_applies),
        cmocka_unit_test(skipped_migration_is_refused),
        cmocka_unit_test(reworded_migration_keeps_its_first_checksum),
        cmocka_unit_test(upkeep_rows_move_to_one_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
