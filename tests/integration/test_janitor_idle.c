/* The janitor's work follows what is due, not the number of resources (issue 17). With 120
 * topics and 20 ledgers that have nothing due (their headless TTL and tombstone retention an hour
 * away), an idle process whose janitor runs every 100 ms works on none of them: its visit
 * counters (rowlock_topic_janitor_visits_total, rowlock_ledger_janitor_visits_total) stay still
 * over twenty passes, where a janitor that visits every resource each pass counts thousands. A
 * topic whose headless row does come due is still cleaned, alone: one visit, one row deleted. A
 * second process sharing the database does not repeat the work: the two together visit each
 * due topic once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define TOPICS  120
#define LEDGERS 20

static struct th_service a, b;
static char dburl[1024];

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
                                         "rowlock_ledger_janitor_visits_total{outcome=\"failed\"}"};
    double n = 0;
    for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++)
        n += metric0(a.port, series[i]) + metric0(b.port, series[i]);
    return n;
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
    /* each new resource is due once (its first upkeep); wait until they have all been seen */
    double before = visits();
    for (int i = 0; i < 100 && before < TOPICS + LEDGERS; i++) {
        usleep(100 * 1000);
        before = visits();
    }
    assert_true(before >= TOPICS + LEDGERS);
    /* no process repeats another's work: each first upkeep was done once */
    assert_true(before <= TOPICS + LEDGERS);
    usleep(2000 * 1000); /* twenty passes of each process */
    double after = visits();
    if (after != before)
        fail_msg("idle janitors visited %g resources in 2 s with nothing due", after - before);
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
    if (th_db_create("janitor_idle", dburl, sizeof(dburl)) != 0)
        return -1;
    if (th_service_start(&a, dburl, env) != 0)
        return -1;
    if (th_service_start(&b, dburl, env) != 0) {
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
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
