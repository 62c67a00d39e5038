/* Long-polled log reads (GET /topics/{topic}/messages?wait=): a waiting read returns within a
 * fraction of a second of a produce, an idle one returns empty when its wait is over, and 1,000
 * reads waiting at once (libcurl multi, one process) hold neither pool connections nor server
 * threads: meanwhile /healthz and a produce answer at once, /metrics shows the pool nearly idle
 * and the waiters counted, and one produce then wakes every one of them with the message. The
 * first two run on a second process whose periodic re-check is a minute apart, so only the
 * in-process wake can answer promptly; the crowd waits on one that re-checks every second, so
 * 1,000 re-reads a second are part of the load. */
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

#define POLLERS 1000

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int setup(void **state)
{
    return lp_start("longpoll", POLLERS);
}

/* Produces one message; returns its offset and the request's duration in *seconds. */
static int64_t produce(int port, const char *topic, const char *key, double *seconds)
{
    char path[128], body[128];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/messages", topic);
    int n = snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":{\"hello\":1}}", key);
    double t0 = th_now();
    assert_int_equal(th_http(port, "POST", path, json_ct, body, (size_t)n, &r), 0);
    if (seconds != NULL)
        *seconds = th_now() - t0;
    assert_int_equal(r.status, 201);
    int64_t off = json_integer_value(json_object_get(r.json, "offset"));
    th_response_free(&r);
    return off;
}

struct poll_one {
    const char *path;
    struct th_response r;
    double done_at;
};

static void *poll_main(void *arg)
{
    struct poll_one *p = arg;
    th_http(lp_quiet.port, "GET", p->path, NULL, NULL, 0, &p->r);
    p->done_at = th_now();
    return NULL;
}

static void waiting_read_returns_promptly_after_a_produce(void **state)
{
    lp_create("/topics/prompt");
    struct poll_one p = {.path = "/topics/prompt/messages?after=0&wait=10"};
    pthread_t t;
    double started = th_now();
    pthread_create(&t, NULL, poll_main, &p);
    assert_true(lp_await_waiting(lp_quiet.port, 1, 5) >= 1);
    usleep(300000);
    double produced_at = th_now();
    assert_int_equal(produce(lp_quiet.port, "prompt", "k", NULL), 1);
    pthread_join(t, NULL);
    double latency = p.done_at - produced_at;
    fprintf(stderr, "long-poll answered %.3f s after the produce began (%.3f s in all)\n", latency,
            p.done_at - started);
    assert_int_equal(p.r.status, 200);
    json_t *msgs = json_object_get(p.r.json, "messages");
    assert_int_equal(json_array_size(msgs), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(msgs, 0), "offset")), 1);
    assert_int_equal(json_integer_value(json_object_get(p.r.json, "next")), 1);
    assert_true(latency < 1.0);
    assert_true(p.done_at - started < 5.0); /* not held to the 10 s wait */
    th_response_free(&p.r);
}

static void idle_read_returns_empty_when_its_wait_is_over(void **state)
{
    lp_create("/topics/idle");
    struct th_response r;
    for (int wait = 0; wait <= 1; wait++) {
        char path[128];
        snprintf(path, sizeof(path), "/topics/idle/messages?after=0&wait=%d", wait);
        double t0 = th_now();
        assert_int_equal(th_http(lp_quiet.port, "GET", path, NULL, NULL, 0, &r), 0);
        double took = th_now() - t0;
        fprintf(stderr, "wait=%d on an idle topic returned after %.3f s\n", wait, took);
        assert_int_equal(r.status, 200);
        assert_int_equal(json_array_size(json_object_get(r.json, "messages")), 0);
        assert_int_equal(json_integer_value(json_object_get(r.json, "next")), 0);
        if (wait == 0) {
            assert_true(took < 0.5);
        } else {
            assert_true(took >= 0.95);
            assert_true(took < 1.5);
        }
        th_response_free(&r);
    }
}

