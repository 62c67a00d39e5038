/* db_tx_run against a real PostgreSQL: a serialization failure (40001), forced by a concurrent
 * update committed between the workflow's read and its write, is retried and the second attempt
 * commits; a conflict on every attempt gives up after DB_TX_MAX_ATTEMPTS with DB_ERR_BUSY, and
 * so does a workflow that answers DB_ERR_REDO every time (neither inside status comes out); a
 * non-retryable error (23505) is reported with its SQLSTATE after one attempt; a workflow's
 * DB_ABORTED rolls back. The round trips (BEGIN sent with the first statement, COMMIT with the
 * last when the workflow asks, db_query_pipeline): a pipelined COMMIT commits exactly once; a
 * failing last statement commits nothing, is retried when it is a conflict, and leaves the
 * connection usable; a pipeline stops at its first failing statement. The pool's deadline: a
 * connection lent past it is cut and its transaction not retried, unless the deadline was
 * lifted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/tx.h"
#include "harness_svc.h"

static struct db_pool *pool;
static PGconn *other; /* the concurrent writer */

static int setup(void **state)
{
    if (th_svc_db("txretry") != 0)
        return -1;
    other = th_svc_pg();
    PQclear(th_sql(other, "CREATE TABLE counter (id int PRIMARY KEY, v int NOT NULL)"));
    struct db_pool_config pc = {.conninfo = th_svc_dburl,
                                .size = 2,
                                .acquire_timeout_ms = 1000,
                                .statement_timeout_ms = 5000,
                                .connect_timeout_s = 5};
    pool = db_pool_create(&pc);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    db_pool_destroy(pool);
    return th_svc_teardown(state);
}

static void reset_counter(void)
{
    PQclear(th_sql(other, "DELETE FROM counter"));
    PQclear(th_sql(other, "INSERT INTO counter VALUES (1, 0)"));
}

static int counter_value(void)
{
    PGresult *r = th_sql(other, "SELECT v FROM counter WHERE id = 1");
    int v = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

struct bump {
    int attempts;
    int interfere_until;   /* the concurrent writer strikes on attempts up to this one */
    int commit_with_write; /* COMMIT goes out with the write */
};

static const struct db_stmt stmt_read = {"t_read", "SELECT v FROM counter WHERE id = 1", 0};
static const struct db_stmt stmt_bump = {"t_bump", "UPDATE counter SET v = v + 1 WHERE id = 1", 0};
static const struct db_stmt stmt_dup = {"t_dup", "INSERT INTO counter VALUES (1, 0)", 0};

/* Reads (taking the REPEATABLE READ snapshot), lets the other session commit an update of the
 * same row, then writes it: PostgreSQL must refuse the write with 40001. */
static enum db_status bump_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct bump *b = arg;
    b->attempts++;
    enum db_status st = db_query(c, &stmt_read, NULL, NULL, err);
    if (st != DB_OK)
        return st;
    if (b->attempts <= b->interfere_until)
        PQclear(th_sql(other, "UPDATE counter SET v = v + 100 WHERE id = 1"));
    if (b->commit_with_write)
        db_tx_commit_with_next(c);
    return db_query(c, &stmt_bump, NULL, NULL, err);
}

static void serialization_failure_is_retried(void **state)
{
    reset_counter();
    struct db_tx_stats before, after;
    db_tx_get_stats(&before);
    struct bump b = {0, 1, 0};
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_REPEATABLE_READ, bump_tx, &b, &err), DB_OK);
    assert_int_equal(b.attempts, 2);
    assert_int_equal(counter_value(), 101); /* the other update and exactly one bump */
    db_tx_get_stats(&after);
    assert_int_equal(after.retries - before.retries, 1);
    assert_int_equal(after.commits - before.commits, 1);
}

static void persistent_conflict_gives_up(void **state)
{
    reset_counter();
    struct bump b = {0, 1000, 0};
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_REPEATABLE_READ, bump_tx, &b, &err), DB_ERR_BUSY);
    assert_int_equal(b.attempts, DB_TX_MAX_ATTEMPTS);
    assert_string_equal(err.sqlstate, "40001");
    assert_int_equal(counter_value(), 100 * DB_TX_MAX_ATTEMPTS); /* no bump committed */
}

