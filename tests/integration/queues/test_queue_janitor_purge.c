/* The queue janitor's purge (db_queues_janitor) against a real PostgreSQL: a finished job past
 * its queue's retention is deleted with its body and its whole attempt history (job_attempts
 * has no foreign key to cascade from: the purge deletes the history itself); a finished job
 * within retention, a pending job and a job still leased keep their rows; another queue's
 * expired job is purged by its own queue's pass, never by this one's. Each final state is kept
 * its own time (succeeded, failed and cancelled retentions), and a purged job's dedupe window
 * records how it ended. The retention is made to pass in SQL (finished_at moved back), since a
 * test cannot wait it out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/queues.h"
#include "harness.h"
#include "harness_db.h"

static struct db_pool *pool;
static PGconn *sql;

static int setup(void **state)
{
    (void)state;
    return th_db_open("qpurge", 2, &pool, &sql);
}

static int teardown(void **state)
{
    (void)state;
    th_db_close(pool, sql);
    return 0;
}

static void make_queue_with(const char *name, const struct db_queue_config *cfg)
{
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_queues_put(pool, name, cfg, &q, &v, &err), DB_OK);
}

static void make_queue(const char *name)
{
    struct db_queue_config cfg = {3, 60, 0, 0, 3600, 0, 0, 0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}};
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_queues_put(pool, name, &cfg, &q, &v, &err), DB_OK);
}

static int64_t enqueue_key(const char *queue, const char *key)
{
    struct db_job_in in = {.payload = "{\"n\":1}", .dedupe_key = key};
    struct db_job_ref ref = {.verdict = DB_Q_OK};
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_jobs_enqueue(pool, queue, &in, 1, &ref, &v, &err), DB_OK);
    assert_int_equal(ref.verdict, DB_Q_CREATED);
    return ref.id;
}

static int64_t enqueue(const char *queue)
{
    return enqueue_key(queue, NULL);
}

/* Claims one job of queue for owner and returns its lease. */
static struct db_lease claim(const char *queue, const char *owner)
{
    struct db_claimed c[1];
    memset(c, 0, sizeof(c));
    size_t n = 0;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_leases_claim(pool, queue, owner, 1, 0, 0, c, &n, &v, &err), DB_OK);
    assert_int_equal(n, 1);
    struct db_lease l = {c[0].id, owner, c[0].fence};
    db_claimed_clear(c, n);
    return l;
}

