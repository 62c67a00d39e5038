/* What db/queues.c (queues, jobs), db/queue_upkeep.c (janitor, gauges) and db/leases.c (the
 * lease protocol) share; nothing outside those files includes it. */
#ifndef DB_QUEUES_INTERNAL_H
#define DB_QUEUES_INTERNAL_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "db/queues.h"
#include "db/sql.h"

/* Maps PostgreSQL refusing a value (class 22: bad timestamp, bad JSON) to bad input. */
static inline enum db_status bad_input(enum db_status st, const struct db_error *err,
                                       enum db_queue_verdict *verdict)
{
    if (st == DB_ERR_HARD && strncmp(err->sqlstate, "22", 2) == 0) {
        *verdict = DB_Q_BAD_INPUT;
        return DB_ABORTED;
    }
    return st;
}

static inline enum db_status finish(enum db_status st)
{
    return st == DB_ABORTED ? DB_OK : st;
}

/* A processing job (j is rowlock.jobs), written as jobs_leased's predicate (migration 17), which
 * names claimable_at (never NULL for a processing job) so that a statement that only says
 * state = 'processing', as every fenced write does, cannot turn to a scan of the whole index. */
#define JOBS_LEASED "j.state = 'processing' AND j.claimable_at IS NOT NULL"

/* A queue's counts by state, oldest due pending age, dedupe keys held by a window, when it was
 * paused and its cancelled jobs (qid: SQL of the queue's id), as db_queue_stats_from_row reads
 * them: a SELECT of one row. Each state is counted on the partial index that holds it
 * (migration 17): the pending jobs' count and the oldest one due on jobs_pending (a pending
 * job's claimable_at is its run_at), the processing ones on jobs_leased, the finished ones on
 * jobs_listed. */
#define QUEUE_JOBS_WHERE(qid, where)                                                               \
    "(SELECT count(*) FROM rowlock.jobs j WHERE j.queue_id = " qid " AND " where ")"
#define QUEUE_JOBS_IN(qid, state) QUEUE_JOBS_WHERE(qid, "j.state = '" state "'")
/* Due jobs a claim of the queue left because of a limit (what: concurrency, key_concurrency,
 * rate or key_rate), since the queue was created. */
#define QUEUE_HELD(qid, what)                                                                      \
    "coalesce((SELECT l.held_" what " FROM rowlock.queue_limiter l WHERE l.queue_id = " qid        \
    " AND l.key = ''), 0)"
/* clang-format off */
#define QUEUE_STATS(qid) \
    "SELECT p.n, " QUEUE_JOBS_WHERE(qid, JOBS_LEASED) ", " QUEUE_JOBS_IN(qid, "succeeded") ", " \
    QUEUE_JOBS_IN(qid, "failed") ", p.oldest, (SELECT count(*) FROM rowlock.job_dedupe d " \
    "WHERE d.queue_id = " qid " AND d.expires_at > now()), (SELECT coalesce(extract(epoch FROM " \
    "pq.paused_at), 0) FROM rowlock.queues pq WHERE pq.id = " qid "), " \
    QUEUE_JOBS_IN(qid, "cancelled") ", " QUEUE_HELD(qid, "concurrency") ", " \
    QUEUE_HELD(qid, "key_concurrency") ", " QUEUE_HELD(qid, "rate") ", " \
    QUEUE_HELD(qid, "key_rate") ", " QUEUE_JOBS_IN(qid, "waiting") " " \
    "FROM (SELECT count(*) AS n, coalesce(extract(epoch FROM now() - min(j.claimable_at) " \
    "FILTER (WHERE j.claimable_at <= now())), 0) AS oldest FROM rowlock.jobs j " \
    "WHERE j.queue_id = " qid " AND j.state = 'pending') p"
/* clang-format on */
void db_queue_stats_from_row(const PGresult *r, int row, int col, struct db_queue_stats *s);

