/* The upkeep of queues (see queues.h): the janitor (an expiry sweep across all queues, and the
 * purge of the queues whose upkeep is due, rowlock.upkeep) and the gauges of /metrics.
 * Queues, jobs and the lease protocol are in db/queues.c and db/leases.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/lease_sql.h"
#include "db/queues_internal.h"
#include "db/tx.h"
#include "db/upkeep.h"

/* The gauges of the first $1 queues by name in one statement (ROWLOCK_METRICS_MAX_RESOURCES:
 * a scrape costs the same however many queues there are); when one queue's fail, each is read
 * alone instead. */
static const struct db_stmt st_all_stats = {
    "queues_all_stats",
    "SELECT q.id, q.name, s.* FROM (SELECT id, name FROM rowlock.queues ORDER BY name LIMIT $1) "
    "q, LATERAL (" QUEUE_STATS("q.id") ") s ORDER BY q.name",
    1};
static const struct db_stmt st_queue_ids = {
    "queue_ids", "SELECT id, name FROM rowlock.queues ORDER BY name LIMIT $1", 1};
/* Janitor, the expiry sweep across all queues: $1 batch. Jobs processing their last attempt
 * whose lease ran out become failed (lease_expired), found on the index jobs_lease_final (its
 * predicate is LEASE_SPENT's, db/lease_sql.h) in order of expiry: a pass reads only the expired
 * ones, whatever the number of queues. A job's body is locked with it, and skipped when another
 * transaction holds it (an operator's, a purge's): one stuck job stalls no other. A job whose
 * queue keeps no failed jobs is deleted instead. Rows: queue, expired, of which deleted. */
/* clang-format off */
static const struct db_stmt st_expire = {
    "queues_expire",
    "WITH dead AS (SELECT j.id, " QUEUE_RETENTION("q.", "failed") " = 0 AND " JOB_CHILDLESS
    " AS drop "
    "  FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "  JOIN rowlock.queues q ON q.id = j.queue_id "
    "  WHERE " LEASE_SPENT " AND " LEASE_DUE " ORDER BY j.claimable_at "
    "  LIMIT $1 FOR UPDATE OF j, b SKIP LOCKED), "
    "w AS (UPDATE rowlock.jobs j SET state = 'failed', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now(), "
    "  " ATTEMPT_END("lease_expired") " FROM dead "
    "  WHERE j.id = dead.id AND j.id = ANY (ARRAY(SELECT id FROM dead WHERE NOT drop)) "
    "  RETURNING j.id, j.queue_id), "
    "b AS (UPDATE rowlock.job_bodies b SET last_error = '{\"lease_expired\": true}' FROM w "
    "  WHERE b.job_id = w.id), "
    "gone AS (DELETE FROM rowlock.jobs j USING dead WHERE j.id = dead.id "
    "  AND j.id = ANY (ARRAY(SELECT id FROM dead WHERE drop)) "
    "  RETURNING " JOBS_GONE_RETURNING("'failed'") "), " JOBS_GONE("gone") " "
    "SELECT q.name, count(*), count(*) FILTER (WHERE x.deleted) FROM (SELECT queue_id, false "
    "  AS deleted FROM w UNION ALL SELECT queue_id, true FROM gone) x "
    "JOIN rowlock.queues q ON q.id = x.queue_id GROUP BY q.name",
    1};
/* Whether the finished job j is kept past its retention for a child that has not finished (a
 * child reads its parents' results while it runs; migration 22). A plain job stops at the first
 * operand. */
#define DEPS_HELD                                                                                  \
    "(j.children IS NOT NULL AND EXISTS (SELECT FROM rowlock.jobs c WHERE c.id = ANY "             \
    "(j.children) AND c.state IN ('waiting', 'pending', 'processing')))"
/* A finished job j (b its body) that was cancelled: in that state, or failed as builds before
 * migration 20 cancel (JOB_CANCELLED). */
