/* DELETE of a topic, a ledger and a queue frees what it held: after it, the rowlock
 * schema holds exactly the relations it held before the resource was created (its generated
 * tables, indexes and sequences are dropped), a queue's jobs, bodies and attempt history are
 * gone, its janitor row is gone, its name answers 404 and can be created again, empty. A second
 * DELETE is 404. A queue with a job in processing is refused (409 queue_busy, nothing changed)
 * unless forced, also when the claim is still running as the DELETE starts: the interleaving
 * "claim locked the job, DELETE begins, claim commits" must end in 409, never in a deleted
 * job its claimer was told it holds (queue_delete_after_claim_in_flight); an enqueue that meets
 * a DELETE answers 404, and a claim waiting on the queue is woken to answer 404
 * (enqueue_and_waiting_claim_meet_a_delete); and real claims racing DELETEs never hold a lease on
 * a queue that is gone (claim_races_delete). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static long long count(const char *sql)
{
    PGresult *r = th_sql(th_svc_pg(), sql);
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static long long relations(void)
{
    return count("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                 "WHERE n.nspname = 'rowlock'");
}

static void topic_delete_frees_its_tables(void **state)
{
    (void)state;
    long long before = relations();
    json_decref(th_svc_call("PUT", "/topics/gone", "{}", 201));
    json_decref(th_svc_call("POST", "/topics/gone/messages", "{\"key\":\"k\",\"value\":1}", 201));
    assert_true(relations() > before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.upkeep WHERE family = 'topics'"), 1);
    json_decref(th_svc_call("DELETE", "/topics/gone", NULL, 200));
    assert_int_equal(relations(), before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.upkeep WHERE family = 'topics'"), 0);
    json_decref(th_svc_call("GET", "/topics/gone", NULL, 404));
    json_decref(th_svc_call("DELETE", "/topics/gone", NULL, 404));
    json_decref(th_svc_call("PUT", "/topics/gone", "{}", 201));
    json_t *page = th_svc_call("GET", "/topics/gone/messages?after=0", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 0);
    json_decref(page);
    json_decref(th_svc_call("DELETE", "/topics/gone", NULL, 200));
}

static void ledger_delete_frees_its_tables(void **state)
{
    (void)state;
    long long before = relations();
    json_decref(th_svc_call("PUT", "/ledgers/gone", "{}", 201));
    assert_true(relations() > before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.upkeep WHERE family = 'ledgers'"), 1);
    json_t *d = th_svc_call("DELETE", "/ledgers/gone", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(d, "name")), "gone");
    assert_true(json_is_true(json_object_get(d, "deleted")));
    json_decref(d);
    assert_int_equal(relations(), before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.upkeep WHERE family = 'ledgers'"), 0);
    json_decref(th_svc_call("GET", "/ledgers/gone", NULL, 404));
    json_decref(th_svc_call("DELETE", "/ledgers/gone", NULL, 404));
    json_decref(th_svc_call("DELETE", "/ledgers/bad%20name", NULL, 400));
    json_decref(th_svc_call("PUT", "/ledgers/gone", "{}", 201));
    json_t *l = th_svc_call("GET", "/ledgers/gone", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(l, "watermark")), 0);
    json_decref(l);
}

/* Rows left of queue id qid's jobs, bodies and attempt history (ids in jobs_ids, a SQL array). */
static long long queue_leftovers(const char *qid, const char *job_ids)
{
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT (SELECT count(*) FROM rowlock.jobs WHERE queue_id = %s) + (SELECT count(*) "
             "FROM rowlock.job_bodies WHERE job_id = ANY ('%s')) + (SELECT count(*) FROM "
             "rowlock.job_attempts WHERE job_id = ANY ('%s'))",
             qid, job_ids, job_ids);
    return count(sql);
}

static char *sql_text(const char *sql)
{
    PGresult *r = th_sql(th_svc_pg(), sql);
    char *v = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

static json_t *claim_one(const char *queue, const char *owner, long want)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":1}", owner);
    return th_svc_call("POST", path, body, want);
}

