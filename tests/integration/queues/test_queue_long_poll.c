/* Long-poll claims (POST /queues/{queue}/leases with wait_seconds): a claim waiting on an empty
 * queue returns within a fraction of a second of an enqueue, an idle one returns an empty lease
 * list when its wait is over, and 1,000 claims waiting at once (libcurl multi, one thread) hold
 * neither pool connections nor server threads: meanwhile /healthz and an enqueue elsewhere answer
 * at once, /metrics shows the pool below its size and the waiters counted, and one batch of 1,000
 * jobs then gives every waiter exactly one job (none twice, none refused). The first two run on a
 * second process whose periodic re-check is a minute apart, so only the in-process wake can
 * answer promptly; the crowd waits on one that re-checks every second, so 1,000 re-claims a
 * second are part of the load. */
#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "long_poll.h"

#define WAITERS 1000

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int setup(void **state)
{
    return lp_start("qlongpoll", WAITERS);
}

/* Enqueues n jobs in one request; returns the first id and the request's duration in *seconds. */
static int64_t enqueue(int port, const char *queue, int n, double *seconds)
{
    char path[128];
    size_t cap = (size_t)n * 32 + 32, o = 0;
    char *body = malloc(cap);
    o += (size_t)snprintf(body + o, cap - o, "{\"jobs\":[");
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(body + o, cap - o, "%s{\"payload\":{\"n\":%d}}", i ? "," : "", i);
    o += (size_t)snprintf(body + o, cap - o, "]}");
    struct th_response r;
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    double t0 = th_now();
    assert_int_equal(th_http(port, "POST", path, json_ct, body, o, &r), 0);
    if (seconds != NULL)
        *seconds = th_now() - t0;
    free(body);
    assert_int_equal(r.status, 201);
    json_t *jobs = json_object_get(r.json, "jobs");
    assert_int_equal(json_array_size(jobs), n);
    int64_t first = json_integer_value(json_object_get(json_array_get(jobs, 0), "id"));
    th_response_free(&r);
    return first;
}

struct claim_one {
    const char *queue;
    int wait;
    struct th_response r;
    double done_at;
};

static void *claim_main(void *arg)
{
    struct claim_one *c = arg;
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", c->queue);
    int n = snprintf(body, sizeof(body), "{\"owner\":\"w\",\"wait_seconds\":%d}", c->wait);
    th_http(lp_quiet.port, "POST", path, json_ct, body, (size_t)n, &c->r);
    c->done_at = th_now();
    return NULL;
}

static void waiting_claim_returns_promptly_after_an_enqueue(void **state)
{
    lp_create("/queues/prompt");
    struct claim_one c = {.queue = "prompt", .wait = 10};
    pthread_t t;
    double started = th_now();
    pthread_create(&t, NULL, claim_main, &c);
    assert_true(lp_await_waiting(lp_quiet.port, 1, 5) >= 1);
    usleep(300000);
    double enqueued_at = th_now();
    int64_t id = enqueue(lp_quiet.port, "prompt", 1, NULL);
    pthread_join(t, NULL);
    double latency = c.done_at - enqueued_at;
    fprintf(stderr, "the waiting claim answered %.3f s after the enqueue began (%.3f s in all)\n",
            latency, c.done_at - started);
    assert_int_equal(c.r.status, 200);
    json_t *leases = json_object_get(c.r.json, "leases");
    assert_int_equal(json_array_size(leases), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(leases, 0), "job_id")), id);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(leases, 0), "fence")), 1);
    assert_true(latency < 1.0);
    assert_true(c.done_at - started < 5.0); /* not held to the 10 s wait */
    th_response_free(&c.r);
}

static void idle_claim_returns_no_lease_when_its_wait_is_over(void **state)
{
    lp_create("/queues/idle");
    for (int wait = 0; wait <= 1; wait++) {
        struct claim_one c = {.queue = "idle", .wait = wait};
        double t0 = th_now();
        claim_main(&c);
        double took = c.done_at - t0;
        fprintf(stderr, "wait_seconds=%d on an empty queue returned after %.3f s\n", wait, took);
        assert_int_equal(c.r.status, 200);
        assert_true(json_is_array(json_object_get(c.r.json, "leases")));
        assert_int_equal(json_array_size(json_object_get(c.r.json, "leases")), 0);
        if (wait == 0) {
            assert_true(took < 0.5);
        } else {
            assert_true(took >= 0.95);
            assert_true(took < 1.5);
        }
        th_response_free(&c.r);
    }
}

/* ---- many waiting claims on one libcurl multi handle ---- */

/* Claim i: one job for its own owner, waiting up to 30 s. */
static void claim_body(int i, char *buf, size_t size)
{
    snprintf(buf, size, "{\"owner\":\"crowd-%d\",\"max_jobs\":1,\"wait_seconds\":30}", i);
}

/* While the crowd waits: /healthz and an enqueue elsewhere answer at once, the pool stays below
 * its size, and the waiters are counted. */
