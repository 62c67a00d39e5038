/* Applying and checking the schema baseline (see schema.h). Concurrent rowlock processes starting
 * on an empty database serialize on a transaction-scoped advisory lock taken only here, at
 * startup; the data paths never use advisory locks. */
#include "db/schema.h"

#include <stdio.h>
#include <stdlib.h>

#include "db/tx.h"

extern const char db_schema_sql[];

struct schema_apply {
    enum db_schema_verdict verdict;
    int found;
};

static const struct db_stmt stmt_lock = {"schema_lock",
                                         "SELECT pg_advisory_xact_lock(7255186934271200)", 0};
static const struct db_stmt stmt_inspect = {
    "schema_inspect",
    "SELECT to_regclass('rowlock.schema_version') IS NOT NULL,"
    "       EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'rowlock')",
    0};
static const struct db_stmt stmt_version = {"schema_version",
                                            "SELECT version FROM rowlock.schema_version", 0};
static const struct db_stmt stmt_record = {
    "schema_record", "INSERT INTO rowlock.schema_version (version) VALUES ($1::integer)", 1};

static enum db_status schema_apply_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct schema_apply *a = arg;
    PGresult *res = NULL;
    a->found = 0;
    enum db_status st = db_query(c, &stmt_lock, NULL, NULL, err);
    if (st == DB_OK)
        st = db_query(c, &stmt_inspect, NULL, &res, err);
    if (st != DB_OK)
        return st;
    int has_table = PQgetvalue(res, 0, 0)[0] == 't';
    int has_schema = PQgetvalue(res, 0, 1)[0] == 't';
    PQclear(res);
    if (has_table) {
        st = db_query(c, &stmt_version, NULL, &res, err);
        if (st != DB_OK)
            return st;
        a->found = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
        PQclear(res);
        a->verdict = a->found == DB_SCHEMA_VERSION ? DB_SCHEMA_CURRENT : DB_SCHEMA_INCOMPATIBLE;
        return DB_OK;
    }
    if (has_schema) {
        a->verdict = DB_SCHEMA_INCOMPATIBLE;
        return DB_OK;
    }
    st = db_exec(c, db_schema_sql, err);
    if (st != DB_OK)
        return st;
    char version[16];
    snprintf(version, sizeof(version), "%d", DB_SCHEMA_VERSION);
    const char *params[] = {version};
    a->verdict = DB_SCHEMA_CREATED;
    return db_query(c, &stmt_record, params, NULL, err);
}

enum db_status db_schema_apply(struct db_pool *pool, enum db_schema_verdict *verdict, int *found,
                               struct db_error *err)
{
    struct schema_apply a = {DB_SCHEMA_INCOMPATIBLE, 0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, schema_apply_tx, &a, err);
    *verdict = a.verdict;
    *found = a.found;
    return st;
}

struct schema_read {
    int version;
};

static enum db_status schema_version_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct schema_read *r = arg;
    PGresult *res = NULL;
    r->version = 0;
    enum db_status st = db_query(c, &stmt_version, NULL, &res, err);
    if (st != DB_OK)
        return st;
    r->version = PQntuples(res) == 1 ? atoi(PQgetvalue(res, 0, 0)) : 0;
    PQclear(res);
    return DB_OK;
}

enum db_status db_schema_version(struct db_pool *pool, int *version, struct db_error *err)
{
    struct schema_read r = {0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, schema_version_tx, &r, err);
    *version = r.version;
    return st;
}

/* The readiness probe: the version row, read in a transaction that writes a WAL record (a
 * transactional logical message, which touches no table), so that its COMMIT waits as every
 * write does (for a synchronous standby, say; a transaction id alone would commit without
 * waiting). BEGIN, the read and COMMIT go out in one round trip. */
static const struct db_stmt stmt_ready = {"schema_ready",
                                          "SELECT (SELECT version FROM rowlock.schema_version), "
                                          "pg_logical_emit_message(true, 'rowlock_ready', '')",
                                          0};

static enum db_status schema_ready_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct schema_read *r = arg;
    PGresult *res = NULL;
    r->version = 0;
    db_tx_commit_with_next(c);
    enum db_status st = db_query(c, &stmt_ready, NULL, &res, err);
    if (st != DB_OK)
        return st;
    r->version = PQgetisnull(res, 0, 0) ? 0 : atoi(PQgetvalue(res, 0, 0));
    PQclear(res);
    return DB_OK;
}

enum db_status db_schema_ready(struct db_pool *pool, int *version, struct db_error *err)
{
    struct schema_read r = {0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, schema_ready_tx, &r, err);
    *version = r.version;
    return st;
}
