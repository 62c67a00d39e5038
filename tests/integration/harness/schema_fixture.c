/* Fixtures of the schema tests (see schema_fixture.h). */
#include "schema_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db/schema.h"
#include "harness.h"

static const char *const released_files[] = {"001_system.sql", "002_topics.sql", "003_queues.sql",
                                             "004_ledgers.sql"};

/* Appends the file's text to sql (realloc'd). 0 or -1. */
static int append_file(char **sql, size_t *len, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "cannot open %s\n", path);
        return -1;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        char *grown = realloc(*sql, *len + n + 1);
        assert_non_null(grown);
        memcpy(grown + *len, buf, n);
        *len += n;
        grown[*len] = '\0';
        *sql = grown;
    }
    fclose(f);
    return 0;
}

int tsf_create_released(const char *name, char *url, size_t urlsize)
{
    if (th_db_create(name, url, urlsize) != 0)
        return -1;
    char *sql = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof(released_files) / sizeof(released_files[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/db/schema/released/6/%s", ROWLOCK_SOURCE_DIR,
                 released_files[i]);
        if (append_file(&sql, &len, path) != 0) {
            free(sql);
            return -1;
        }
    }
    PGconn *c = th_pg(url);
    PQclear(th_sql(c, "BEGIN"));
    PQclear(th_sql(c, sql));
    PQclear(th_sql(c, "INSERT INTO rowlock.schema_version (version) VALUES (6)"));
    PQclear(th_sql(c, "COMMIT"));
    PQfinish(c);
    free(sql);
    return 0;
}

long tsf_int(PGconn *c, const char *sql)
{
    PGresult *r = th_sql(c, sql);
    assert_true(PQntuples(r) >= 1);
    long v = PQgetisnull(r, 0, 0) ? -1 : atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

void tsf_assert_all_recorded(PGconn *c)
{
    PGresult *r = th_sql(c, "SELECT number, name, length(checksum), applied_by, serves_from "
                            "FROM rowlock.migrations ORDER BY number");
    int n = PQntuples(r);
    if (n != DB_SCHEMA_VERSION - DB_SCHEMA_BASELINE + 1)
        fail_msg("rowlock.migrations holds %d rows; migrations %d to %d are %d", n,
                 DB_SCHEMA_BASELINE, DB_SCHEMA_VERSION, DB_SCHEMA_VERSION - DB_SCHEMA_BASELINE + 1);
    for (int i = 0; i < n; i++) {
        if (atoi(PQgetvalue(r, i, 0)) != DB_SCHEMA_BASELINE + i)
            fail_msg("row %d of rowlock.migrations is migration %s, expected %d", i,
                     PQgetvalue(r, i, 0), DB_SCHEMA_BASELINE + i);
        assert_string_equal(PQgetvalue(r, i, 2), "64");
        assert_non_null(strstr(PQgetvalue(r, i, 3), "rowlock "));
        assert_true(PQgetvalue(r, i, 1)[0] != '\0');
    }
    PQclear(r);
    /* the version row holds what the database serves: 6 while every migration only adds */
    assert_int_equal(tsf_int(c, "SELECT version FROM rowlock.schema_version"),
                     tsf_int(c, "SELECT max(serves_from) FROM rowlock.migrations"));
}

/* Records migration number (sql's checksum computed by the server) as a build would. */
/* Records migration number as this build would (its serves_from and checksum: a build of an
 * older schema recorded the same, db_schema_migration_record). */
static void record(PGconn *c, int number, const char *name)
{
    char num[16], serves[16], sum[65];
    int serves_from = 0;
    assert_true(db_schema_migration_record(number, &serves_from, sum));
    snprintf(num, sizeof(num), "%d", number);
    snprintf(serves, sizeof(serves), "%d", serves_from);
    const char *params[] = {num, name, sum, serves};
    PGresult *r = PQexecParams(
        c,
        "INSERT INTO rowlock.migrations (number, name, checksum, applied_by, serves_from) "
        "VALUES ($1::integer, $2, $3, "
        "'rowlock test fixture (a build of an older schema version)', $4::integer)",
        4, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("recording migration %d: %s", number, PQresultErrorMessage(r));
    PQclear(r);
    /* the version row holds what the database serves (db/schema.c) */
    r = PQexecParams(c, "UPDATE rowlock.schema_version SET version = $1::integer", 1, NULL,
                     params + 3, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("recording migration %d: %s", number, PQresultErrorMessage(r));
    PQclear(r);
}

void tsf_migrate_to(PGconn *c, int last)
{
    assert_true(last > DB_SCHEMA_BASELINE && last <= DB_SCHEMA_VERSION);
    for (int i = 0; i < last - DB_SCHEMA_BASELINE; i++) {
        const struct db_migration_file *m = &db_migration_files[i];
        PQclear(th_sql(c, "BEGIN"));
        PQclear(th_sql(c, m->sql));
        if (m->number == 7)
            record(c, DB_SCHEMA_BASELINE, "baseline");
        record(c, m->number, m->name);
        PQclear(th_sql(c, "COMMIT"));
    }
}

const char *tsf_prev_binary(void)
{
    const char *p = getenv("ROWLOCK_TEST_PREV_BINARY");
    if (p != NULL && p[0] != '\0' && access(p, X_OK) == 0)
        return p;
    fprintf(stderr,
            "ROWLOCK_TEST_PREV_BINARY is not set to the previous release's binary (\"%s\"): "
            "deploy/local.sh test builds it into build-prev/ from the commit in "
            "db/schema/released/6/RELEASE\n",
            p ? p : "");
    return NULL;
}