#define ENDED_CANCELLED "(j.state = 'cancelled' OR " JOB_CANCELLED("b") ")"
/* The purge of one due queue: $1 queue id, $2 batch, $3, $4, $5 its succeeded, failed and
 * cancelled retentions. The expired jobs of each are ranges of jobs_finished_state (failed and
 * cancelled ones together, ENDED_CANCELLED telling them apart), oldest first, at most $2 of
 * each. Rows: purged, and whether a state's batch was full. */
static const struct db_stmt st_purge = {
    "queue_purge",
    "WITH ds AS (SELECT j.id, 'succeeded' AS final FROM rowlock.jobs j WHERE j.queue_id = $1 "
    "  AND j.state = 'succeeded' AND j.finished_at < now() - make_interval(secs => $3::float8) "
    "  AND NOT " DEPS_HELD " ORDER BY j.finished_at LIMIT $2 FOR UPDATE OF j SKIP LOCKED), "
    "df AS (SELECT j.id, CASE WHEN " ENDED_CANCELLED " THEN 'cancelled' ELSE 'failed' END "
    "  AS final FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "  WHERE j.queue_id = $1 AND j.state IN ('failed', 'cancelled') "
    "  AND j.finished_at < now() - make_interval(secs => least($4, $5)::float8) "
    "  AND j.finished_at < now() - make_interval(secs => (CASE WHEN " ENDED_CANCELLED
    " THEN $5 ELSE $4 END)::float8) AND NOT " DEPS_HELD " "
    "  ORDER BY j.finished_at LIMIT $2 FOR UPDATE OF j SKIP LOCKED), "
    "doomed AS (SELECT * FROM ds UNION ALL SELECT * FROM df), "
    "gone AS (DELETE FROM rowlock.jobs j USING doomed d WHERE j.id = d.id "
    "  AND j.id = ANY (ARRAY(SELECT id FROM doomed)) "
    "  RETURNING " JOBS_GONE_RETURNING("d.final") "), " JOBS_GONE("gone") " "
    "SELECT (SELECT count(*) FROM gone), "
    "  (SELECT count(*) FROM ds) >= $2 OR (SELECT count(*) FROM df) >= $2",
    5};
/* clang-format on */
/* The family's name in rowlock.upkeep. */
#define FAMILY "queues"

/* The claim of queues whose purge is due (db/upkeep.h): id, name, and the succeeded, failed and
 * cancelled retentions. */
static const struct db_stmt st_queues_due = {
    "queues_due",
    DB_UPKEEP_CLAIM_SQL(FAMILY, "queues",
                        QUEUE_RETENTION("r.", "succeeded") ", " QUEUE_RETENTION(
                            "r.", "failed") ", " QUEUE_RETENTION("r.", "cancelled")),
    2};
/* The shorter of two retentions that keep something ($a, $b: 0 when only one does). */
#define KEPT_LEAST(a, b)                                                                           \
    "least(coalesce(nullif(" a ", 0), " b "), coalesce(nullif(" b ", 0), " a "))"
/* When queue $1's purge is next due: at once ($2, a batch was full), else when its oldest
 * finished job of a state passes that state's retention ($3, $4, $5 as in st_purge), at most an
 * hour on (a job finishing from now on passes it no sooner than the retention from now). A
 * state kept 0 s has its jobs deleted as they end: only those that ended before are purged. */
/* clang-format off */
static const struct db_stmt st_queue_next_due = {
    "queue_next_due",
    DB_UPKEEP_SET_NEXT_SQL(
        FAMILY, "$1::bigint",
        "CASE WHEN $2::boolean THEN now() ELSE least("
        "  now() + make_interval(secs => least(coalesce(nullif("
        KEPT_LEAST(KEPT_LEAST("$3::integer", "$4::integer"), "$5::integer") ", 0), 3600), 3600)), "
        "  (SELECT min(finished_at) FROM rowlock.jobs WHERE queue_id = $1 AND state = 'succeeded' "
        "  AND finished_at IS NOT NULL AND children IS NULL) + make_interval(secs => $3::integer), "
        "  (SELECT min(finished_at) FROM rowlock.jobs WHERE queue_id = $1 "
        "  AND state IN ('failed', 'cancelled') "
        "  AND finished_at IS NOT NULL AND children IS NULL) + make_interval(secs => "
        KEPT_LEAST("$4::integer", "$5::integer") ")) END"),
    5};