static void assert_service_free_while_waiting(struct th_crowd *c)
{
    lp_assert_healthz_prompt();
    double took = 0;
    enqueue(lp_svc.port, "elsewhere", 1, &took);
    fprintf(stderr, "an enqueue to another queue took %.3f s\n", took);
    assert_true(took < 1.0);
    double in_use_max = lp_pool_in_use_max();
    double waiting = th_metric(lp_svc.port, "rowlock_http_long_polls_waiting");
    fprintf(stderr, "pool in use while they wait: at most %.0f of %d; %.0f waiting\n", in_use_max,
            LP_POOL_SIZE, waiting);
    assert_true(in_use_max < LP_POOL_SIZE);
    assert_true(waiting >= WAITERS * 0.9);
    assert_int_equal(c->done, 0); /* the enqueue elsewhere woke none of them */
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Every waiter answered 200 with exactly one lease; the leases are the jobs first..first+n-1,
 * each once. Returns how many waiters got theirs. */
static int count_one_job_each(struct th_crowd *c, int64_t first)
{
    int64_t *ids = calloc(WAITERS, sizeof(*ids));
    int ok = 0;
    for (int i = 0; i < WAITERS; i++) {
        struct th_crowd_waiter *w = &c->w[i];
        json_t *j = w->body.data ? json_loads(w->body.data, 0, NULL) : NULL;
        json_t *leases = json_object_get(j, "leases");
        if (w->result == CURLE_OK && w->status == 200 && json_array_size(leases) == 1)
            ids[ok++] = json_integer_value(json_object_get(json_array_get(leases, 0), "job_id"));
        else if (i - ok < 5)
            fprintf(stderr, "waiter %d: curl %d, status %ld: %s\n", i, w->result, w->status,
                    w->body.data ? w->body.data : "");
        json_decref(j);
    }
    qsort(ids, (size_t)ok, sizeof(*ids), cmp_i64);
    int distinct = 0;
    for (int i = 0; i < ok; i++) {
        if (ids[i] < first || ids[i] >= first + WAITERS || (i > 0 && ids[i] == ids[i - 1]))
            fprintf(stderr, "job %" PRId64 " handed out twice or not one of the batch\n", ids[i]);
        else
            distinct++;
    }
    free(ids);
    return distinct;
}

static void thousand_waiting_claims_hold_no_connection_and_each_gets_one_job(void **state)
{
    lp_create("/queues/crowd");
    lp_create("/queues/elsewhere");
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/queues/crowd/leases", lp_svc.port);
    struct th_crowd *c = malloc(sizeof(*c));
    th_crowd_start(c, WAITERS, url, claim_body);
    pthread_t t;
    pthread_create(&t, NULL, th_crowd_run, c);

    double waiting = lp_await_waiting(lp_svc.port, WAITERS, 30);
    fprintf(stderr, "claims waiting: %.0f\n", waiting);
    assert_true(waiting >= WAITERS * 0.9);
    assert_service_free_while_waiting(c);

    /* one batch of WAITERS jobs: every waiter gets exactly one */
    double took = 0, enqueued_at = th_now();
    int64_t first = enqueue(lp_svc.port, "crowd", WAITERS, &took);
    fprintf(stderr, "the waking enqueue of %d jobs took %.3f s\n", WAITERS, took);
    pthread_join(t, NULL);
    double last = 0;
    for (int i = 0; i < WAITERS; i++)
        last = c->w[i].done_at > last ? c->w[i].done_at : last;
    int got = count_one_job_each(c, first);
    fprintf(stderr,
            "%d of %d waiting claims got one job each; the last %.3f s after the enqueue "
            "began\n",
            got, WAITERS, last - enqueued_at);
    assert_int_equal(c->failed, 0);
    assert_int_equal(got, WAITERS);
    assert_true(last - enqueued_at < 10.0);
    th_crowd_free(c);
    free(c);
    assert_true(lp_await_waiting(lp_svc.port, 0, 0) == 0);
    assert_true(th_metric(lp_svc.port, "rowlock_db_pool_acquire_timeouts_total") == 0);
    /* and the queue agrees: all of them processing, none pending */
    struct th_response r;
    assert_int_equal(th_http(lp_svc.port, "GET", "/queues/crowd", NULL, NULL, 0, &r), 0);
    json_t *counts = json_object_get(r.json, "counts");
    assert_int_equal(json_integer_value(json_object_get(counts, "processing")), WAITERS);
    assert_int_equal(json_integer_value(json_object_get(counts, "pending")), 0);
    th_response_free(&r);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiting_claim_returns_promptly_after_an_enqueue),
        cmocka_unit_test(idle_claim_returns_no_lease_when_its_wait_is_over),
        cmocka_unit_test(thousand_waiting_claims_hold_no_connection_and_each_gets_one_job),
    };
    int rc = cmocka_run_group_tests(tests, setup, lp_teardown);
    curl_global_cleanup();
    return rc;
}
