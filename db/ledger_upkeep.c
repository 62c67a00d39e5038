/* The upkeep of ledgers and the reads over many of them (see ledgers.h): the janitor's tombstone
 * purge below a recorded horizon, the gauges of /metrics (each ledger in a transaction of its own
 * when one fails) and the paged list with counts. The ingestion workflows and the reads of one
 * ledger are in ledgers.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/resource_tables.h"
#include "db/ledgers.h"
#include "db/ledgers_internal.h"
#include "db/tx.h"
#include "db/upkeep.h"

/* The family's name in rowlock.upkeep. */
#define FAMILY "ledgers"

/* The claim of due ledgers (db/upkeep.h): id, name, tombstone retention. */
static const struct db_stmt st_ledgers_due = {
    "ledgers_due", DB_UPKEEP_CLAIM_SQL(FAMILY, "ledgers", "r.tombstone_retention_seconds"), 2};
/* When ledger $1's upkeep is next due: at once ($2, a batch was full), else after its tombstone
 * retention $3 (at most an hour): a checkpoint applied from now on carries tombstones that may go
 * once it is older than that, which this bounds how late. */
static const struct db_stmt st_ledger_next_due = {
    "ledger_next_due",
    DB_UPKEEP_SET_NEXT_SQL(FAMILY, "$1::bigint",
                           "CASE WHEN $2::boolean THEN now() ELSE now() + "
                           "make_interval(secs => least($3::integer, 3600)) END"),
    3};
static const struct db_stmt st_ledger_ids = {
    "ledger_ids",
    "SELECT id, name, tombstone_retention_seconds FROM rowlock.ledgers ORDER BY name LIMIT $1", 1};
static const struct db_stmt st_ledger_horizon = {
    "ledger_horizon",
    "UPDATE rowlock.ledgers SET horizon = $2 WHERE id = $1 AND horizon < $2 RETURNING horizon", 2};
static const struct db_stmt st_ledger_gauges = {
    "ledger_gauges", "SELECT name, watermark, tombstones FROM rowlock.ledgers_gauges($1)", 1};

/* A page of ledgers by name after $1, each with its counts (rowlock.ledger_counts runs for the
 * page's ledgers only: the page is cut before the lateral call). */
/* clang-format off */
static const struct db_stmt st_ledger_page = {
    "ledger_page",
    "SELECT l.id, l.name, l.tombstone_retention_seconds, l.horizon, " DB_TS("l.created_at") ", "
    "c.objects, c.tombstones, c.transactions, c.events, c.checkpoints, c.watermark "
    "FROM (SELECT * FROM rowlock.ledgers WHERE name > coalesce($1, '') ORDER BY name LIMIT $2) l "
    "CROSS JOIN LATERAL rowlock.ledger_counts(l.id) c ORDER BY l.name",
    2};
/* clang-format on */

/* Transactions executed optimistically that no checkpoint has carried yet: a count over the
 * transactions table, as rowlock.ledger_counts makes for the executed ones. No index serves it:
 * one on checkpoint would make every checkpoint's status update non-HOT. */
static const char sql_pending[] = "SELECT count(*) FROM {t} WHERE executed AND checkpoint IS NULL";

/* Horizon candidate: the newest checkpoint older than the retention and within the watermark. */
static const char sql_horizon[] =
    "SELECT coalesce(max(sequence), 0) FROM {c} WHERE applied_at < now() - make_interval(secs => "
    "$1::float8) AND sequence <= rowlock.ledger_watermark($2)";
/* One ledger's gauges, for when the all-ledgers query fails: $1 the ledger's id. */
static const char sql_gauge_one[] =
    "SELECT rowlock.ledger_watermark($1), (SELECT count(*) FROM {o} WHERE deleted)";
static const char sql_purge[] =
    "DELETE FROM {o} WHERE object_id IN (SELECT object_id FROM {o} WHERE deleted "
    "AND checkpoint <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)";

struct janitor_ledger {
    int64_t id;
    const char *retention;
    int batch;
    int64_t horizon, purged;
};

