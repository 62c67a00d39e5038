/* /metrics stays bounded however many topics, queues and ledgers there are: with
 * ROWLOCK_METRICS_MAX_RESOURCES=5, 8 topics, 7 queues and 7 ledgers give per-resource gauges for
 * the first 5 of each by name, never more, while the totals (rowlock_topics, rowlock_queues,
 * rowlock_ledgers), how many were left out (rowlock_{topic,queue,ledger}_metrics_omitted) and the
 * janitor's overdue gauges cover them all. Per-topic and per-queue counters keep a series for the
 * first 5 counted and count the others under topic="_other" (queue="_other"). Per-queue job
 * gauges and per-ledger gauges whose count is slow are served from the janitor's last count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

/* Series of family name (lines "name{...") in a scrape, and whether label value want is one. */
static int series(const char *text, const char *name, const char *want, int *found)
{
    size_t n = strlen(name);
    int count = 0;
    *found = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        if (strncmp(line, name, n) == 0 && line[n] == '{') {
            count++;
            const char *q = strstr(line, want);
            if (q != NULL && (end == NULL || q < end))
                *found = 1;
        }
        line = end ? end + 1 : NULL;
    }
    return count;
}

static void per_resource_series_bounded_totals_complete(void **state)
{
    (void)state;
    char path[64];
    for (int i = 1; i <= 8; i++) {
        snprintf(path, sizeof(path), "/topics/t%d", i);
        json_decref(th_svc_call("PUT", path, "{}", 201));
        snprintf(path, sizeof(path), "/topics/t%d/messages", i);
        json_decref(th_svc_call("POST", path, "{\"key\":\"k\",\"value\":1}", 201));
    }
    for (int i = 1; i <= 7; i++) {
        snprintf(path, sizeof(path), "/ledgers/l%d", i);
        json_decref(th_svc_call("PUT", path, "{}", 201));
    }
    for (int i = 1; i <= 7; i++) {
        snprintf(path, sizeof(path), "/queues/q%d", i);
        json_decref(th_svc_call("PUT", path, "{}", 201));
        snprintf(path, sizeof(path), "/queues/q%d/jobs", i);
        json_decref(th_svc_call("POST", path, "{\"payload\":1}", 201));
    }
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/metrics", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    int found = 0;
    assert_int_equal(series(r.body, "rowlock_topic_headless_rows", "\"t1\"", &found), 5);
    assert_true(found); /* the first by name */
    assert_int_equal(series(r.body, "rowlock_topic_headless_rows", "\"t8\"", &found), 5);
    assert_false(found);
    assert_int_equal(series(r.body, "rowlock_topic_headless_ttl_seconds", "\"t5\"", &found), 5);
    assert_true(found);
    assert_int_equal(series(r.body, "rowlock_ledger_watermark", "\"l1\"", &found), 5);
    assert_true(found);
    assert_int_equal(series(r.body, "rowlock_ledger_tombstones", "\"l6\"", &found), 5);
    assert_false(found);
    /* per-topic counters: the first 5 topics counted, each by name, the others together */
    assert_int_equal(series(r.body, "rowlock_topic_messages_produced_total", "\"_other\"", &found),
                     6);
    assert_true(found);
    /* 5 queues, 6 states each */
    assert_int_equal(series(r.body, "rowlock_queue_jobs", "\"q1\"", &found), 30);
    assert_true(found);
    assert_int_equal(series(r.body, "rowlock_queue_jobs", "\"q6\"", &found), 30);
    assert_false(found);
    assert_int_equal(series(r.body, "rowlock_queue_oldest_pending_age_seconds", "\"q5\"", &found),
                     5);
    assert_true(found);
    assert_int_equal(series(r.body, "rowlock_queue_jobs_enqueued_total", "\"_other\"", &found), 6);
    assert_true(found);
    th_response_free(&r);
    assert_true(th_metric(th_svc.port, "rowlock_topics") == 8);
    assert_true(th_metric(th_svc.port, "rowlock_topic_messages_produced_total{topic=\"_other\"}") ==
                3);
    assert_true(th_metric(th_svc.port, "rowlock_topic_messages_produced_total{topic=\"t1\"}") == 1);
    assert_true(th_metric(th_svc.port, "rowlock_ledgers") == 7);
    assert_true(th_metric(th_svc.port, "rowlock_topic_metrics_omitted") == 3);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_metrics_omitted") == 2);
    assert_true(th_metric(th_svc.port, "rowlock_topic_upkeep_due_seconds") >= 0);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_upkeep_due_seconds") >= 0);
    assert_true(th_metric(th_svc.port, "rowlock_queues") == 7);
    assert_true(th_metric(th_svc.port, "rowlock_queue_metrics_omitted") == 2);
    assert_true(th_metric(th_svc.port, "rowlock_queue_upkeep_due_seconds") >= 0);
    assert_true(th_metric(th_svc.port, "rowlock_queue_jobs_enqueued_total{queue=\"_other\"}") == 2);
    assert_true(th_metric(th_svc.port, "rowlock_queue_jobs_enqueued_total{queue=\"q1\"}") == 1);
}

