/* Combined claims and settlements (db/combine.h) against a real PostgreSQL, through the C queue
 * API:
 *  - a combined claim keeps the protocol. Claims are made to arrive while another claim of the
 *    queue is held up (a test transaction holds rowlock.jobs locked), so they run as one
 *    st_claim_many: each claimer gets rows nobody holds, with a fresh fence; re-claiming its own
 *    expired lease keeps the attempt and another owner's claim spends one; an expired lease
 *    without attempts left goes to nobody (only its owner alone or the janitor may take it);
 *    the superseded attempt is in the history as lease_expired;
 *  - a combined settlement whose shared statement fails on one caller's result (JSON that
 *    PostgreSQL refuses) runs each caller alone: only that caller is refused;
 *  - two pools (two processes' worth of combiners) of 8 threads each race claims and
 *    settlements over 1,600 jobs, with a wrong-fence settlement now and then: every job is
 *    claimed exactly once and succeeds with one attempt, every wrong fence is refused on its
 *    own, and calls were combined (fewer transactions than calls). */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "db/queues.h"
#include "harness.h"
#include "harness_db.h"
#include "harness_svc.h"

static struct db_pool *pools[2];
static PGconn *sql;

static int setup(void **state)
{
    (void)state;
    if (th_db_open("qcombined", 8, &pools[0], &sql) != 0)
        return -1;
    struct db_pool_config pc = {.conninfo = th_svc_dburl,
                                .size = 8,
                                .acquire_timeout_ms = 5000,
                                .statement_timeout_ms = 20000,
                                .connect_timeout_s = 5};
    pools[1] = db_pool_create(&pc);
    return pools[1] ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    db_pool_destroy(pools[1]);
    th_db_close(pools[0], sql);
    return 0;
}

static void make_queue(const char *name, int max_attempts)
{
    struct db_queue_config cfg = {max_attempts, 60,          0, 0, 3600, 0, 0, 0, 0,
                                  {0, 0, 0, 0}, {0, 0, 0, 0}};
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_queues_put(pools[0], name, &cfg, &q, &v, &err), DB_OK);
}

static void enqueue(const char *queue, size_t n, int64_t *ids)
{
    struct db_job_in *in = calloc(n, sizeof(*in));
    struct db_job_ref *refs = calloc(n, sizeof(*refs));
    for (size_t i = 0; i < n; i++)
        in[i].payload = "{\"n\":1}";
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_jobs_enqueue(pools[0], queue, in, n, refs, &v, &err), DB_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(refs[i].verdict, DB_Q_CREATED);
        if (ids != NULL)
            ids[i] = refs[i].id;
    }
    free(in);
    free(refs);
}

