/* Queue ids by name are only hints (db/hints.h): a queue workflow that knows its queue's id sends
 * the lookup with its statement in one round trip and checks it. Against a real PostgreSQL, the
 * queue is deleted and created again under a new id behind this process's back (in SQL, as
 * another process or an operator would): enqueue, claim, settlement and a fenced write each
 * then act on the new queue, once, through one transaction redo, and the statement the stale
 * hint ran changed nothing; with the queue gone, each answers queue_not_found. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/queues.h"
#include "db/tx.h"
#include "harness.h"
#include "harness_db.h"

static struct db_pool *pool;
static PGconn *sql;

static int setup(void **state)
{
    (void)state;
    return th_db_open("qhint", 2, &pool, &sql);
}

static int teardown(void **state)
{
    (void)state;
    th_db_close(pool, sql);
    return 0;
}

/* Deletes queue h (and so its jobs) and creates it again in SQL; returns the new id. */
static int64_t recreate(void)
{
    PQclear(th_sql(sql, "DELETE FROM rowlock.queues WHERE name = 'h'"));
    PGresult *r = th_sql(sql, "INSERT INTO rowlock.queues (name, max_attempts, lease_seconds, "
                              "backoff_base_seconds, backoff_max_seconds, retention_seconds) "
                              "VALUES ('h', 3, 60, 0, 0, 3600) RETURNING id");
    int64_t id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return id;
}

/* "jobs of queue id: state/attempts,..." in id order. */
static void jobs_of(int64_t qid, char *out, size_t size)
{
    char q[200];
    snprintf(q, sizeof(q),
             "SELECT count(*) || ':' || coalesce(string_agg(state || '/' || attempts, ',' "
             "ORDER BY id), '') FROM rowlock.jobs WHERE queue_id = %" PRId64,
             qid);
    PGresult *r = th_sql(sql, q);
    snprintf(out, size, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

/* Transactions run again for a stale hint: redos (DB_ERR_REDO), never counted as retries. */
static uint64_t redos(void)
{
    struct db_tx_stats s;
    db_tx_get_stats(&s);
    return s.redos;
}

static int64_t enqueue(void)
{
    struct db_job_in in = {.payload = "{\"n\":1}"};
    struct db_job_ref ref = {.verdict = DB_Q_OK};
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_jobs_enqueue(pool, "h", &in, 1, &ref, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    assert_int_equal(ref.verdict, DB_Q_CREATED);
    return ref.id;
}

static struct db_claimed claim(void)
{
    struct db_claimed c[1];
    memset(c, 0, sizeof(c));
    size_t n = 0;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_leases_claim(pool, "h", "w", 1, 0, 0, c, &n, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    assert_int_equal(n, 1);
    free(c[0].payload);
    return c[0];
}

static void stale_hints_act_on_the_new_queue_once(void **state)
{
    (void)state;
    struct db_queue_config cfg = {3, 60, 0, 0, 3600, 0, 0, 0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}};
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_queues_put(pool, "h", &cfg, &q, &v, &err), DB_OK);
    enqueue();
    claim(); /* the process now knows h's id */
    char rows[200];

    /* enqueue */
    int64_t id2 = recreate();
    uint64_t r0 = redos();
    enqueue();
    assert_int_equal(redos() - r0, 1);
    jobs_of(id2, rows, sizeof(rows));
    assert_string_equal(rows, "1:pending/0");
    jobs_of(q.id, rows, sizeof(rows));
    assert_string_equal(rows, "0:");

    /* claim */
    int64_t id3 = recreate();
    int64_t job3 = enqueue(); /* hint now id2: retried onto id3 */
    r0 = redos();
    struct db_claimed c = claim();
    assert_int_equal(redos() - r0, 0); /* the hint is id3 already */
    assert_int_equal(c.id, job3);
    jobs_of(id3, rows, sizeof(rows));
    assert_string_equal(rows, "1:processing/1");

    /* settlement and a fenced write, hint stale: each acts once on the new queue */
    recreate();
    int64_t a = enqueue();
    int64_t b = enqueue();
    struct db_claimed ca = claim(), cb = claim();
    assert_int_equal(ca.id, a);
    assert_int_equal(cb.id, b);
    int64_t id5 = recreate();
    struct db_settlement s = {{ca.id, "w", ca.fence}, NULL, DB_Q_OK};
    r0 = redos();
    assert_int_equal(db_leases_complete_batch(pool, "h", &s, 1, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    assert_int_equal(s.verdict, DB_Q_JOB_NOT_FOUND); /* gone with the old queue */
    assert_int_equal(redos() - r0, 1);
    int64_t d = enqueue();
    struct db_claimed cd = claim();
    assert_int_equal(cd.id, d);
    recreate();
    struct db_lease l = {cd.id, "w", cd.fence};
    r0 = redos();
    assert_int_equal(db_leases_complete(pool, "h", &l, NULL, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_JOB_NOT_FOUND);
    assert_int_equal(redos() - r0, 1);
    jobs_of(id5, rows, sizeof(rows));
    assert_string_equal(rows, "0:"); /* id5 was deleted with its jobs */

    /* the queue gone: not found, no error */
    PQclear(th_sql(sql, "DELETE FROM rowlock.queues WHERE name = 'h'"));
    struct db_job_in in = {.payload = "{\"n\":1}"};
    struct db_job_ref ref = {.verdict = DB_Q_OK};
    assert_int_equal(db_jobs_enqueue(pool, "h", &in, 1, &ref, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_QUEUE_NOT_FOUND);
    struct db_claimed none[1];
    size_t n = 0;
    assert_int_equal(db_leases_claim(pool, "h", "w", 1, 0, 0, none, &n, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_QUEUE_NOT_FOUND);
    assert_int_equal(n, 0);
    PGresult *r = th_sql(sql, "SELECT count(*) FROM rowlock.jobs");
    assert_string_equal(PQgetvalue(r, 0, 0), "0");
    PQclear(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stale_hints_act_on_the_new_queue_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
