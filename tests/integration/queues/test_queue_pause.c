/* Pausing a queue. Three rowlock processes on one database, their long-polls re-checked only
 * every 5 s. A paused queue accepts enqueues and hands out nothing; its leases already held go on
 * (heartbeat, complete); GET, the list and /metrics say it is paused and since when; pausing
 * again keeps that time, a PUT leaves the pause in place, and bad names and unknown queues are
 * refused. Under a storm of batch claims from every process, no claim sent after the pause was
 * answered gets a job, and every job stays pending (with the claims' check of the pause removed,
 * the storm takes them). A long-poll waiting on one process for a paused queue is answered on
 * another's resume by the wake-up, not by its re-check: within 100 ms in the median of the
 * rounds, and every round far below the re-check's 5 s. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define PROCESSES   3
#define CLAIMERS    12
#define STORM_JOBS  3000
#define WAKE_ROUNDS 9
/* The storm queue's jobs, a WHERE clause to complete */
#define STORM_JOBS_SQL                                                                             \
    "SELECT count(*) FROM rowlock.jobs WHERE queue_id = (SELECT id FROM rowlock.queues WHERE "     \
    "name = 'storm') AND "

static struct th_service svc[PROCESSES];

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", NULL};
    if (th_svc_db("qpause") != 0)
        return -1;
    for (int i = 0; i < PROCESSES; i++)
        if (th_service_start(&svc[i], th_svc_dburl, env) != 0)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    int r = 0;
    for (int i = 0; i < PROCESSES; i++)
        r |= th_service_stop(&svc[i]);
    return r == 0 ? th_svc_teardown(state) : -1;
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s", member);
    return json_integer_value(v);
}

/* The queue's paused member through port, and its paused_at into at (size 64; "" when null). */
static int paused(int port, const char *queue, char *at)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_t *q = th_get_json(port, path);
    json_t *p = json_object_get(q, "paused");
    assert_true(json_is_boolean(p));
    const char *t = json_string_value(json_object_get(q, "paused_at"));
    snprintf(at, 64, "%s", t ? t : "");
    int on = json_is_true(p);
    assert_int_equal(on, t != NULL);
    json_decref(q);
    return on;
}