/* clang-format on */
/* Dedupe windows that have passed, across all queues: $1 batch. */
static const struct db_stmt st_dedupe_expire = {
    "queues_dedupe_expire",
    "WITH old AS (SELECT queue_id, dedupe_key FROM rowlock.job_dedupe WHERE expires_at <= now() "
    "  ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED) "
    ", gone AS (DELETE FROM rowlock.job_dedupe d USING old "
    "  WHERE d.queue_id = old.queue_id AND d.dedupe_key = old.dedupe_key RETURNING 1) "
    "SELECT count(*) FROM gone",
    1};
/* Rate buckets of concurrency keys that are full by now (or whose key has no rate any more),
 * across all queues: $1 batch. A full bucket is what a key without one has, so deleting it
 * changes no claim; keys come and go, and their buckets with them. */
static const struct db_stmt st_buckets_full = {
    "queues_buckets_full",
    "WITH old AS (SELECT l.queue_id, l.key FROM rowlock.queue_limiter l "
    "  JOIN rowlock.queues q ON q.id = l.queue_id "
    "  LEFT JOIN rowlock.queue_keys k ON k.queue_id = l.queue_id AND k.key = l.key "
    "  WHERE l.key <> '' AND coalesce(CASE WHEN k.rate_limit IS NOT NULL THEN l.tokens + "
    "  k.rate_limit / k.rate_period_seconds * extract(epoch FROM now() - l.refilled_at) >= "
    "  coalesce(k.rate_burst, k.rate_limit) ELSE l.tokens + q.key_rate_limit / "
    "  q.key_rate_period_seconds * extract(epoch FROM now() - l.refilled_at) >= "
    "  coalesce(q.key_rate_burst, q.key_rate_limit) END, true) "
    "  LIMIT $1 FOR UPDATE OF l SKIP LOCKED) "
    ", gone AS (DELETE FROM rowlock.queue_limiter l USING old "
    "  WHERE l.queue_id = old.queue_id AND l.key = old.key RETURNING 1) "
    "SELECT count(*) FROM gone",
    1};
/* What slows every Postgres queue: dead tuples in its tables, and the oldest transaction that
 * holds back vacuum (its snapshot keeps dead tuples alive). */
static const struct db_stmt st_vacuum_health = {
    "queues_vacuum_health",
    "SELECT (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = "
    "'rowlock' AND relname IN ('jobs', 'job_bodies', 'job_attempts')), "
    "(SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0) FROM pg_stat_activity "
    "WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid())",
    0};
static const struct db_stmt st_queue_gauges = {"queue_gauges", QUEUE_STATS("$1"), 1};

struct janitor_queue {
    const char *id, *retention[3]; /* succeeded, failed, cancelled */
    int batch;
    int64_t purged;
};

static enum db_status janitor_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct janitor_queue *a = arg;
    char batch[DB_INT_TEXT];
    snprintf(batch, sizeof(batch), "%d", a->batch);
    const char *params[] = {a->id, batch, a->retention[0], a->retention[1], a->retention[2]};
    PGresult *r = NULL;
    a->purged = 0;
    enum db_status st = db_query(c, &st_purge, params, &r, err);
    if (st != DB_OK)
        return st;
    a->purged = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    const char *full = PQgetvalue(r, 0, 1)[0] == 't' ? "true" : "false";
    PQclear(r);
    const char *next[] = {a->id, full, a->retention[0], a->retention[1], a->retention[2]};
    return db_query(c, &st_queue_next_due, next, NULL, err);
}

/* Runs stmt ($1: batch) in a transaction of its own, again while a batch comes back full (at
 * most 10 times). done reads how many rows one run did from its result (arg: done's). */
