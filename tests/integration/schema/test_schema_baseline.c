/* The schema baseline at startup: an empty database gets the baseline and every migration after
 * it, recorded once; a second start finds it current. A rowlock schema without a version row, or
 * a version from before migrations other than the released 6, is refused with a message saying
 * to recreate the database. The released baseline files never change. */
#include <glob.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "schema_fixture.h"

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
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.schema_version"), 1);
    tsf_assert_all_recorded(c);
    PQfinish(c);
}

static void unreleased_version_before_migrations_is_refused(void **state)
{
    char url[1024];
    assert_int_equal(tsf_create_released("schema_old", url, sizeof(url)), 0);
    PGconn *c = th_pg(url);
    PQclear(th_sql(c, "UPDATE rowlock.schema_version SET version = 5"));
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, url, NULL), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "incompatible database schema"));
    assert_true(th_service_logged(&svc, "holds rowlock schema version 5 from before migrations"));
    assert_true(th_service_logged(&svc, "recreate the database"));
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_tables WHERE tablename = 'migrations'"),
                     0);
    PQfinish(c);
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

/* The whole text of the files matching dir/0*.sql, in name order (free it). */
static char *read_sql_dir(const char *dir)
{
    static const char *const names[] = {"001_system.sql", "002_topics.sql", "003_queues.sql",
                                        "004_ledgers.sql"};
    char *all = calloc(1, 1);
    size_t len = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[1024], buf[4096];
        snprintf(path, sizeof(path), "%s/%s/%s", ROWLOCK_SOURCE_DIR, dir, names[i]);
        FILE *f = fopen(path, "rb");
        if (f == NULL)
            fail_msg("cannot open %s", path);
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
            all = realloc(all, len + n + 1);
            memcpy(all + len, buf, n);
            len += n;
            all[len] = '\0';
        }
        fclose(f);
    }
    return all;
}

/* A released schema is never edited (databases record its checksum): the baseline still equals
 * the frozen copy of the release it came from, and db/schema holds no other baseline file. */
static void released_baseline_is_unchanged(void **state)
{
    char *now = read_sql_dir("db/schema");
    char *released = read_sql_dir("db/schema/released/6");
    if (strcmp(now, released) != 0)
        fail_msg("db/schema/0*.sql differ from db/schema/released/6: a released schema must "
                 "not change; put the change in a new file of db/schema/migrations");
    free(now);
    free(released);
    char pattern[1024];
    snprintf(pattern, sizeof(pattern), "%s/db/schema/*.sql", ROWLOCK_SOURCE_DIR);
    glob_t g;
    assert_int_equal(glob(pattern, 0, NULL, &g), 0);
    if (g.gl_pathc != 4)
        fail_msg("db/schema holds %zu baseline files, the release 4: a change to the released "
                 "schema belongs in db/schema/migrations",
                 (size_t)g.gl_pathc);
    globfree(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_database_gets_the_baseline_once),
        cmocka_unit_test(unreleased_version_before_migrations_is_refused),
        cmocka_unit_test(partial_schema_is_refused),
        cmocka_unit_test(released_baseline_is_unchanged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