static void pause_resume_and_what_goes_on(void **state)
{
    (void)state;
    const int p0 = svc[0].port, p1 = svc[1].port;
    char at[64], again[64];
    json_decref(th_call(p0, "PUT", "/queues/pz", "{\"lease_seconds\":60}", 201));
    json_decref(th_call(p0, "POST", "/queues/pz/jobs",
                        "{\"jobs\":[{\"payload\":1},{\"payload\":2}]}", 201));
    json_t *c = th_call(p0, "POST", "/queues/pz/leases", "{\"owner\":\"w\",\"max_jobs\":1}", 200);
    json_t *lease = json_array_get(json_object_get(c, "leases"), 0);
    json_int_t held = int_at(lease, "job_id"), fence = int_at(lease, "fence");
    json_decref(c);
    assert_false(paused(p1, "pz", at));

    json_t *q = th_call(p1, "POST", "/queues/pz/pause", NULL, 200);
    assert_true(json_is_true(json_object_get(q, "paused")));
    json_decref(q);
    assert_true(paused(p0, "pz", at));
    usleep(20 * 1000);
    json_decref(th_call(p0, "POST", "/queues/pz/pause", NULL, 200)); /* again: the same time */
    assert_true(paused(p0, "pz", again));
    assert_string_equal(at, again);
    /* a PUT of the configuration leaves the pause as it was */
    json_decref(th_call(p0, "PUT", "/queues/pz", "{\"lease_seconds\":60,\"max_attempts\":4}", 200));
    assert_true(paused(p1, "pz", again));
    assert_string_equal(at, again);
    /* the list says so too */
    json_t *l = th_get_json(p1, "/queues");
    json_t *first = json_array_get(json_object_get(l, "queues"), 0);
    assert_non_null(first);
    assert_true(json_is_true(json_object_get(first, "paused")));
    json_decref(l);

    /* enqueues go on, claims hand out nothing, from any process */
    json_decref(th_call(p1, "POST", "/queues/pz/jobs", "{\"payload\":3}", 201));
    for (int i = 0; i < PROCESSES; i++) {
        c = th_call(svc[i].port, "POST", "/queues/pz/leases", "{\"owner\":\"w2\",\"max_jobs\":5}",
                    200);
        assert_int_equal(json_array_size(json_object_get(c, "leases")), 0);
        json_decref(c);
    }
    /* the lease held goes on: a heartbeat and its completion */
    char path[128], body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
    snprintf(path, sizeof(path), "/queues/pz/leases/%" JSON_INTEGER_FORMAT, held);
    json_decref(th_call(p1, "PATCH", path, body, 200));
    snprintf(path, sizeof(path), "/queues/pz/leases/%" JSON_INTEGER_FORMAT "/complete", held);
    json_decref(th_call(p0, "POST", path, body, 200));

    /* /metrics: paused, and since when (a whole second at or before paused_at) */
    assert_true(th_metric(p1, "rowlock_queue_paused{queue=\"pz\"}") == 1);
    double since = th_metric(p1, "rowlock_queue_paused_since_timestamp_seconds{queue=\"pz\"}");
    assert_true(since > 1.7e9);

    /* resumed: the claims take the jobs, the metric says 0 and the time is gone */
    q = th_call(p0, "POST", "/queues/pz/resume", NULL, 200);
    assert_true(json_is_false(json_object_get(q, "paused")));
    assert_true(json_is_null(json_object_get(q, "paused_at")));
    json_decref(q);
    json_decref(th_call(p1, "POST", "/queues/pz/resume", NULL, 200)); /* again: nothing changes */
    assert_false(paused(p1, "pz", at));
    c = th_call(p1, "POST", "/queues/pz/leases", "{\"owner\":\"w2\",\"max_jobs\":5}", 200);
    assert_int_equal(json_array_size(json_object_get(c, "leases")), 2);
    json_decref(c);
    assert_true(th_metric(p0, "rowlock_queue_paused{queue=\"pz\"}") == 0);
    assert_true(th_metric(p0, "rowlock_queue_paused_since_timestamp_seconds{queue=\"pz\"}") < 0);

    /* refusals change nothing */
    struct th_response r;
    assert_int_equal(th_http(p0, "POST", "/queues/nope/pause", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "queue_not_found");
    th_response_free(&r);
    assert_int_equal(th_http(p0, "POST", "/queues/nope/resume", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "queue_not_found");
    th_response_free(&r);
    assert_int_equal(th_http(p0, "POST", "/queues/bad%20name/pause", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 400, "invalid_name");
    th_response_free(&r);
    assert_int_equal(th_http(p0, "GET", "/queues/pz/pause", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 405);
    th_response_free(&r);
    assert_false(paused(p0, "pz", at));
}

/* One claimer of the storm: batch claims from its process until told to stop, each recorded
 * with when it was sent. */
struct claimer {
    int port;
    int id;
    atomic_int *stop;
    double sent_last_job; /* when the last claim that got a job was sent */
    long jobs;
};

static void *claimer(void *arg)
{
    struct claimer *c = arg;
    static const char *const json[] = {"Content-Type: application/json", NULL};
    char body[64];
    snprintf(body, sizeof(body), "{\"owner\":\"s%d\",\"max_jobs\":2,\"lease_seconds\":600}", c->id);
    while (!atomic_load(c->stop)) {
        double sent = th_now();
        struct th_response r;
        if (th_http(c->port, "POST", "/queues/storm/leases", json, body, strlen(body), &r) != 0)
            continue;
        if (r.status == 200) {
            json_t *j = json_loads(r.body, 0, NULL);
            size_t n = json_array_size(json_object_get(j, "leases"));
            if (n > 0) {
                c->jobs += (long)n;
                c->sent_last_job = sent;
            }
            json_decref(j);
        }
        th_response_free(&r);
    }
    return NULL;
}

/* A storm of claims from every process meets the pause: once the pause is answered, no claim
 * sent after it gets a job; the jobs left stay pending until the resume. */
static void a_paused_queue_hands_out_nothing_under_a_storm(void **state)
{
    (void)state;
    json_decref(th_call(svc[0].port, "PUT", "/queues/storm", "{}", 201));
    /* paused before the storm: nothing at all is handed out */
    json_decref(th_call(svc[1].port, "POST", "/queues/storm/pause", NULL, 200));
    for (int from = 0; from < STORM_JOBS; from += 1000) { /* 1,000 jobs a request at most */
        char batch[1000 * 24 + 32];
        size_t len = (size_t)snprintf(batch, sizeof(batch), "{\"jobs\":[");
        for (int i = from; i < from + 1000 && i < STORM_JOBS; i++)
            len += (size_t)snprintf(batch + len, sizeof(batch) - len, "%s{\"payload\":%d}",
                                    i > from ? "," : "", i);
        snprintf(batch + len, sizeof(batch) - len, "]}");
        json_decref(th_call(svc[2].port, "POST", "/queues/storm/jobs", batch, 201));
    }
    atomic_int stop = 0;
    struct claimer c[CLAIMERS];
    pthread_t t[CLAIMERS];
    for (int i = 0; i < CLAIMERS; i++) {
        c[i] = (struct claimer){svc[i % PROCESSES].port, i, &stop, 0, 0};
        assert_int_equal(pthread_create(&t[i], NULL, claimer, &c[i]), 0);
    }
    usleep(700 * 1000);
    long before = 0;
    for (int i = 0; i < CLAIMERS; i++)
        before += c[i].jobs; /* (read racily: only to say so below) */
    assert_int_equal(th_svc_sql_int(STORM_JOBS_SQL "state <> 'pending'"), 0);
    /* resumed, the storm takes some; paused again, it takes no more */
    json_decref(th_call(svc[0].port, "POST", "/queues/storm/resume", NULL, 200));
    int64_t taken = 0; /* until the storm has taken some, however slow the machine */
    for (int i = 0; i < 6000 && taken == 0; i++) {
        usleep(5 * 1000);
        taken = th_svc_sql_int(STORM_JOBS_SQL "state = 'processing'");
    }
    json_decref(th_call(svc[2].port, "POST", "/queues/storm/pause", NULL, 200));
    double paused_at = th_now();
    usleep(700 * 1000);
    atomic_store(&stop, 1);
    long jobs = 0;
    for (int i = 0; i < CLAIMERS; i++) {
        pthread_join(t[i], NULL);
        jobs += c[i].jobs;
        if (c[i].sent_last_job > paused_at)
            fail_msg("claimer %d on port %d got a job from a claim sent %.3f s after the pause "
                     "was answered",
                     i, c[i].port, c[i].sent_last_job - paused_at);
    }
    assert_int_equal(before, 0);
    assert_true(jobs > 0 && jobs < STORM_JOBS);
    /* every job handed out is held (leases of 600 s), each by one claim */
    assert_int_equal(th_svc_sql_int(STORM_JOBS_SQL "state <> 'pending'"), jobs);
    assert_int_equal(th_svc_sql_int(STORM_JOBS_SQL "state = 'pending'"), STORM_JOBS - jobs);
    json_decref(th_call(svc[0].port, "DELETE", "/queues/storm?force=true", NULL, 200));
}

/* A long-poll on one process, on a paused queue with a job due. */
struct waiter {
    int port;
    double answered;
    size_t leases;
};

static void *wait_claim(void *arg)
{
    struct waiter *w = arg;
    static const char *const json[] = {"Content-Type: application/json", NULL};
    static const char body[] = "{\"owner\":\"waiter\",\"max_jobs\":1,\"wait_seconds\":20}";
    struct th_response r;
    if (th_http(w->port, "POST", "/queues/wake/leases", json, body, strlen(body), &r) == 0) {
        w->answered = th_now();
        json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
        w->leases = json_array_size(json_object_get(j, "leases"));
        json_decref(j);
        th_response_free(&r);
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void a_resume_on_another_process_answers_the_long_poll(void **state)
{
    (void)state;
    json_decref(th_call(svc[0].port, "PUT", "/queues/wake", "{}", 201));
    double took[WAKE_ROUNDS];
    for (int round = 0; round < WAKE_ROUNDS; round++) {
        const int waits = svc[round % PROCESSES].port, resumes = svc[(round + 1) % PROCESSES].port;
        json_decref(th_call(resumes, "POST", "/queues/wake/pause", NULL, 200));
        json_decref(th_call(resumes, "POST", "/queues/wake/jobs", "{\"payload\":1}", 201));
        struct waiter w = {waits, 0, 0};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_claim, &w), 0);
        /* the claim is waiting once the process counts it */
        for (int i = 0; i < 500 && th_metric(waits, "rowlock_http_long_polls_waiting") < 1; i++)
            usleep(10 * 1000);
        assert_true(th_metric(waits, "rowlock_http_long_polls_waiting") >= 1);
        usleep(100 * 1000); /* and it stays waiting: the queue is paused */
        assert_true(w.answered == 0);
        json_decref(th_call(resumes, "POST", "/queues/wake/resume", NULL, 200));
        double resumed = th_now();
        pthread_join(t, NULL);
        assert_int_equal(w.leases, 1);
        took[round] = w.answered - resumed;
        fprintf(stderr, "round %d: answered %.1f ms after the resume's answer\n", round,
                took[round] * 1000);
        if (took[round] > 2.0)
            fail_msg("the long-poll answered %.2f s after the resume: by its re-check, not woken",
                     took[round]);
    }
    qsort(took, WAKE_ROUNDS, sizeof(took[0]), by_value);
    fprintf(stderr, "median %.1f ms\n", took[WAKE_ROUNDS / 2] * 1000);
    assert_true(took[WAKE_ROUNDS / 2] < 0.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pause_resume_and_what_goes_on),
        cmocka_unit_test(a_paused_queue_hands_out_nothing_under_a_storm),
        cmocka_unit_test(a_resume_on_another_process_answers_the_long_poll),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