/* A queue that hands out jobs: not paused (rowlock.queues; q: its alias and a dot, or ""). A
 * claim reads its queue's row with it, and a paused queue's claims lock and take nothing. */
#define QUEUE_RUNNING(q) q "paused_at IS NULL"

/* A queue's limits (q: rowlock.queues' alias and a dot, or ""), as db_queue_limits_from_row
 * reads them: its own (4 columns), then every key's (4): 0 for each not set. */
#define QUEUE_LIMITS(q)                                                                            \
    "coalesce(" q "concurrency_limit, 0), coalesce(" q "rate_limit, 0), coalesce(" q               \
    "rate_period_seconds, 0), coalesce(" q "rate_burst, 0), coalesce(" q                           \
    "key_concurrency_limit, 0), coalesce(" q "key_rate_limit, 0), coalesce(" q                     \
    "key_rate_period_seconds, 0), coalesce(" q "key_rate_burst, 0)"
void db_queue_limits_from_row(const PGresult *r, int row, int col, struct db_queue_limits *l);
void db_queue_limits_params(const struct db_queue_limits *l, char text[4][32], const char **p);

/* A queue with a concurrency or rate limit, of its own or of its keys (rowlock.queues; q: its
 * alias and a dot): its claims run one after another (db/leases.c, the limited claim). */
#define QUEUE_LIMITED(q)                                                                           \
    "(" q "concurrency_limit IS NOT NULL OR " q "key_concurrency_limit IS NOT NULL OR " q          \
    "rate_limit IS NOT NULL OR " q "key_rate_limit IS NOT NULL OR EXISTS (SELECT FROM "            \
    "rowlock.queue_keys qk WHERE qk.queue_id = " q "id))"

/* How long a queue (rowlock.queues; q: its alias and a dot, or "") keeps its jobs that end in
 * state (succeeded, failed or cancelled), in seconds: its own setting for the state, else
 * retention_seconds. 0: not kept. */
#define QUEUE_RETENTION(q, state) "coalesce(" q state "_retention_seconds, " q "retention_seconds)"
/* A failed job cancelled the way builds before migration 20 cancel (b is its job_bodies row):
 * with last_error {"cancelled": true}. Kept and purged as a cancelled one. */
#define JOB_CANCELLED(b) "(" b ".last_error = '{\"cancelled\": true}'::jsonb)"
/* What goes with jobs deleted by the CTE gone (returning id, queue_id, dedupe_key and final,
 * the state they ended in): their attempt history, and in the dedupe window that names one of
 * them, how it ended (its body goes by the trigger job_bodies_gone, migration 16). Two CTEs,
 * gone_history and gone_window. */
#define JOBS_GONE(gone)                                                                            \
    "gone_history AS (DELETE FROM rowlock.job_attempts a USING " gone " WHERE a.job_id = " gone    \
    ".id), gone_window AS (UPDATE rowlock.job_dedupe d SET final_state = " gone                    \
    ".final FROM " gone " WHERE " gone ".dedupe_key IS NOT NULL AND d.queue_id = " gone            \
    ".queue_id AND "                                                                               \
    "d.dedupe_key = " gone ".dedupe_key AND d.job_id = " gone ".id)"
/* The deleted jobs' RETURNING list for JOBS_GONE (j is rowlock.jobs; final: SQL of the state). */
#define JOBS_GONE_RETURNING(final) "j.id, j.queue_id, j.dedupe_key, " final "::text AS final"

/* A job j without children (migration 22): the statements that end a job delete it only when it
 * has none, as its queue keeps no job of that end; one with children is kept, so that its
 * children read its result, and is settled as it ends (rowlock.deps_settle_edges). */
#define JOB_CHILDLESS "j.children IS NULL"

/* Every job of queue qid, as two ranges of the partial indexes that together hold them all
 * (jobs_listed and jobs_leased, migration 17; no index covers a queue's jobs whatever their
 * state): the cols (of rowlock.jobs j) of each, tail (more of the WHERE clause) applied to each.
 * Not for FOR UPDATE: a job whose state changes while the lock waits is re-checked against the
 * branch it was found in, and dropped from it. */
