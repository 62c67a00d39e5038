/* The janitor's work follows what is due, not the number of resources. With 120
 * topics, 20 ledgers and 60 queues that have nothing due (their headless TTL, tombstone
 * retention and job retention an hour or more away, no lease running), an idle process whose
 * janitor runs every 100 ms works on none of them: its visit counters
 * (rowlock_{topic,ledger,queue}_janitor_visits_total) stay still over twenty passes, where a
 * janitor that visits every resource each pass counts thousands, and the two processes' database
 * transactions (rowlock_db_transactions_total) stay a few per pass, where the janitor that
 * visited every queue ran one per queue per pass (2,400 here). A topic whose headless row does
 * come due is still cleaned, alone: one visit, one row deleted; so is a queue whose finished job
 * passes its retention, and a lease on a last attempt that runs out is failed once. A second
 * process sharing the database does not repeat the work: the two together visit each due
 * resource once, and count each expiry once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define TOPICS  120
#define LEDGERS 20
#define QUEUES  60

static struct th_service a, b;

static double metric0(int port, const char *series)
{
    double v = th_metric(port, series);
    return v < 0 ? 0 : v; /* a counter never moved is absent */
}

/* Topic and ledger visits of both processes. */
static double visits(void)
{
    static const char *const series[] = {"rowlock_topic_janitor_visits_total{outcome=\"ok\"}",
                                         "rowlock_topic_janitor_visits_total{outcome=\"failed\"}",
                                         "rowlock_ledger_janitor_visits_total{outcome=\"ok\"}",
                                         "rowlock_ledger_janitor_visits_total{outcome=\"failed\"}",
                                         "rowlock_queue_janitor_visits_total{outcome=\"ok\"}",
                                         "rowlock_queue_janitor_visits_total{outcome=\"failed\"}"};
    double n = 0;
    for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++)
        n += metric0(a.port, series[i]) + metric0(b.port, series[i]);
    return n;
}

/* Database transactions both processes committed. */
static double commits(void)
{
    const char *series = "rowlock_db_transactions_total{outcome=\"commit\"}";
    return metric0(a.port, series) + metric0(b.port, series);
}

static void idle_janitor_visits_nothing(void **state)
{
    (void)state;
    char path[64];
    for (int i = 0; i < TOPICS; i++) {
        snprintf(path, sizeof(path), "/topics/idle%d", i);
        json_decref(th_call(a.port, "PUT", path, "{}", 201));
    }
    for (int i = 0; i < LEDGERS; i++) {
        snprintf(path, sizeof(path), "/ledgers/idle%d", i);
        json_decref(th_call(a.port, "PUT", path, "{\"tombstone_retention_seconds\":3600}", 201));
    }
    for (int i = 0; i < QUEUES; i++) {
        snprintf(path, sizeof(path), "/queues/idle%d", i);
        json_decref(th_call(a.port, "PUT", path, "{}", 201));
    }
    /* each new resource is due once (its first upkeep); wait until they have all been seen */
    const double all = TOPICS + LEDGERS + QUEUES;
    double before = visits();
    for (int i = 0; i < 100 && before < all; i++) {
        usleep(100 * 1000);
        before = visits();
    }
    if (before < all)
        fail_msg("the first upkeep of %g resources took more than 10 s (%g seen)", all, before);
    /* no process repeats another's work: each first upkeep was done once */
    assert_true(before <= all);
    double tx0 = commits();
    usleep(2000 * 1000); /* twenty passes of each process */
    double tx = commits() - tx0;
    double after = visits();
    if (after != before)
        fail_msg("idle janitors visited %g resources in 2 s with nothing due", after - before);
    print_message("idle: %g transactions in 2 s, two processes\n", tx);
    /* forty passes in all, a few statements each (and the scrapes that read the counters) */
    if (tx > 400)
        fail_msg("idle processes committed %g transactions in 2 s with nothing due", tx);
}