static enum db_status janitor_ledger_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct janitor_ledger *a = arg;
    char id[DB_INT_TEXT], batch[DB_INT_TEXT], h[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->id);
    snprintf(batch, sizeof(batch), "%d", a->batch);
    const char *hp[] = {a->retention, id};
    PGresult *r = NULL;
    a->purged = 0;
    enum db_status st = db_ledger_query(c, a->id, "horizon", sql_horizon, 2, hp, &r, err);
    if (st != DB_OK)
        return st;
    db_copy(h, sizeof(h), PQgetvalue(r, 0, 0));
    PQclear(r);
    /* record the horizon first: from here on, checkpoints at or below it are refused */
    const char *up[] = {id, h};
    st = db_query(c, &st_ledger_horizon, up, &r, err);
    if (st != DB_OK)
        return st;
    PQclear(r);
    a->horizon = strtoll(h, NULL, 10);
    const char *pp[] = {h, batch};
    st = db_ledger_query(c, a->id, "purge", sql_purge, 2, pp, &r, err);
    if (st != DB_OK)
        return st;
    a->purged = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    const char *dp[] = {id, a->purged >= a->batch ? "true" : "false", a->retention};
    return db_query(c, &st_ledger_next_due, dp, NULL, err);
}

/* A list of every ledger (st: st_ledger_ids or st_ledger_gauges). */
struct ledger_list {
    const struct db_stmt *st;
    PGresult *rows;
    char limit[DB_INT_TEXT];  /* $1: ledgers at most */
    char budget[DB_INT_TEXT]; /* statement_timeout of st, ms; "" for the connection's own */
};

static enum db_status list_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct ledger_list *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    enum db_status st = db_metrics_budget(c, a->budget, err);
    if (st != DB_OK)
        return st;
    const char *params[] = {a->limit};
    return db_query(c, a->st, params, &a->rows, err);
}

/* Runs fn for one ledger in a transaction of its own; a failure always comes with a message. */
static enum db_status run_one(struct db_pool *pool, db_workflow_fn fn, void *arg,
                              struct db_error *err)
{
    memset(err, 0, sizeof(*err));
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, fn, arg, err);
    if (st != DB_OK && err->message[0] == '\0')
        db_error_set(err, "", "%s", db_status_name(st));
    return st;
}

/* What a janitor pass reports to, and how much a visit does at most. */
struct ledgers_pass {
    int batch;
    db_ledger_janitor_each each;
    void *ctx;
};

/* The upkeep of the ledger of row i of st_ledgers_due's rows: its failure (its data, a timeout)
 * is its own, the others are still cleaned. */
static enum db_status ledger_visit(struct db_pool *pool, const PGresult *rows, int i, void *arg)
{
    struct ledgers_pass *p = arg;
    struct janitor_ledger a = {.id = strtoll(PQgetvalue(rows, i, 0), NULL, 10),
                               .retention = PQgetvalue(rows, i, 2),
                               .batch = p->batch};
    struct db_error err;
    enum db_status st = run_one(pool, janitor_ledger_tx, &a, &err);
    if (p->each != NULL)
        p->each(PQgetvalue(rows, i, 1), a.horizon, a.purged, st == DB_OK ? NULL : &err, p->ctx);
    return st;
}

const struct db_upkeep db_ledgers_upkeep = {
    .family = FAMILY, .claim = &st_ledgers_due, .visit = ledger_visit};

enum db_status db_ledgers_janitor(struct db_pool *pool, int batch, db_ledger_janitor_each each,
                                  void *ctx, struct db_error *err)
{
    struct ledgers_pass p = {.batch = batch, .each = each, .ctx = ctx};
    return db_upkeep_run(pool, &db_ledgers_upkeep, &p, err);
}

struct gauge_one {
    int64_t id;
    PGresult *row;
};

static enum db_status gauge_one_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct gauge_one *a = arg;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->id);
    const char *params[] = {id};
    PQclear(a->row);
    a->row = NULL;
    return db_ledger_query(c, a->id, "gauge", sql_gauge_one, 1, params, &a->row, err);
}