static enum db_status sweep(struct db_pool *pool, const struct db_stmt *stmt, int batch,
                            int64_t (*done)(const PGresult *r, void *arg), void *arg,
                            struct db_error *err)
{
    char limit[DB_INT_TEXT];
    snprintf(limit, sizeof(limit), "%d", batch);
    const char *params[] = {limit};
    enum db_status st = DB_OK;
    int64_t n = batch;
    for (int round = 0; st == DB_OK && n >= batch && round < 10; round++) {
        struct db_queue_rows a = {stmt, params, NULL};
        st = db_tx_run(pool, DB_READ_COMMITTED, db_queue_rows_tx, &a, err);
        n = st == DB_OK ? done(a.rows, arg) : 0;
        PQclear(a.rows);
    }
    return st;
}

/* What the expiry sweep reports to. */
struct expiry {
    db_queue_janitor_each each;
    void *ctx;
};

/* st_expire's rows (queue, expired, of which deleted): reported per queue; their sum. */
static int64_t expired_rows(const PGresult *r, void *arg)
{
    struct expiry *x = arg;
    int64_t n = 0;
    for (int i = 0; i < PQntuples(r); i++) {
        int64_t expired = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        n += expired;
        db_jobs_deleted_add("failed", strtoull(PQgetvalue(r, i, 2), NULL, 10));
        struct db_queue_upkeep u = {.queue = PQgetvalue(r, i, 0), .expired = expired};
        if (x->each != NULL)
            x->each(&u, x->ctx);
    }
    return n;
}

/* A count in the first column of the first row. */
static int64_t counted(const PGresult *r, void *arg)
{
    (void)arg;
    return PQntuples(r) > 0 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
}

/* What a janitor pass reports to, and how much a purge does at most. */
struct queues_pass {
    int batch;
    db_queue_janitor_each each;
    void *ctx;
};

/* The purge of the queue of row i of st_queues_due's rows: a queue that fails is reported (and
 * due again at once); the others are still purged. */
static enum db_status queue_visit(struct db_pool *pool, const PGresult *rows, int i, void *arg)
{
    struct queues_pass *p = arg;
    struct janitor_queue a = {
        .id = PQgetvalue(rows, i, 0),
        .retention = {PQgetvalue(rows, i, 2), PQgetvalue(rows, i, 3), PQgetvalue(rows, i, 4)},
        .batch = p->batch};
    struct db_error err = {"", ""};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, janitor_queue_tx, &a, &err);
    struct db_queue_upkeep u = {.queue = PQgetvalue(rows, i, 1),
                                .purged = st == DB_OK ? a.purged : 0,
                                .visited = 1,
                                .failed = st == DB_OK ? NULL : &err};
    if (p->each != NULL)
        p->each(&u, p->ctx);
    return st;
}

const struct db_upkeep db_queues_upkeep = {
    .family = FAMILY, .claim = &st_queues_due, .visit = queue_visit};

enum db_status db_queues_janitor(struct db_pool *pool, int batch, db_queue_janitor_each each,
                                 void *ctx, struct db_error *err)
{
    /* the sweep failing (a timeout, say) does not hold back the purges, nor the reverse */
    struct db_error purge_err;
    struct queues_pass p = {.batch = batch, .each = each, .ctx = ctx};
    struct expiry x = {each, ctx};
    /* the expiry sweep across all queues, then the dedupe windows that have passed and the keys'
     * full rate buckets */
    enum db_status st = sweep(pool, &st_expire, batch, expired_rows, &x, err);
    if (st == DB_OK)
        st = sweep(pool, &st_dedupe_expire, batch, counted, NULL, err);
    if (st == DB_OK)
        st = sweep(pool, &st_buckets_full, batch, counted, NULL, err);
    enum db_status purge = db_upkeep_run(pool, &db_queues_upkeep, &p, &purge_err);
    if (st == DB_OK && purge != DB_OK) {
        *err = purge_err;
        st = purge;
    }
    return st;
}

