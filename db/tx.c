/* The transaction runner (see tx.h): BEGIN, the workflow and COMMIT on a pooled connection,
 * run again after a serialization failure or deadlock, and its counts. Statements go through
 * query.c; connections come from pool.c. */
#include "db/tx.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "db/conn.h"

static atomic_uint_fast64_t tx_commits, tx_rollbacks, tx_retries, tx_redos, tx_failures;

void db_tx_commit_with_next(struct db_conn *c)
{
    c->commit_next = 1;
}

static void backoff(int attempt)
{
    /* 1-4 ms times the attempt, jittered, so two retrying transactions drift apart */
    unsigned seed = (unsigned)clock();
    long ms = attempt * (1 + (long)(rand_r(&seed) % 4));
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* One attempt: BEGIN, workflow, COMMIT or ROLLBACK on connection c. BEGIN goes out with the
 * workflow's first statement, and COMMIT with its last when the workflow says which that is
 * (db_tx_commit_with_next); c->lost says how a lost connection left the transaction. */
static enum db_status tx_attempt(struct db_conn *c, enum db_isolation iso, db_workflow_fn fn,
                                 void *arg, struct db_error *err)
{
    static const char *const rc[] = {"BEGIN", NULL};
    static const char *const rr[] = {"BEGIN ISOLATION LEVEL REPEATABLE READ", NULL};
    static const char *const ser[] = {"BEGIN ISOLATION LEVEL SERIALIZABLE", NULL};
    /* generic plans (no JIT either, as on every pooled session: a generic plan's cost is a guess,
     * a claim's LIMIT a tenth of the backlog, that can pass jit_above_cost, and JIT would compile
     * at every execution). SET LOCAL rather than SELECT set_config(...): the statement is sent
     * unnamed, so parsed at every transaction, and a utility statement is not planned or executed
     * as a query, so that it adds next to nothing to BEGIN */
    static const char *const generic[] = {"BEGIN", "SET LOCAL plan_cache_mode = force_generic_plan",
                                          NULL};
    static const char *const *const begin[] = {rc, rr, ser, generic};
    c->begin = begin[iso];
    c->commit_next = c->committed = 0;
    c->lost = DB_LOST_NONE;
    enum db_status st = fn(c, arg, err);
    int began = c->begin == NULL, committed = c->committed;
    if (st == DB_ERR_UNAVAILABLE && c->lost == DB_LOST_NONE) /* lost before BEGIN went out? */
        c->lost = !began && !db_conn_was_cut(c) ? DB_LOST_NOTHING_RAN : DB_LOST_NOT_COMMITTED;
    if (c->lost == DB_LOST_COMMIT_UNKNOWN)
        st = DB_ERR_OUTCOME_UNKNOWN; /* whatever the workflow made of it */
    c->begin = NULL;
    c->commit_next = c->committed = 0;
    if (committed || (st == DB_OK && !began)) {
        /* committed with the last statement, or no statement ran at all */
        atomic_fetch_add(&tx_commits, 1);
        return st;
    }
    if (st == DB_OK) {
        st = db_conn_commit(c, err);
        if (st == DB_OK)
            atomic_fetch_add(&tx_commits, 1);
        return st;
    }
    struct db_error ignored;
    /* (a COMMIT that failed in a pipeline has already ended the transaction) */
    if (!c->broken && began && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        db_exec(c, "ROLLBACK", &ignored);
    atomic_fetch_add(&tx_rollbacks, 1);
    return st;
}

enum db_status db_tx_run(struct db_pool *pool, enum db_isolation iso, db_workflow_fn fn, void *arg,
                         struct db_error *err)
{
    enum db_status st = DB_ERR_BUSY;
    int replaced = 0;
    for (int attempt = 1; attempt <= DB_TX_MAX_ATTEMPTS; attempt++) {
        struct db_conn *c = NULL;
        st = db_pool_acquire(pool, &c, err);
        if (st != DB_OK)
            break;
        st = tx_attempt(c, iso, fn, arg, err);
        enum db_lost lost = c->lost;
        c->lost = DB_LOST_NONE;
        if (lost != DB_LOST_NONE && !db_conn_was_cut(c))
            db_pool_flush(c, err->message); /* the server went away: so did its other sessions */
        db_pool_release(c);
        if (lost == DB_LOST_NOTHING_RAN && !replaced) {
            /* lost before anything could commit (a connection the server had closed): nothing
             * is left of the attempt; run it again on a fresh connection */
            replaced = 1;
            attempt--;
            continue;
        }
        if (st != DB_ERR_CONFLICT && st != DB_ERR_REDO)
            break;
        if (attempt < DB_TX_MAX_ATTEMPTS && st == DB_ERR_REDO) {
            atomic_fetch_add(&tx_redos, 1);
        } else if (attempt < DB_TX_MAX_ATTEMPTS) {
            atomic_fetch_add(&tx_retries, 1);
            backoff(attempt);
        }
    }
    if (st == DB_ERR_CONFLICT || st == DB_ERR_REDO)
        st = DB_ERR_BUSY; /* the last attempt wanted another: neither leaves db/ */
    if (st != DB_OK && st != DB_ABORTED)
        atomic_fetch_add(&tx_failures, 1);
    return st;
}

void db_tx_get_stats(struct db_tx_stats *out)
{
    out->commits = atomic_load(&tx_commits);
    out->rollbacks = atomic_load(&tx_rollbacks);
    out->retries = atomic_load(&tx_retries);
    out->redos = atomic_load(&tx_redos);
    out->failures = atomic_load(&tx_failures);
}

struct tx_query {
    const struct db_stmt *st;
    const char *const *params;
    PGresult *rows;
};

static enum db_status tx_query_fn(struct db_conn *c, void *arg, struct db_error *err)
{
    struct tx_query *a = arg;
    PQclear(a->rows); /* a repeated attempt's */
    a->rows = NULL;
    return db_query(c, a->st, a->params, &a->rows, err);
}

enum db_status db_tx_query(struct db_pool *pool, const struct db_stmt *st,
                           const char *const *params, PGresult **rows, struct db_error *err)
{
    struct tx_query a = {st, params, NULL};
    enum db_status s = db_tx_run(pool, DB_READ_COMMITTED, tx_query_fn, &a, err);
    if (s != DB_OK) {
        PQclear(a.rows);
        a.rows = NULL;
    }
    *rows = a.rows;
    return s;
}