/* Past ROWLOCK_METRICS_SYNC_MS (0 here: every count is slow) a scrape answers with the last
 * count, however the resource changed, and the janitor (every 200 ms here) counts anew once a
 * scrape asked. A process of its own scrapes metric (want before the change, after it once the
 * janitor counted), the cache's own series under prefix; with the default (the shared process) a
 * scrape counts itself, and the change shows at once. */
static void served_from_the_janitor(const char *metric, const char *prefix, void (*change)(void),
                                    double before, double after)
{
    char age_name[96], took_name[96];
    snprintf(age_name, sizeof(age_name), "%s_age_seconds", prefix);
    snprintf(took_name, sizeof(took_name), "%s_count_seconds", prefix);
    assert_true(th_metric(th_svc.port, metric) == before); /* the default: counted by the scrape */
    struct th_service slow;
    static const char *const env[] = {"ROWLOCK_METRICS_SYNC_MS=0",
                                      "ROWLOCK_JANITOR_INTERVAL_MS=200", NULL};
    assert_int_equal(th_service_start(&slow, th_svc_dburl, env), 0);
    double first = th_metric(slow.port, metric); /* no count yet: this scrape counts */
    change();
    double stale = th_metric(slow.port, metric);
    double seen = stale, t0 = th_now();
    while (seen != after && th_now() - t0 < 10) {
        usleep(100000);
        seen = th_metric(slow.port, metric);
    }
    double age = th_metric(slow.port, age_name);
    double took = th_metric(slow.port, took_name);
    fprintf(stderr,
            "slow gauges: %s first scrape %.0f, after the change %.0f, then %.0f after %.2f s (age "
            "%.3f s, the count took %.4f s)\n",
            metric, first, stale, seen, th_now() - t0, age, took);
    assert_int_equal(th_service_stop(&slow), 0);
    assert_true(first == before);
    assert_true(stale == before);
    assert_true(seen == after);
    assert_true(age >= 0 && took >= 0);
    /* the default process still counts at each scrape */
    assert_true(th_metric(th_svc.port, metric) == after);
    assert_true(th_metric(th_svc.port, age_name) < 1);
}

static void enqueue_two(void)
{
    json_decref(th_svc_call("POST", "/queues/a-stale/jobs", "{\"payload\":2}", 201));
    json_decref(th_svc_call("POST", "/queues/a-stale/jobs", "{\"payload\":3}", 201));
}

static void slow_queue_gauges_come_from_the_janitor(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/a-stale", "{}", 201));
    json_decref(th_svc_call("POST", "/queues/a-stale/jobs", "{\"payload\":1}", 201));
    served_from_the_janitor("rowlock_queue_jobs{queue=\"a-stale\",state=\"pending\"}",
                            "rowlock_queue_gauges", enqueue_two, 1, 3);
}

static void checkpoint_two(void)
{
    json_decref(th_svc_call("POST", "/ledgers/a-stale/checkpoints",
                            "{\"sequence\":2,\"transactions\":[]}", 201));
}

/* The ledgers' gauges are a query on each ledger's own tables, slow on a
 * backend that has not opened them lately: the same as the queues'. */
static void slow_ledger_gauges_come_from_the_janitor(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/ledgers/a-stale", "{}", 201));
    json_decref(th_svc_call("POST", "/ledgers/a-stale/checkpoints",
                            "{\"sequence\":1,\"transactions\":[]}", 201));
    served_from_the_janitor("rowlock_ledger_watermark{ledger=\"a-stale\"}", "rowlock_ledger_gauges",
                            checkpoint_two, 1, 2);
}

/* A scrape's own count is cut off after ROWLOCK_METRICS_SYNC_MS: held up by lock_sql (a lock
 * on a table the count reads), the scrape answers at once with the last whole count (want), and
 * the next scrapes answer with it too after change() until the janitor counts again (not in
 * this test: its interval is ten minutes). Without the cut the scrape waits for the lock. */