/* Bumps the counter, then answers DB_ERR_REDO, as a workflow does that found what it ran on
 * changed under it. */
static enum db_status redo_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    (*(int *)arg)++;
    enum db_status st = db_query(c, &stmt_bump, NULL, NULL, err);
    if (st != DB_OK)
        return st;
    db_error_set(err, "", "the workflow asked to run again");
    return DB_ERR_REDO;
}

static void persistent_redo_gives_up_busy(void **state)
{
    reset_counter();
    struct db_tx_stats before, after;
    db_tx_get_stats(&before);
    int attempts = 0;
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, redo_tx, &attempts, &err), DB_ERR_BUSY);
    assert_int_equal(attempts, DB_TX_MAX_ATTEMPTS);
    assert_int_equal(counter_value(), 0); /* every attempt rolled back */
    db_tx_get_stats(&after);
    assert_int_equal(after.redos - before.redos, DB_TX_MAX_ATTEMPTS - 1);
    assert_int_equal(after.retries - before.retries, 0);
    assert_int_equal(after.failures - before.failures, 1);
}

static enum db_status dup_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    (*(int *)arg)++;
    return db_query(c, &stmt_dup, NULL, NULL, err);
}

static void other_errors_are_reported_once(void **state)
{
    reset_counter();
    int attempts = 0;
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, dup_tx, &attempts, &err), DB_ERR_HARD);
    assert_int_equal(attempts, 1);
    assert_string_equal(err.sqlstate, "23505");
    assert_non_null(strstr(err.message, "duplicate key"));
}

static enum db_status abort_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    enum db_status st = db_query(c, &stmt_bump, NULL, NULL, err);
    return st == DB_OK ? DB_ABORTED : st;
}

static void aborted_workflow_rolls_back(void **state)
{
    reset_counter();
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, abort_tx, NULL, &err), DB_ABORTED);
    assert_int_equal(counter_value(), 0);
}

static void conflict_on_a_pipelined_commit_is_retried(void **state)
{
    reset_counter();
    struct db_tx_stats before, after;
    db_tx_get_stats(&before);
    struct bump b = {0, 1, 1};
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_REPEATABLE_READ, bump_tx, &b, &err), DB_OK);
    assert_int_equal(b.attempts, 2);
    assert_int_equal(counter_value(), 101);
    db_tx_get_stats(&after);
    assert_int_equal(after.commits - before.commits, 1);
    assert_int_equal(after.rollbacks - before.rollbacks, 1);
}

/* Two bumps, COMMIT sent with the second one, or with a failing insert when *arg is 1. */
static enum db_status bump_then_last_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    enum db_status st = db_query(c, &stmt_bump, NULL, NULL, err);
    if (st != DB_OK)
        return st;
    db_tx_commit_with_next(c);
    return db_query(c, *(int *)arg ? &stmt_dup : &stmt_bump, NULL, NULL, err);
}

static void pipelined_commit_commits_once(void **state)
{
    reset_counter();
    struct db_tx_stats before, after;
    db_tx_get_stats(&before);
    int fail = 0;
    struct db_error err;
    for (int i = 0; i < 10; i++) /* both pool connections, several times each */
        assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, bump_then_last_tx, &fail, &err), DB_OK);
    assert_int_equal(counter_value(), 20);
    db_tx_get_stats(&after);
    assert_int_equal(after.commits - before.commits, 10);
    assert_int_equal(after.rollbacks - before.rollbacks, 0);
}

static void failing_last_statement_commits_nothing(void **state)
{
    reset_counter();
    int fail = 1;
    struct db_error err;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, bump_then_last_tx, &fail, &err),
                         DB_ERR_HARD);
        assert_string_equal(err.sqlstate, "23505");
    }
    assert_int_equal(counter_value(), 0); /* the first bump of each rolled back with it */
    fail = 0;                             /* and the connections still work */
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, bump_then_last_tx, &fail, &err), DB_OK);
    assert_int_equal(counter_value(), 2);
}

struct piped {
    int fail_in_middle;
    int rows_read, out_after_failure_null;
};