static void complete(const char *queue, struct db_lease l)
{
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_leases_complete(pool, queue, &l, NULL, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
}

/* Rows of job id in jobs, job_bodies and its attempt history (the view: superseded attempts in
 * job_attempts and the latest on the job row), as "jobs/bodies/attempts". */
static void rows_of(int64_t id, char *out, size_t size)
{
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT (SELECT count(*) FROM rowlock.jobs WHERE id = %1$lld) || '/' || "
             "(SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %1$lld) || '/' || "
             "(SELECT count(*) FROM rowlock.job_attempt_history WHERE job_id = %1$lld)",
             (long long)id);
    PGresult *r = th_sql(sql, q);
    snprintf(out, size, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

struct purged {
    int64_t a, b; /* purged by queue "a" and by queue "b" */
};

static void count_purged(const struct db_queue_upkeep *u, void *ctx)
{
    assert_null(u->failed);
    struct purged *p = ctx;
    if (strcmp(u->queue, "a") == 0)
        p->a += u->purged;
    else if (strcmp(u->queue, "b") == 0)
        p->b += u->purged;
}

static void purge_takes_expired_jobs_with_their_history(void **state)
{
    (void)state;
    make_queue("a");
    make_queue("b");
    /* in a: old (finished, retried once: two attempt rows), recent (finished), leased, pending */
    int64_t old = enqueue("a");
    struct db_lease l = claim("a", "w1");
    assert_int_equal(l.job_id, old);
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_leases_handback(pool, "a", &l, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    complete("a", claim("a", "w2"));
    int64_t recent = enqueue("a");
    complete("a", claim("a", "w1"));
    int64_t leased = enqueue("a");
    assert_int_equal(claim("a", "w3").job_id, leased);
    int64_t pending = enqueue("a");
    /* in b: one finished job, as old as a's */
    int64_t other = enqueue("b");
    complete("b", claim("b", "w1"));

    char before[64], after[64];
    rows_of(old, before, sizeof(before));
    assert_string_equal(before, "1/1/2");
    char q[200];
    snprintf(q, sizeof(q),
             "UPDATE rowlock.jobs SET finished_at = now() - interval '2 hours' "
             "WHERE id IN (%lld, %lld)",
             (long long)old, (long long)other);
    PQclear(th_sql(sql, q));

    struct purged p = {0, 0};
    assert_int_equal(db_queues_janitor(pool, 100, count_purged, &p, &err), DB_OK);
    assert_int_equal(p.a, 1);
    assert_int_equal(p.b, 1);
    rows_of(old, after, sizeof(after));
    assert_string_equal(after, "0/0/0");
    rows_of(other, after, sizeof(after));
    assert_string_equal(after, "0/0/0");
    rows_of(recent, after, sizeof(after));
    assert_string_equal(after, "1/1/1");
    rows_of(leased, after, sizeof(after));
    assert_string_equal(after, "1/1/1");
    rows_of(pending, after, sizeof(after));
    assert_string_equal(after, "1/1/0");

    /* a second pass finds nothing more */
    p = (struct purged){0, 0};
    assert_int_equal(db_queues_janitor(pool, 100, count_purged, &p, &err), DB_OK);
    assert_int_equal(p.a + p.b, 0);
    PGresult *r = th_sql(sql, "SELECT count(*) FROM rowlock.job_attempts a WHERE NOT EXISTS "
                              "(SELECT 1 FROM rowlock.jobs j WHERE j.id = a.job_id)");
    assert_string_equal(PQgetvalue(r, 0, 0), "0"); /* no orphaned history */
    PQclear(r);
}

/* Queue s keeps succeeded jobs an hour, failed ones a day, cancelled ones a minute; jobs of
 * each state, finished two hours ago: the succeeded and the cancelled one are purged, the failed
 * one stays, and the succeeded job's dedupe window says how it ended. */
static void purge_keeps_each_final_state_its_own_time(void **state)
{
    (void)state;
    struct db_queue_config cfg = {.max_attempts = 1,
                                  .lease_seconds = 60,
                                  .retention_seconds = 3600,
                                  .failed_retention_seconds = 86400,
                                  .cancelled_retention_seconds = 60,
                                  .dedupe_window_seconds = 86400};
    make_queue_with("s", &cfg);
    int64_t done = enqueue_key("s", "k-done");
    complete("s", claim("s", "w1"));
    int64_t failed = enqueue("s");
    struct db_lease l = claim("s", "w1");
    enum db_queue_verdict v;
    struct db_error err;
    char st[DB_JOB_STATE_TEXT];
    assert_int_equal(db_leases_fail(pool, "s", &l, "{}", 0, st, &v, &err), DB_OK);
    assert_string_equal(st, "failed");
    int64_t cancelled = enqueue("s");
    assert_int_equal(db_jobs_cancel(pool, "s", cancelled, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    PQclear(th_sql(sql, "UPDATE rowlock.jobs j SET finished_at = now() - interval '2 hours' "
                        "FROM rowlock.queues q WHERE q.id = j.queue_id AND q.name = 's'"));

    struct purged p = {0, 0};
    assert_int_equal(db_queues_janitor(pool, 100, count_purged, &p, &err), DB_OK);
    char rows[64];
    rows_of(done, rows, sizeof(rows));
    assert_string_equal(rows, "0/0/0");
    rows_of(cancelled, rows, sizeof(rows));
    assert_string_equal(rows, "0/0/0");
    rows_of(failed, rows, sizeof(rows));
    assert_string_equal(rows, "1/1/1");
    PGresult *r = th_sql(sql, "SELECT final_state FROM rowlock.job_dedupe WHERE dedupe_key = "
                              "'k-done'");
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "succeeded");
    PQclear(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(purge_takes_expired_jobs_with_their_history),
        cmocka_unit_test(purge_keeps_each_final_state_its_own_time),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