static void exec_sql(const char *fmt, ...)
{
    char q[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q, sizeof(q), fmt, ap);
    va_end(ap);
    PQclear(th_sql(sql, q));
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- a forced combined claim ---- */

struct claimer {
    pthread_t thread;
    const char *owner;
    struct db_claimed got[1];
    size_t n;
    enum db_status st;
};

static void *claimer_main(void *arg)
{
    struct claimer *k = arg;
    enum db_queue_verdict v;
    struct db_error err;
    k->st = db_leases_claim(pools[0], "forced", k->owner, 1, 0, 0, k->got, &k->n, &v, &err);
    return NULL;
}

/* Waits until this process has seen want claims (settlements: want settlements) arrive. */
static void await_calls(int settlements, unsigned long long want)
{
    struct db_leases_combined c;
    for (int i = 0; i < 2000; i++) {
        db_leases_combined_get(&c);
        if ((settlements ? c.settlements : c.claims) >= want)
            return;
        pause_ms(5);
    }
    fail_msg("calls did not arrive: %llu claims, %llu settlements; want %llu", c.claims,
             c.settlements, want);
}

static void combined_claim_keeps_the_protocol(void **state)
{
    (void)state;
    make_queue("forced", 3);
    int64_t id[4];
    enqueue("forced", 4, id);
    /* J0 taken by w1 and J1 by w2, both leases expired since; J1 has no attempts left; J2 is
     * the oldest due job, J3 the newest */
    exec_sql("UPDATE rowlock.jobs SET state = 'processing', owner = 'w' || (id - %1$" PRId64
             " + 1), fence = 1, attempts = CASE id WHEN %1$" PRId64 " THEN 1 ELSE 3 END, "
             "lease_expires_at = now() - interval '1 hour', claimable_at = now() - interval "
             "'1 hour', attempt_no = attempts + 1, attempt_owner = 'w' || (id - %1$" PRId64
             " + 1), attempt_claimed_at = now() - interval '2 hours' WHERE id IN (%1$" PRId64
             ", %2$" PRId64 ")",
             id[0], id[1]);
    exec_sql("UPDATE rowlock.jobs SET run_at = now() - interval '2 hours', claimable_at = now() - "
             "interval '2 hours' WHERE id = %" PRId64,
             id[2]);

    struct db_leases_combined before, after;
    db_leases_combined_get(&before);
    exec_sql("BEGIN");
    exec_sql("LOCK TABLE rowlock.jobs IN ACCESS EXCLUSIVE MODE");
    struct claimer k[4] = {{.owner = "wA"}, {.owner = "w1"}, {.owner = "w2"}, {.owner = "w3"}};
    assert_int_equal(pthread_create(&k[0].thread, NULL, claimer_main, &k[0]), 0);
    await_calls(0, before.claims + 1); /* wA's claim runs, held up by the lock */
    for (int i = 1; i < 4; i++)
        assert_int_equal(pthread_create(&k[i].thread, NULL, claimer_main, &k[i]), 0);
    await_calls(0, before.claims + 4); /* the others wait for it */
    exec_sql("COMMIT");
    for (int i = 0; i < 4; i++) {
        pthread_join(k[i].thread, NULL);
        assert_int_equal(k[i].st, DB_OK);
    }
    db_leases_combined_get(&after);
    assert_int_equal(after.claims - before.claims, 4);
    assert_int_equal(after.claim_transactions - before.claim_transactions, 2);

    /* wA, alone, took the oldest due job */
    assert_int_equal(k[0].n, 1);
    assert_int_equal(k[0].got[0].id, id[2]);
    assert_int_equal(k[0].got[0].attempt, 1);
    /* the three others shared J0 and J3; J1 (no attempts left) went to nobody */
    int seen0 = 0, seen3 = 0;
    for (int i = 1; i < 4; i++) {
        if (k[i].n == 0)
            continue;
        const struct db_claimed *c = &k[i].got[0];
        assert_true(c->id == id[0] || c->id == id[3]);
        if (c->id == id[0]) {
            seen0++;
            assert_int_equal(c->fence, 2);
            assert_true(c->reclaimed);
            /* its own expired lease keeps the attempt; another owner spends one */
            assert_int_equal(c->attempt, strcmp(k[i].owner, "w1") == 0 ? 1 : 2);
        } else {
            seen3++;
            assert_int_equal(c->fence, 1);
            assert_int_equal(c->attempt, 1);
        }
    }
    assert_int_equal(seen0, 1);
    assert_int_equal(seen3, 1);
    char q[160];
    snprintf(q, sizeof(q),
             "SELECT state, owner, attempts, fence FROM rowlock.jobs WHERE id = %" PRId64, id[1]);
    PGresult *r = th_sql(sql, q);
    assert_string_equal(PQgetvalue(r, 0, 0), "processing");
    assert_string_equal(PQgetvalue(r, 0, 1), "w2");
    assert_string_equal(PQgetvalue(r, 0, 2), "3");
    assert_string_equal(PQgetvalue(r, 0, 3), "1");
    PQclear(r);
    /* J0's history: w1's attempt, ended lease_expired, then the one just opened */
    struct db_job job;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_jobs_get(pools[0], "forced", id[0], &job, &v, &err), DB_OK);
    assert_int_equal(v, DB_Q_OK);
    assert_int_equal(job.nhistory, 2);
    assert_int_equal(job.history[0].fence, 1);
    assert_string_equal(job.history[0].owner, "w1");
    assert_string_equal(job.history[0].outcome, "lease_expired");
    assert_int_equal(job.history[1].fence, 2);
    assert_string_equal(job.history[1].outcome, "");
    db_job_clear(&job);
    for (int i = 0; i < 4; i++)
        db_claimed_clear(k[i].got, k[i].n);
}