/* The list of queues and the vacuum health, in one transaction. */
struct all_stats {
    PGresult *rows, *health;
    int all; /* rows are every queue's gauges (st_all_stats), not only the queue ids */
    int cut; /* st_all_stats ran out of the budget */
    char limit[DB_INT_TEXT];  /* $1: queues at most */
    char budget[DB_INT_TEXT]; /* statement_timeout of st_all_stats, ms; "" for the connection's own
                               */
};

static enum db_status all_stats_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct all_stats *a = arg;
    PQclear(a->rows);
    PQclear(a->health);
    a->rows = a->health = NULL;
    enum db_status st = db_query(c, &st_vacuum_health, NULL, &a->health, err);
    if (st != DB_OK)
        return st;
    st = db_metrics_budget(c, a->budget, err);
    if (st != DB_OK)
        return st;
    /* the one statement first; a failure there is not the caller's: the queues are read alone,
     * unless it ran out of its budget (they would take longer still) */
    struct db_error failed;
    const char *params[] = {a->limit};
    enum db_status all = db_query(c, &st_all_stats, params, &a->rows, &failed);
    a->all = all == DB_OK;
    a->cut = all == DB_ERR_TIMEOUT && a->budget[0] != '\0';
    if (a->all)
        return DB_OK;
    PQclear(a->rows);
    a->rows = NULL;
    if (a->cut)
        *err = failed;
    return DB_ABORTED;
}

/* After the one statement failed: the list of queues, in a fresh transaction. */
static enum db_status queue_ids_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct all_stats *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    const char *params[] = {a->limit};
    return db_query(c, &st_queue_ids, params, &a->rows, err);
}

enum db_status db_queues_stats(struct db_pool *pool, int limit, int budget_ms,
                               db_queue_stats_each each, void *ctx, int64_t *dead_tuples,
                               double *oldest_xact_age_seconds, struct db_error *err)
{
    struct all_stats a = {0};
    snprintf(a.limit, sizeof(a.limit), "%d", limit);
    if (budget_ms > 0)
        snprintf(a.budget, sizeof(a.budget), "%d", budget_ms);
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, all_stats_tx, &a, err);
    *dead_tuples = 0;
    *oldest_xact_age_seconds = 0;
    if ((st == DB_OK || st == DB_ABORTED) && a.health != NULL) {
        *dead_tuples = strtoll(PQgetvalue(a.health, 0, 0), NULL, 10);
        *oldest_xact_age_seconds = atof(PQgetvalue(a.health, 0, 1));
    }
    if (st == DB_OK && a.all) {
        for (int i = 0; i < PQntuples(a.rows); i++) {
            struct db_queue_stats s;
            db_queue_stats_from_row(a.rows, i, 2, &s);
            each(PQgetvalue(a.rows, i, 1), &s, NULL, ctx);
        }
        PQclear(a.rows);
        PQclear(a.health);
        return DB_OK;
    }
    if (st == DB_ABORTED && a.cut) {
        PQclear(a.health);
        return DB_ERR_TIMEOUT;
    }
    if (st == DB_ABORTED)
        st = db_tx_run(pool, DB_READ_COMMITTED, queue_ids_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        /* each queue is read on its own: one that cannot be read leaves the others alone */
        const char *params[] = {PQgetvalue(a.rows, i, 0)};
        struct db_queue_rows one = {&st_queue_gauges, params, NULL};
        struct db_error e = {"", ""};
        struct db_queue_stats s;
        int ok = db_tx_run(pool, DB_READ_COMMITTED, db_queue_rows_tx, &one, &e) == DB_OK &&
                 PQntuples(one.rows) == 1;
        if (ok)
            db_queue_stats_from_row(one.rows, 0, 0, &s);
        each(PQgetvalue(a.rows, i, 1), ok ? &s : NULL, ok ? NULL : &e, ctx);
        PQclear(one.rows);
    }
    PQclear(a.rows);
    PQclear(a.health);
    return st;
}