/* One pipeline: read, bump (or a failing insert), read. */
static enum db_status pipeline_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct piped *p = arg;
    PGresult *first = NULL, *last = (PGresult *)1;
    struct db_call calls[] = {{.st = &stmt_read, .out = &first},
                              {.st = p->fail_in_middle ? &stmt_dup : &stmt_bump},
                              {.st = &stmt_read, .out = &last}};
    enum db_status st = db_query_pipeline(c, calls, 3, err);
    if (st == DB_OK) {
        p->rows_read = atoi(PQgetvalue(first, 0, 0)) * 10 + atoi(PQgetvalue(last, 0, 0));
    } else {
        p->out_after_failure_null = first == NULL && last == NULL;
    }
    PQclear(first);
    PQclear(last);
    return st;
}

static void pipeline_runs_in_order_and_stops_at_a_failure(void **state)
{
    reset_counter();
    struct piped p = {0, -1, 0};
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, pipeline_tx, &p, &err), DB_OK);
    assert_int_equal(p.rows_read, 1); /* 0 before the bump, 1 after it */
    assert_int_equal(counter_value(), 1);
    p = (struct piped){1, -1, 0};
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, pipeline_tx, &p, &err), DB_ERR_HARD);
    assert_string_equal(err.sqlstate, "23505");
    assert_int_equal(p.out_after_failure_null, 1);
    assert_int_equal(counter_value(), 1);
}

/* A workflow that sleeps 1 s in the database: past a 300 ms deadline unless lifted. */
static const struct db_stmt stmt_sleep = {"t_sleep", "SELECT pg_sleep(1)", 0};

static enum db_status sleep_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    int *runs = arg;
    (*runs)++;
    if (runs[1])
        db_conn_lift_deadline(c);
    return db_query(c, &stmt_sleep, NULL, NULL, err);
}

/* The pool's deadline closes a connection lent for too long (the watchdog shuts its socket): the
 * transaction fails as unavailable at once and is not run again; a connection whose deadline was
 * lifted runs to the end; the pool serves the next transaction on a fresh connection. */
static void deadline_cuts_a_connection_lent_too_long(void **state)
{
    struct db_pool_config pc = {.conninfo = th_svc_dburl,
                                .size = 1,
                                .acquire_timeout_ms = 1000,
                                .statement_timeout_ms = 5000,
                                .connect_timeout_s = 5,
                                .deadline_ms = 300};
    struct db_pool *short_pool = db_pool_create(&pc);
    assert_non_null(short_pool);
    struct db_error err;
    int runs[2] = {0, 0};
    double t0 = th_now();
    assert_int_equal(db_tx_run(short_pool, DB_READ_COMMITTED, sleep_tx, runs, &err),
                     DB_ERR_UNAVAILABLE);
    double took = th_now() - t0;
    assert_true(took >= 0.25 && took < 0.9);
    assert_int_equal(runs[0], 1);
    assert_non_null(strstr(err.message, "deadline of 300 ms"));
    runs[0] = 0;
    runs[1] = 1; /* lifted */
    assert_int_equal(db_tx_run(short_pool, DB_READ_COMMITTED, sleep_tx, runs, &err), DB_OK);
    assert_int_equal(runs[0], 1);
    struct db_pool_stats ps;
    db_pool_get_stats(short_pool, &ps);
    assert_int_equal(ps.deadlines, 1);
    assert_int_equal(ps.flushes, 0); /* a deadline is no lost server */
    db_pool_destroy(short_pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(serialization_failure_is_retried),
        cmocka_unit_test(persistent_conflict_gives_up),
        cmocka_unit_test(persistent_redo_gives_up_busy),
        cmocka_unit_test(other_errors_are_reported_once),
        cmocka_unit_test(aborted_workflow_rolls_back),
        cmocka_unit_test(conflict_on_a_pipelined_commit_is_retried),
        cmocka_unit_test(pipelined_commit_commits_once),
        cmocka_unit_test(failing_last_statement_commits_nothing),
        cmocka_unit_test(pipeline_runs_in_order_and_stops_at_a_failure),
        cmocka_unit_test(deadline_cuts_a_connection_lent_too_long),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