static void due_queue_work_done_once(void **state)
{
    (void)state;
    /* a job finished now is purged once the retention (1 s) has passed */
    json_decref(th_call(a.port, "PUT", "/queues/due", "{\"retention_seconds\":1}", 201));
    json_decref(th_call(a.port, "POST", "/queues/due/jobs", "{\"payload\":1}", 201));
    json_t *c = th_call(a.port, "POST", "/queues/due/leases", "{\"owner\":\"w\"}", 200);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/due/leases/%lld/complete",
             (long long)json_integer_value(json_object_get(l, "job_id")));
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld}",
             (long long)json_integer_value(json_object_get(l, "fence")));
    json_decref(th_call(b.port, "POST", path, body, 200));
    json_decref(c);
    /* a lease on a last attempt that runs out (1 s) is failed by one of the two */
    json_decref(th_call(a.port, "PUT", "/queues/dies", "{\"max_attempts\":1}", 201));
    json_decref(th_call(a.port, "POST", "/queues/dies/jobs", "{\"payload\":1}", 201));
    json_decref(th_call(b.port, "POST", "/queues/dies/leases",
                        "{\"owner\":\"w\",\"lease_seconds\":1}", 200));
    const char *purged = "rowlock_queue_janitor_purged_total{queue=\"due\"}";
    const char *expired = "rowlock_queue_janitor_expired_total{queue=\"dies\"}";
    for (int i = 0; i < 60 && (metric0(a.port, purged) + metric0(b.port, purged) < 1 ||
                               metric0(a.port, expired) + metric0(b.port, expired) < 1);
         i++)
        usleep(100 * 1000);
    assert_true(metric0(a.port, purged) + metric0(b.port, purged) == 1);
    assert_true(metric0(a.port, expired) + metric0(b.port, expired) == 1);
    json_t *j = th_call(a.port, "GET", "/queues/dies/jobs?state=failed", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 1);
    json_decref(j);
    /* from now on only the queue "due" comes due, once a retention (1 s); the expired job's
     * purge is a week away */
    const char *qv = "rowlock_queue_janitor_visits_total{outcome=\"ok\"}";
    double before = metric0(a.port, qv) + metric0(b.port, qv);
    usleep(1000 * 1000);
    assert_true(metric0(a.port, qv) + metric0(b.port, qv) - before <= 2);
}

static void due_topic_cleaned_alone(void **state)
{
    (void)state;
    json_decref(th_call(a.port, "PUT", "/topics/due", "{\"headless_ttl_seconds\":1}", 201));
    /* a replace with a failing precondition commits its lock: one headless row */
    const char *headers[] = {"Content-Type: application/json", "If-Match: \"999\"", NULL};
    struct th_response r;
    assert_int_equal(th_http(a.port, "PUT", "/topics/due/keys/k/head", headers, "{\"v\":1}", 7, &r),
                     0);
    th_assert_problem(&r, 412, "precondition_failed");
    th_response_free(&r);
    const char *deleted = "rowlock_topic_janitor_deleted_total{topic=\"due\"}";
    for (int i = 0; i < 50 && metric0(a.port, deleted) + metric0(b.port, deleted) < 1; i++)
        usleep(100 * 1000);
    assert_true(metric0(a.port, deleted) + metric0(b.port, deleted) == 1);
    /* from now on only this topic comes due, once a TTL (1 s) */
    double before = visits();
    usleep(1000 * 1000);
    assert_true(visits() - before <= 2);
}

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    if (th_svc_db("janitor_idle") != 0)
        return -1;
    if (th_service_start(&a, th_svc_dburl, env) != 0)
        return -1;
    if (th_service_start(&b, th_svc_dburl, env) != 0) {
        th_service_stop(&a);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int ok = th_service_stop(&a) == 0;
    ok &= th_service_stop(&b) == 0;
    return ok ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(idle_janitor_visits_nothing),
        cmocka_unit_test(due_topic_cleaned_alone),
        cmocka_unit_test(due_queue_work_done_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
