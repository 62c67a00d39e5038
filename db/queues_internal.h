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

/* A queue's counts by state and oldest due pending age, as db_queue_stats_from_row reads them. */
#define QUEUE_STATS_COLUMNS                                                                        \
    "count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'processing'), "    \
    "count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'), "      \
    "coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'pending' AND "         \
    "run_at <= now())), 0)"
void db_queue_stats_from_row(const PGresult *r, int row, int col, struct db_queue_stats *s);

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
    PGresult *rows;
    enum db_queue_verdict verdict;
};
/* Runs a in its own transaction (a queue lookup, then the statement, COMMIT sent with it). */
enum db_status db_job_op_run(struct db_pool *pool, struct job_op *a, struct db_error *err);

#endif