static void queue_delete_frees_everything(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/gone", "{\"backoff_base_seconds\":0}", 201));
    json_decref(th_svc_call(
        "POST", "/queues/gone/jobs",
        "{\"jobs\":[{\"payload\":1,\"priority\":9},{\"payload\":2,\"dedupe_key\":\"d\"},"
        "{\"payload\":3}]}",
        201));
    /* an attempt that failed and was claimed again leaves a row in the attempt history */
    json_t *c = claim_one("gone", "w", 200);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/gone/leases/%lld/fail",
             (long long)json_integer_value(json_object_get(l, "job_id")));
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld,\"retry\":true}",
             (long long)json_integer_value(json_object_get(l, "fence")));
    json_decref(th_svc_call("POST", path, body, 200));
    json_decref(c);
    json_decref(claim_one("gone", "w", 200));
    assert_int_equal(count("SELECT count(*) FROM rowlock.job_attempts"), 1);
    char *qid = sql_text("SELECT id FROM rowlock.queues WHERE name = 'gone'");
    char *ids = sql_text("SELECT array_agg(id)::text FROM rowlock.jobs");
    assert_int_equal(queue_leftovers(qid, ids), 3 + 3 + 1);
    /* a job in processing: refused, nothing changed */
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "DELETE", "/queues/gone", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 409, "queue_busy");
    th_response_free(&r);
    assert_int_equal(queue_leftovers(qid, ids), 3 + 3 + 1);
    json_decref(th_svc_call("DELETE", "/queues/gone?force=yes", NULL, 400));
    json_t *d = th_svc_call("DELETE", "/queues/gone?force=true", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(d, "processing_deleted")), 1);
    assert_true(json_is_true(json_object_get(d, "deleted")));
    json_decref(d);
    assert_int_equal(queue_leftovers(qid, ids), 0);
    assert_int_equal(count("SELECT count(*) FROM rowlock.queues WHERE name = 'gone'"), 0);
    char upkeep[128];
    snprintf(upkeep, sizeof(upkeep),
             "SELECT count(*) FROM rowlock.upkeep WHERE family = 'queues' AND resource_id = %s",
             qid);
    assert_int_equal(count(upkeep), 0);
    json_decref(th_svc_call("GET", "/queues/gone", NULL, 404));
    json_decref(th_svc_call("DELETE", "/queues/gone", NULL, 404));
    json_decref(th_svc_call("DELETE", "/queues/bad%20name", NULL, 400));
    json_decref(th_svc_call("POST", "/queues/gone/jobs", "{\"payload\":4}", 404));
    /* created again: empty; with pending jobs only, a plain DELETE goes through */
    json_decref(th_svc_call("PUT", "/queues/gone", "{}", 201));
    json_t *q = th_svc_call("GET", "/queues/gone", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "counts"), "pending")),
                     0);
    json_decref(q);
    json_decref(th_svc_call("POST", "/queues/gone/jobs", "{\"payload\":5}", 201));
    json_decref(th_svc_call("DELETE", "/queues/gone", NULL, 200));
    assert_int_equal(count("SELECT count(*) FROM rowlock.jobs"), 0);
    free(qid);
    free(ids);
}

struct delete_call {
    const char *path;
    struct th_response r;
    int done;
};

static void *delete_thread(void *arg)
{
    struct delete_call *d = arg;
    if (th_http(th_svc.port, "DELETE", d->path, NULL, NULL, 0, &d->r) != 0)
        d->r.status = -1;
    __atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The interleaving forced: a claim has locked and updated the queue's one job (the test's own
 * transaction, doing what a claim's UPDATE does), the DELETE starts, the claim commits. The
 * DELETE must wait for the claim and then refuse: the job is its claimer's. */
static void queue_delete_after_claim_in_flight(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/inflight", "{}", 201));
    json_decref(th_svc_call("POST", "/queues/inflight/jobs", "{\"payload\":1}", 201));
    PGconn *claim = th_pg(th_svc_dburl);
    PQclear(th_sql(claim, "BEGIN"));
    PQclear(th_sql(claim,
                   "UPDATE rowlock.jobs SET state = 'processing', owner = 'w', fence = fence + 1, "
                   "attempts = attempts + 1, lease_expires_at = now() + interval '1 minute', "
                   "claimable_at = now() + interval '1 minute', attempt_no = attempts + 1, "
                   "attempt_owner = 'w', attempt_claimed_at = now(), attempt_ended_at = NULL, "
                   "attempt_outcome = NULL, updated_at = now() WHERE queue_id = (SELECT id "
                   "FROM rowlock.queues WHERE name = 'inflight')"));
    struct delete_call d = {"/queues/inflight", {0}, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, delete_thread, &d), 0);
    usleep(500 * 1000);
    int answered_early = __atomic_load_n(&d.done, __ATOMIC_SEQ_CST);
    PQclear(th_sql(claim, "COMMIT"));
    PQfinish(claim);
    pthread_join(t, NULL);
    assert_false(answered_early); /* it waited for the claim's lock */
    th_assert_problem(&d.r, 409, "queue_busy");
    th_response_free(&d.r);
    assert_int_equal(count("SELECT count(*) FROM rowlock.jobs WHERE state = 'processing'"), 1);
    json_decref(th_svc_call("DELETE", "/queues/inflight?force=true", NULL, 200));
}

