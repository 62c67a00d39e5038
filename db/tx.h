/* Transactions: db_tx_run takes a pooled connection, runs BEGIN, the workflow and COMMIT, and
 * retries serialization failures and deadlocks a bounded number of times. Every workflow in db/
 * runs through it; what a workflow does belongs to its own file. BEGIN costs no round trip of its
 * own: it goes out with the workflow's first statement (libpq pipeline mode). */
#ifndef DB_TX_H
#define DB_TX_H

#include <stdint.h>

#include "db/db.h"
#include "db/pool.h"

#define DB_TX_MAX_ATTEMPTS 5

enum db_isolation {
    DB_READ_COMMITTED,
    DB_REPEATABLE_READ,
    DB_SERIALIZABLE,
    /* READ COMMITTED with generic plans and JIT off for this transaction only: for statements
     * PostgreSQL would otherwise re-plan every time (array parameters that change size per call,
     * the queue's enqueue and claims), whose generic plan was checked to be as good as a custom
     * one at scale; JIT off because a generic plan's guessed cost can pass jit_above_cost (sent
     * with BEGIN, so it costs no round trip) */
    DB_READ_COMMITTED_GENERIC_PLANS,
};

/* A workflow: the statements of one transaction. It may run several times (after a statement
 * answered DB_ERR_CONFLICT, or when it answers DB_ERR_REDO), so it must reset whatever it
 * reports through arg at its start. Returns DB_OK to commit, DB_ABORTED to roll back without
 * error, or the failing query's status. */
typedef enum db_status (*db_workflow_fn)(struct db_conn *c, void *arg, struct db_error *err);

/* Runs fn in one transaction. DB_OK means committed. A statement's conflict (DB_ERR_CONFLICT)
 * runs fn again after a short backoff, fn's DB_ERR_REDO at once (what changed under it is gone
 * when the attempt ends, and nothing contends); DB_ERR_BUSY means that the last of
 * DB_TX_MAX_ATTEMPTS attempts still conflicted or asked to run again. DB_ERR_CONFLICT and
 * DB_ERR_REDO are never returned. A connection lost before anything could commit (in the round
 * trip that carried BEGIN, when the server's own report or a failed send shows COMMIT did not
 * run) is replaced once and the transaction run again, and the pool is flushed. A connection
 * lost once COMMIT went out answers DB_ERR_OUTCOME_UNKNOWN, never retried; one cut by the
 * pool's deadline is never retried either. */
enum db_status db_tx_run(struct db_pool *pool, enum db_isolation iso, db_workflow_fn fn, void *arg,
                         struct db_error *err);

/* Inside a workflow: c's next statement is the workflow's last, so COMMIT goes out with it in the
 * same round trip. Once that statement has succeeded the transaction is committed: the workflow
 * runs nothing more on c and returns DB_OK. */
void db_tx_commit_with_next(struct db_conn *c);

struct db_tx_stats {
    uint64_t commits;
    uint64_t rollbacks;
    uint64_t retries;  /* attempts repeated after DB_ERR_CONFLICT (40001/40P01) */
    uint64_t redos;    /* attempts repeated because the workflow answered DB_ERR_REDO */
    uint64_t failures; /* transactions that ended in an error status */
};
void db_tx_get_stats(struct db_tx_stats *out);

/* Runs one statement (st with params, as for db_query) as a transaction of its own. On DB_OK
 * *rows holds its result (the caller PQclears it); otherwise *rows is NULL. */
enum db_status db_tx_query(struct db_pool *pool, const struct db_stmt *st,
                           const char *const *params, PGresult **rows, struct db_error *err);

#endif