static void cut_off(const char *metric, const char *prefix, const char *lock_sql,
                    void (*change)(void), double want)
{
    char cut_name[96], count_name[96], up_name[96];
    snprintf(cut_name, sizeof(cut_name), "%s_cut_total", prefix);
    snprintf(count_name, sizeof(count_name), "%s_count_seconds", prefix);
    snprintf(up_name, sizeof(up_name), "%.*s_metrics_up", (int)(strlen(prefix) - strlen("_gauges")),
             prefix);
    struct th_service p;
    static const char *const env[] = {"ROWLOCK_METRICS_SYNC_MS=50",
                                      "ROWLOCK_JANITOR_INTERVAL_MS=600000",
                                      "ROWLOCK_STATEMENT_TIMEOUT_MS=3000", NULL};
    assert_int_equal(th_service_start(&p, th_svc_dburl, env), 0);
    double first = th_metric(p.port, metric); /* the process's first count: whole */
    PGconn *lock = th_pg(th_svc_dburl);
    PQclear(th_sql(lock, "BEGIN"));
    PQclear(th_sql(lock, lock_sql));
    double t0 = th_now();
    double held = th_metric(p.port, metric);
    double took = th_now() - t0;
    double cut = th_metric(p.port, cut_name);
    double count_s = th_metric(p.port, count_name);
    PQclear(th_sql(lock, "COMMIT"));
    PQfinish(lock);
    change();
    double after = th_metric(p.port, metric);
    double up = th_metric(p.port, up_name);
    fprintf(stderr,
            "cut count: %s first %.0f, with the table locked %.0f in %.3f s (cut %.0f, count "
            "%.3f s), after the change %.0f, up %.0f\n",
            metric, first, held, took, cut, count_s, after, up);
    assert_int_equal(th_service_stop(&p), 0);
    assert_true(first == want);
    assert_true(held == want);
    assert_true(took < 1.0); /* cut at 0.05 s; uncut, it waits for the lock (3 s at least) */
    assert_true(cut == 1);
    assert_true(count_s >= 0.05);
    assert_true(after == want); /* the last whole count stands until the janitor's */
    assert_true(up == 1);
}

static void enqueue_one(void)
{
    json_decref(th_svc_call("POST", "/queues/a-cut/jobs", "{\"payload\":2}", 201));
}

static void a_slow_count_is_cut_off(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/a-cut", "{}", 201));
    json_decref(th_svc_call("POST", "/queues/a-cut/jobs", "{\"payload\":1}", 201));
    cut_off("rowlock_queue_jobs{queue=\"a-cut\",state=\"pending\"}", "rowlock_queue_gauges",
            "LOCK TABLE rowlock.jobs IN ACCESS EXCLUSIVE MODE", enqueue_one, 1);
}

static void checkpoint_cut_two(void)
{
    json_decref(th_svc_call("POST", "/ledgers/a-cut/checkpoints",
                            "{\"sequence\":2,\"transactions\":[]}", 201));
}

static void a_slow_ledger_count_is_cut_off(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/ledgers/a-cut", "{}", 201));
    json_decref(th_svc_call("POST", "/ledgers/a-cut/checkpoints",
                            "{\"sequence\":1,\"transactions\":[]}", 201));
    char lock_sql[128];
    snprintf(lock_sql, sizeof(lock_sql),
             "LOCK TABLE rowlock.checkpoints_%lld IN ACCESS EXCLUSIVE MODE",
             (long long)th_svc_sql_int("SELECT id FROM rowlock.ledgers WHERE name = 'a-cut'"));
    cut_off("rowlock_ledger_watermark{ledger=\"a-cut\"}", "rowlock_ledger_gauges", lock_sql,
            checkpoint_cut_two, 1);
}

static int setup(void **state)
{
    (void)state;
    /* the shared process counts at every scrape: a budget no sanitizer build on a busy machine
     * passes (the default, 25 ms, is the cut-off's own cases') */
    static const char *const env[] = {"ROWLOCK_METRICS_MAX_RESOURCES=5",
                                      "ROWLOCK_METRICS_SYNC_MS=5000", NULL};
    return th_svc_start("metrics_bounded", env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(per_resource_series_bounded_totals_complete),
        cmocka_unit_test(slow_queue_gauges_come_from_the_janitor),
        cmocka_unit_test(slow_ledger_gauges_come_from_the_janitor),
        cmocka_unit_test(a_slow_count_is_cut_off),
        cmocka_unit_test(a_slow_ledger_count_is_cut_off),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