struct http_call {
    const char *method, *path, *body;
    struct th_response r;
    int done;
    double seconds;
};

static void *http_thread(void *arg)
{
    struct http_call *h = arg;
    static const char *const json[] = {"Content-Type: application/json", NULL};
    double t0 = th_now();
    if (th_http(th_svc.port, h->method, h->path, h->body ? json : NULL, h->body,
                h->body ? strlen(h->body) : 0, &h->r) != 0)
        h->r.status = -1;
    h->seconds = th_now() - t0;
    __atomic_store_n(&h->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* The interleaving forced: a DELETE has locked the queue's row (the test's own transaction,
 * doing what the DELETE's first statement does), an enqueue's lock of that row (FOR KEY SHARE,
 * what keeps a job out of a deleted queue: the jobs have no foreign key) waits for it, the
 * DELETE deletes the queue and commits. The enqueue must answer 404 queue_not_found, not a 500
 * nor a 201, and leave nothing. A claim waiting on the queue (long-poll) is woken by a DELETE and
 * answers 404 at once, not at the end of its wait. */
static void enqueue_and_waiting_claim_meet_a_delete(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/late", "{}", 201));
    json_decref(th_svc_call("POST", "/queues/late/jobs", "{\"payload\":0}", 201));
    PGconn *del = th_pg(th_svc_dburl);
    PQclear(th_sql(del, "BEGIN"));
    PQclear(th_sql(del, "SELECT id FROM rowlock.queues WHERE name = 'late' FOR UPDATE"));
    struct http_call e = {"POST", "/queues/late/jobs", "{\"payload\":1}", {0}, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, http_thread, &e), 0);
    usleep(500 * 1000);
    int answered_early = __atomic_load_n(&e.done, __ATOMIC_SEQ_CST);
    PQclear(th_sql(del, "DELETE FROM rowlock.jobs WHERE queue_id = (SELECT id FROM "
                        "rowlock.queues WHERE name = 'late')"));
    PQclear(th_sql(del, "DELETE FROM rowlock.queues WHERE name = 'late'"));
    PQclear(th_sql(del, "COMMIT"));
    PQfinish(del);
    pthread_join(t, NULL);
    if (answered_early)
        fail_msg("the enqueue answered %ld before the DELETE committed: %s", e.r.status,
                 e.r.body ? e.r.body : "");
    th_assert_problem(&e.r, 404, "queue_not_found");
    th_response_free(&e.r);
    assert_int_equal(count("SELECT count(*) FROM rowlock.jobs j WHERE NOT EXISTS (SELECT 1 "
                           "FROM rowlock.queues q WHERE q.id = j.queue_id)"),
                     0);

    json_decref(th_svc_call("PUT", "/queues/late", "{}", 201));
    struct http_call w = {
        "POST", "/queues/late/leases", "{\"owner\":\"w\",\"wait_seconds\":20}", {0}, 0, 0};
    assert_int_equal(pthread_create(&t, NULL, http_thread, &w), 0);
    usleep(300 * 1000);
    json_decref(th_svc_call("DELETE", "/queues/late", NULL, 200));
    pthread_join(t, NULL);
    th_assert_problem(&w.r, 404, "queue_not_found");
    th_response_free(&w.r);
    if (w.seconds > 3)
        fail_msg("the waiting claim answered %.1f s after it started, not at the DELETE",
                 w.seconds);
}

#define CLAIMERS 4
#define ROUNDS   12

struct claimer {
    int id;
    int claimed; /* jobs this claimer was answered 200 for, this round */
    int64_t job; /* one of them */
};

static void *claimer_thread(void *arg)
{
    struct claimer *c = arg;
    char body[64];
    snprintf(body, sizeof(body), "{\"owner\":\"c%d\",\"max_jobs\":1}", c->id);
    json_t *j = json_loads(body, 0, NULL);
    for (int i = 0; i < 5000; i++) {
        struct th_response r;
        if (th_http_json(th_svc.port, "POST", "/queues/race/leases", j, &r) != 0)
            continue;
        long status = r.status;
        json_t *leases = r.json ? json_object_get(r.json, "leases") : NULL;
        if (status == 200 && json_array_size(leases) > 0) {
            __atomic_store_n(
                &c->job, json_integer_value(json_object_get(json_array_get(leases, 0), "job_id")),
                __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&c->claimed, (int)json_array_size(leases), __ATOMIC_SEQ_CST);
        }
        th_response_free(&r);
        if (status == 404)
            break;
    }
    json_decref(j);
    return NULL;
}

/* Claimers poll a queue whose jobs come due about when the DELETE runs. A DELETE that answers
 * 200 without force means no claim was answered a job; one that answers 409 means each job
 * claimed is still there, processing, for its claimer. Either way nothing of the queue is left
 * once it is gone, and every claimer ends with 404. */
static void claim_races_delete(void **state)
{
    (void)state;
    int deleted = 0, refused = 0;
    for (int round = 0; round < ROUNDS; round++) {
        json_decref(th_svc_call("PUT", "/queues/race", "{}", 201));
        json_decref(th_svc_call("POST", "/queues/race/jobs",
                                "{\"jobs\":[{\"payload\":1,\"delay_seconds\":0.3},"
                                "{\"payload\":2,\"delay_seconds\":0.3}]}",
                                201));
        struct claimer c[CLAIMERS];
        pthread_t t[CLAIMERS];
        for (int i = 0; i < CLAIMERS; i++) {
            c[i] = (struct claimer){i, 0, 0};
            assert_int_equal(pthread_create(&t[i], NULL, claimer_thread, &c[i]), 0);
        }
        usleep((useconds_t)(280 + (round % 6) * 8) * 1000);
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, "DELETE", "/queues/race", NULL, NULL, 0, &r), 0);
        long status = r.status;
        if (status == 409)
            th_assert_problem(&r, 409, "queue_busy");
        th_response_free(&r);
        if (status == 409) {
            refused++;
            for (int i = 0; i < CLAIMERS; i++) {
                if (__atomic_load_n(&c[i].claimed, __ATOMIC_SEQ_CST) == 0)
                    continue;
                char sql[160];
                snprintf(sql, sizeof(sql),
                         "SELECT count(*) FROM rowlock.jobs WHERE id = %lld AND "
                         "state = 'processing' AND owner = 'c%d'",
                         (long long)__atomic_load_n(&c[i].job, __ATOMIC_SEQ_CST), i);
                assert_int_equal(count(sql), 1);
            }
            json_decref(th_svc_call("DELETE", "/queues/race?force=true", NULL, 200));
        } else {
            assert_int_equal(status, 200);
            deleted++;
        }
        for (int i = 0; i < CLAIMERS; i++)
            pthread_join(t[i], NULL);
        int claimed = 0;
        for (int i = 0; i < CLAIMERS; i++)
            claimed += c[i].claimed;
        if (status == 200 && claimed > 0)
            fail_msg("round %d: DELETE answered 200 without force, yet %d jobs were claimed", round,
                     claimed);
        assert_int_equal(count("SELECT count(*) FROM rowlock.jobs j WHERE NOT EXISTS (SELECT 1 "
                               "FROM rowlock.queues q WHERE q.id = j.queue_id)"),
                         0);
        assert_int_equal(count("SELECT count(*) FROM rowlock.job_bodies b WHERE NOT EXISTS "
                               "(SELECT 1 FROM rowlock.jobs j WHERE j.id = b.job_id)"),
                         0);
        assert_int_equal(count("SELECT count(*) FROM rowlock.job_attempts a WHERE NOT EXISTS "
                               "(SELECT 1 FROM rowlock.jobs j WHERE j.id = a.job_id)"),
                         0);
        assert_int_equal(count("SELECT count(*) FROM rowlock.queues WHERE name = 'race'"), 0);
    }
    print_message("claim_races_delete: %d deleted at once, %d refused (then forced)\n", deleted,
                  refused);
}

static int setup(void **state)
{
    (void)state;
    /* a long-poll's periodic re-check a minute apart: only a wake-up answers it sooner */
    static const char *const env[] = {"ROWLOCK_POLL_INTERVAL_MS=60000", NULL};
    return th_svc_start("resource_delete", env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(topic_delete_frees_its_tables),
        cmocka_unit_test(ledger_delete_frees_its_tables),
        cmocka_unit_test(queue_delete_frees_everything),
        cmocka_unit_test(queue_delete_after_claim_in_flight),
        cmocka_unit_test(enqueue_and_waiting_claim_meet_a_delete),
        cmocka_unit_test(claim_races_delete),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