#define QUEUE_JOBS(cols, qid, tail)                                                                \
    "SELECT * FROM (SELECT " cols " FROM rowlock.jobs j WHERE j.queue_id = " qid                   \
    " AND j.state <> 'processing'" tail ") jl UNION ALL SELECT * FROM (SELECT " cols               \
    " FROM rowlock.jobs j WHERE j.queue_id = " qid " AND " JOBS_LEASED tail ") jp"

/* Counts jobs deleted as they ended (retention 0), per final state: db/leases.c, db/queues.c and
 * db/queue_upkeep.c add what their statements deleted. */
void db_jobs_deleted_add(const char *final_state, unsigned long long n);

/* One statement's rows in a transaction of its own (db_tx_run's fn; arg a struct db_queue_rows,
 * whose rows the caller PQclears). */
struct db_queue_rows {
    const struct db_stmt *stmt;
    const char *const *params;
    PGresult *rows;
};
enum db_status db_queue_rows_tx(struct db_conn *c, void *arg, struct db_error *err);

/* Resolves the queue by name in the caller's transaction; *found 0 when there is none. */
enum db_status db_queue_resolve_in(struct db_conn *c, const char *name, struct db_queue *q,
                                   int *found, struct db_error *err);
/* A queue workflow's statement with the queue's lookup by name, in the caller's transaction.
 * params[qid_param] is the queue's id, filled here. When this process has seen the queue's id
 * (a hint, db/hints.h), the lookup and stmt go in one round trip (with BEGIN, and COMMIT when
 * commit is set); else the lookup goes first. stmt must change nothing for a queue id no queue
 * has (every queue statement here filters its rows by queue id, and a queue's jobs go with it),
 * since that is what a stale hint runs it on: the workflow then answers DB_ERR_REDO, and runs
 * again without it. *found 0 (and *out NULL): no such queue. */
enum db_status db_queue_stmt_in(struct db_conn *c, const char *name, const struct db_stmt *stmt,
                                const char **params, int qid_param, int commit, struct db_queue *q,
                                int *found, PGresult **out, struct db_error *err);
/* The same for n statements in one round trip (at most DB_QUEUE_CALLS_MAX), each with the
 * queue's id as its params[qid_param]; on DB_ERR_REDO or no such queue every *out is NULL. */
#define DB_QUEUE_CALLS_MAX 3
struct db_queue_call {
    const struct db_stmt *stmt;
    const char **params;
    int qid_param;
    PGresult **out;
};
enum db_status db_queue_stmts_in(struct db_conn *c, const char *name,
                                 const struct db_queue_call *calls, size_t n, int commit,
                                 struct db_queue *q, int *found, struct db_error *err);
/* A batch's column arrays as db_arrays_build makes them (free with db_arrays_free);
 * DB_ERR_HARD when out of memory. */
enum db_status db_queue_arrays(struct db_arrays *arr, const void *items, size_t n, size_t ncols,
                               db_column_fn get, struct db_error *err);

/* Runs a statement on one job of a queue ($1 job id, $2 queue id, then extra params). */
struct job_op {
    const char *queue;
    const struct db_stmt *stmt;
    int64_t id;
    const char *extra[4];
    /* NULL, or more of the transaction once the statement ran on a queue found (rows set; its
     * COMMIT then goes on its own): DB_ABORTED rolls it all back, and rolled_back says so */
    enum db_status (*then)(struct db_conn *c, struct job_op *a, struct db_error *err);
    void *ctx;
    int rolled_back;
    PGresult *rows;
    enum db_queue_verdict verdict;
};
/* Runs a in its own transaction (a queue lookup, then the statement, COMMIT sent with it unless
 * a->then). */
enum db_status db_job_op_run(struct db_pool *pool, struct job_op *a, struct db_error *err);

#endif