/* ---- many waiters on one libcurl multi handle ---- */

static void thousand_waiting_reads_hold_no_connection_and_all_wake(void **state)
{
    lp_create("/topics/crowd");
    lp_create("/topics/elsewhere");
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/topics/crowd/messages?after=0&wait=30",
             lp_svc.port);
    struct th_crowd *c = malloc(sizeof(*c));
    th_crowd_start(c, POLLERS, url, NULL);
    pthread_t t;
    pthread_create(&t, NULL, th_crowd_run, c);

    double waiting = lp_await_waiting(lp_svc.port, POLLERS, 30);
    fprintf(stderr, "long-polls waiting: %.0f\n", waiting);
    assert_true(waiting >= POLLERS * 0.98);

    /* while they wait: answers come at once, and the pool is nearly idle */
    lp_assert_healthz_prompt();
    double took = 0;
    assert_int_equal(produce(lp_svc.port, "elsewhere", "k", &took), 1);
    fprintf(stderr, "a produce to another topic took %.3f s\n", took);
    assert_true(took < 1.0);
    double in_use_max = lp_pool_in_use_max();
    fprintf(stderr, "pool in use while they wait: at most %.0f of %d\n", in_use_max, LP_POOL_SIZE);
    /* waiters that held connections would pin all 16 (and time out acquires); the once-a-second
     * re-read of every waiter borrows a few, briefly */
    assert_true(in_use_max <= LP_POOL_SIZE / 2);
    assert_true(th_metric(lp_svc.port, "rowlock_db_pool_acquire_timeouts_total") == 0);
    /* (sampled between re-reads: each resumes its waiters for a moment) */
    assert_true(lp_await_waiting(lp_svc.port, POLLERS * 0.98, 5) >= POLLERS * 0.98);
    assert_int_equal(c->done, 0); /* the produce elsewhere woke none of them */

    /* one produce on their topic wakes all of them, each with the message */
    double produced_at = th_now();
    assert_int_equal(produce(lp_svc.port, "crowd", "wake", &took), 1);
    fprintf(stderr, "the waking produce took %.3f s\n", took);
    pthread_join(t, NULL);
    double last = 0;
    int ok = 0;
    for (int i = 0; i < POLLERS; i++) {
        struct th_crowd_waiter *w = &c->w[i];
        last = w->done_at > last ? w->done_at : last;
        json_t *j = w->body.data ? json_loads(w->body.data, 0, NULL) : NULL;
        json_t *msgs = json_object_get(j, "messages");
        if (w->result == CURLE_OK && w->status == 200 && json_array_size(msgs) == 1 &&
            json_integer_value(json_object_get(json_array_get(msgs, 0), "offset")) == 1 &&
            strcmp(json_string_value(json_object_get(json_array_get(msgs, 0), "key")), "wake") == 0)
            ok++;
        else if (POLLERS - ok < 5)
            fprintf(stderr, "waiter %d: curl %d, status %ld: %s\n", i, w->result, w->status,
                    w->body.data ? w->body.data : "");
        json_decref(j);
    }
    fprintf(stderr,
            "%d of %d long-polls returned the message; the last %.3f s after the "
            "produce began\n",
            ok, POLLERS, last - produced_at);
    assert_int_equal(c->failed, 0);
    assert_int_equal(ok, POLLERS);
    assert_true(last - produced_at < 10.0);
    th_crowd_free(c);
    free(c);
    assert_true(lp_await_waiting(lp_svc.port, 0, 0) == 0);
    assert_true(th_metric(lp_svc.port, "rowlock_db_pool_acquire_timeouts_total") == 0);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiting_read_returns_promptly_after_a_produce),
        cmocka_unit_test(idle_read_returns_empty_when_its_wait_is_over),
        cmocka_unit_test(thousand_waiting_reads_hold_no_connection_and_all_wake),
    };
    int rc = cmocka_run_group_tests(tests, setup, lp_teardown);
    curl_global_cleanup();
    return rc;
}