/* ---- a forced combined settlement with a refused result ---- */

struct settler {
    pthread_t thread;
    struct db_settlement item;
    enum db_queue_verdict verdict;
    enum db_status st;
};

static void *settler_main(void *arg)
{
    struct settler *k = arg;
    struct db_error err;
    k->st = db_leases_complete_batch(pools[0], "settle", &k->item, 1, &k->verdict, &err);
    return NULL;
}

static struct db_lease claim_one(const char *owner)
{
    struct db_claimed c[1];
    memset(c, 0, sizeof(c));
    size_t n = 0;
    enum db_queue_verdict v;
    struct db_error err;
    assert_int_equal(db_leases_claim(pools[0], "settle", owner, 1, 0, 0, c, &n, &v, &err), DB_OK);
    assert_int_equal(n, 1);
    struct db_lease l = {c[0].id, owner, c[0].fence};
    db_claimed_clear(c, n);
    return l;
}

/* B and C are settled together behind A; C's result is JSON PostgreSQL refuses (jsonb has no
 * \u0000), which fails their shared statement: each then runs alone, B's applies and only C is
 * refused, its job untouched. */
static void combined_settlement_refuses_only_the_bad_one(void **state)
{
    (void)state;
    make_queue("settle", 3);
    enqueue("settle", 3, NULL);
    struct settler k[3] = {{.item = {claim_one("sa"), "{\"ok\": 1}", DB_Q_OK}},
                           {.item = {claim_one("sb"), "{\"ok\": 2}", DB_Q_OK}},
                           {.item = {claim_one("sc"), "\"\\u0000\"", DB_Q_OK}}};
    struct db_leases_combined before, after;
    db_leases_combined_get(&before);
    exec_sql("BEGIN");
    exec_sql("LOCK TABLE rowlock.jobs IN ACCESS EXCLUSIVE MODE");
    assert_int_equal(pthread_create(&k[0].thread, NULL, settler_main, &k[0]), 0);
    await_calls(1, before.settlements + 1);
    for (int i = 1; i < 3; i++)
        assert_int_equal(pthread_create(&k[i].thread, NULL, settler_main, &k[i]), 0);
    await_calls(1, before.settlements + 3);
    exec_sql("COMMIT");
    for (int i = 0; i < 3; i++)
        pthread_join(k[i].thread, NULL);
    db_leases_combined_get(&after);
    /* A alone, B and C together, then each again alone */
    assert_int_equal(after.settlement_transactions - before.settlement_transactions, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(k[i].st, DB_OK);
        assert_int_equal(k[i].verdict, DB_Q_OK);
        assert_int_equal(k[i].item.verdict, DB_Q_OK);
    }
    assert_int_equal(k[2].st, DB_OK);
    assert_int_equal(k[2].verdict, DB_Q_BAD_INPUT);
    char q[200];
    snprintf(
        q, sizeof(q),
        "SELECT string_agg(j.state || ':' || coalesce(b.result::text, '-'), ',' ORDER BY j.id) "
        "FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
        "WHERE j.id IN (%" PRId64 ", %" PRId64 ", %" PRId64 ")",
        k[0].item.lease.job_id, k[1].item.lease.job_id, k[2].item.lease.job_id);
    PGresult *r = th_sql(sql, q);
    assert_string_equal(PQgetvalue(r, 0, 0),
                        "succeeded:{\"ok\": 1},succeeded:{\"ok\": 2},processing:-");
    PQclear(r);
}

/* ---- racing combined claims and settlements ---- */

#define JOBS    1600
#define THREADS 16 /* 8 a pool */
#define CLAIM   10

struct racer {
    pthread_t thread;
    int index;
    int64_t got[JOBS];
    size_t n;
    int errors, refused;
};