/* The gauges of each ledger in a transaction of its own. */
static enum db_status gauges_each(struct db_pool *pool, const char *limit,
                                  db_ledger_gauge_each each, void *ctx, struct db_error *err)
{
    struct ledger_list ids = {&st_ledger_ids, NULL, {0}, {0}};
    snprintf(ids.limit, sizeof(ids.limit), "%s", limit);
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_tx, &ids, err);
    for (int i = 0; st == DB_OK && i < PQntuples(ids.rows); i++) {
        struct gauge_one a = {strtoll(PQgetvalue(ids.rows, i, 0), NULL, 10), NULL};
        struct db_error one_err;
        enum db_status one = run_one(pool, gauge_one_tx, &a, &one_err);
        if (one == DB_OK)
            each(PQgetvalue(ids.rows, i, 1), strtoll(PQgetvalue(a.row, 0, 0), NULL, 10),
                 strtoll(PQgetvalue(a.row, 0, 1), NULL, 10), NULL, ctx);
        else
            each(PQgetvalue(ids.rows, i, 1), 0, 0, &one_err, ctx);
        PQclear(a.row);
    }
    PQclear(ids.rows);
    return st;
}

enum db_status db_ledgers_gauges(struct db_pool *pool, int limit, int budget_ms,
                                 db_ledger_gauge_each each, void *ctx, struct db_error *err)
{
    struct ledger_list a = {&st_ledger_gauges, NULL, {0}, {0}};
    snprintf(a.limit, sizeof(a.limit), "%d", limit);
    if (budget_ms > 0)
        snprintf(a.budget, sizeof(a.budget), "%d", budget_ms);
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_tx, &a, err);
    if (st == DB_ERR_TIMEOUT && budget_ms > 0) { /* cut off: one at a time would take longer */
        PQclear(a.rows);
        return st;
    }
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++)
        each(PQgetvalue(a.rows, i, 0), strtoll(PQgetvalue(a.rows, i, 1), NULL, 10),
             strtoll(PQgetvalue(a.rows, i, 2), NULL, 10), NULL, ctx);
    PQclear(a.rows);
    /* a ledger's own data failed the query (or made it too slow): one ledger at a time */
    if (st == DB_ERR_HARD || st == DB_ERR_TIMEOUT)
        st = gauges_each(pool, a.limit, each, ctx, err);
    return st;
}

enum db_status db_ledger_pending(struct db_conn *c, int64_t ledger, int64_t *pending,
                                 struct db_error *err)
{
    PGresult *r = NULL;
    enum db_status st = db_ledger_query(c, ledger, "pending", sql_pending, 0, NULL, &r, err);
    *pending = st == DB_OK ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    return st;
}

struct ledger_page {
    const char *after;
    char limit[DB_INT_TEXT];
    PGresult *rows;
    int64_t *pending; /* one per row */
};

static enum db_status page_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct ledger_page *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    free(a->pending);
    a->pending = NULL;
    const char *params[] = {a->after, a->limit};
    enum db_status st = db_query(c, &st_ledger_page, params, &a->rows, err);
    int n = st == DB_OK ? PQntuples(a->rows) : 0;
    if (st == DB_OK && (a->pending = calloc((size_t)n + 1, sizeof(*a->pending))) == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    for (int i = 0; st == DB_OK && i < n; i++)
        st =
            db_ledger_pending(c, strtoll(PQgetvalue(a->rows, i, 0), NULL, 10), &a->pending[i], err);
    return st;
}

enum db_status db_ledgers_list(struct db_pool *pool, const char *after, int limit,
                               db_ledger_each each, void *ctx, struct db_error *err)
{
    struct ledger_page a = {after, {0}, NULL, NULL};
    snprintf(a.limit, sizeof(a.limit), "%d", limit);
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, page_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_ledger l = {.id = strtoll(PQgetvalue(a.rows, i, 0), NULL, 10)};
        db_copy(l.name, sizeof(l.name), PQgetvalue(a.rows, i, 1));
        l.tombstone_retention_seconds = strtoll(PQgetvalue(a.rows, i, 2), NULL, 10);
        l.horizon = strtoll(PQgetvalue(a.rows, i, 3), NULL, 10);
        db_copy(l.created_at, sizeof(l.created_at), PQgetvalue(a.rows, i, 4));
        struct db_ledger_counts k = {.pending = a.pending[i]};
        int64_t *v[] = {&k.objects, &k.tombstones,  &k.transactions,
                        &k.events,  &k.checkpoints, &k.watermark};
        for (int j = 0; j < 6; j++)
            *v[j] = strtoll(PQgetvalue(a.rows, i, 5 + j), NULL, 10);
        each(&l, &k, ctx);
    }
    PQclear(a.rows);
    free(a.pending);
    return st;
}