static void *racer_main(void *arg)
{
    struct racer *k = arg;
    struct db_pool *pool = pools[k->index % 2];
    char owner[16];
    snprintf(owner, sizeof(owner), "r%d", k->index);
    for (int empty = 0, round = 0; empty < 3; round++) {
        struct db_claimed c[CLAIM];
        memset(c, 0, sizeof(c));
        size_t n = 0;
        enum db_queue_verdict v;
        struct db_error err;
        if (db_leases_claim(pool, "race", owner, CLAIM, 0, 0, c, &n, &v, &err) != DB_OK) {
            k->errors++;
            continue;
        }
        empty = n == 0 ? empty + 1 : 0;
        if (n == 0)
            continue;
        struct db_settlement s[CLAIM];
        for (size_t i = 0; i < n; i++) {
            k->got[k->n++] = c[i].id;
            s[i] = (struct db_settlement){{c[i].id, owner, c[i].fence}, NULL, DB_Q_OK};
        }
        if (round % 3 == 0) { /* a stale fence first: refused, and only that item */
            struct db_settlement bad[2] = {{{c[0].id, owner, c[0].fence + 1}, NULL, DB_Q_OK},
                                           {{c[0].id + JOBS * 10, owner, 1}, NULL, DB_Q_OK}};
            if (db_leases_complete_batch(pool, "race", bad, 2, &v, &err) != DB_OK || v != DB_Q_OK ||
                bad[0].verdict != DB_Q_FENCE_MISMATCH || bad[1].verdict != DB_Q_JOB_NOT_FOUND)
                k->errors++;
            else
                k->refused++;
        }
        if (db_leases_complete_batch(pool, "race", s, n, &v, &err) != DB_OK || v != DB_Q_OK)
            k->errors++;
        for (size_t i = 0; i < n; i++)
            k->errors += s[i].verdict != DB_Q_OK;
        db_claimed_clear(c, n);
    }
    return NULL;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void racing_claims_and_settlements_each_job_once(void **state)
{
    (void)state;
    make_queue("race", 3);
    enqueue("race", JOBS, NULL);
    struct db_leases_combined before, after;
    db_leases_combined_get(&before);
    struct racer *k = calloc(THREADS, sizeof(*k));
    for (int i = 0; i < THREADS; i++) {
        k[i].index = i;
        assert_int_equal(pthread_create(&k[i].thread, NULL, racer_main, &k[i]), 0);
    }
    int64_t *all = calloc(JOBS * 2, sizeof(*all));
    size_t n = 0;
    int refused = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(k[i].thread, NULL);
        assert_int_equal(k[i].errors, 0);
        for (size_t j = 0; j < k[i].n && n < JOBS * 2; j++)
            all[n++] = k[i].got[j];
        refused += k[i].refused;
    }
    db_leases_combined_get(&after);
    qsort(all, n, sizeof(*all), cmp_i64);
    int twice = 0;
    for (size_t i = 1; i < n; i++)
        twice += all[i] == all[i - 1];
    print_message("%zu claims of %d jobs, %d claimed twice; %llu claims in %llu transactions, "
                  "%llu settlements in %llu; %d stale settlements refused\n",
                  n, JOBS, twice, after.claims - before.claims,
                  after.claim_transactions - before.claim_transactions,
                  after.settlements - before.settlements,
                  after.settlement_transactions - before.settlement_transactions, refused);
    assert_int_equal(twice, 0);
    assert_int_equal(n, JOBS);
    assert_true(refused > 0);
    assert_true(after.claim_transactions - before.claim_transactions <
                after.claims - before.claims);
    assert_true(after.settlement_transactions - before.settlement_transactions <
                after.settlements - before.settlements);
    PGresult *r = th_sql(sql, "SELECT count(*) FILTER (WHERE j.state = 'succeeded' AND j.attempts "
                              "= 1), count(*), (SELECT count(*) FROM rowlock.job_attempt_history "
                              "h JOIN rowlock.jobs j2 ON j2.id = h.job_id WHERE j2.queue_id = "
                              "q.id AND h.outcome = 'completed') FROM rowlock.jobs j JOIN "
                              "rowlock.queues q ON q.id = j.queue_id WHERE q.name = 'race' "
                              "GROUP BY q.id");
    assert_int_equal(atoi(PQgetvalue(r, 0, 0)), JOBS);
    assert_int_equal(atoi(PQgetvalue(r, 0, 1)), JOBS);
    assert_int_equal(atoi(PQgetvalue(r, 0, 2)), JOBS);
    PQclear(r);
    free(all);
    free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(combined_claim_keeps_the_protocol),
        cmocka_unit_test(combined_settlement_refuses_only_the_bad_one),
        cmocka_unit_test(racing_claims_and_settlements_each_job_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
