/* One broken ledger never switches off metrics or janitor work for the others.
 * Ledger "broken" (created first, so the janitor meets it first) gets a checkpoint at
 * 2^63 - 1 written in SQL, as the API refuses it now: its watermark (sequence + 1) fails in
 * PostgreSQL with 22003. Ledger "healthy" holds a tombstone carried by a checkpoint older than
 * its one-second retention. Then: healthy's gauges are still in /metrics with
 * rowlock_ledger_metrics_up 1, its tombstone is purged by the janitor, and both
 * rowlock_ledger_metrics_failures_total and rowlock_ledger_janitor_failures_total rise for the
 * broken ledger alone. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int64_t ledger_id(const char *name)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.ledgers WHERE name = '%s'", name);
    return th_svc_sql_int(sql);
}

static int setup(void **state)
{
    /* every scrape counts the gauges itself however long the broken ledger's count takes (a
     * loaded machine takes it past the default 25 ms, and scrapes would answer with the last
     * count: service/gauge_cache.h), so that each one meets the failure */
    static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100",
                                      "ROWLOCK_METRICS_SYNC_MS=60000", NULL};
    return th_svc_start("ledger_isolation", env);
}

static void a_broken_ledger_costs_only_its_own_metrics_and_janitor(void **state)
{
    json_decref(th_svc_call("PUT", "/ledgers/broken", "{\"tombstone_retention_seconds\":1}", 201));
    json_decref(th_svc_call("PUT", "/ledgers/healthy", "{\"tombstone_retention_seconds\":1}", 201));
    assert_true(ledger_id("broken") < ledger_id("healthy"));
    /* healthy: an object written by checkpoint 1 and deleted by checkpoint 2 */
    json_decref(th_svc_call(
        "POST", "/ledgers/healthy/checkpoints",
        "{\"sequence\":1,\"transactions\":[{\"digest\":\"w\",\"writes\":[{\"object_id\":"
        "\"x\",\"version\":1,\"type\":\"c\"}]}]}",
        201));
    json_decref(th_svc_call(
        "POST", "/ledgers/healthy/checkpoints",
        "{\"sequence\":2,\"transactions\":[{\"digest\":\"d\",\"deletes\":[{\"object_id\":"
        "\"x\",\"version\":2}]}]}",
        201));
    char sql[256];
    snprintf(sql, sizeof(sql),
             "INSERT INTO rowlock.checkpoints_%" PRId64
             " (sequence, transactions, applied_at) VALUES (1, 0, now() - interval '1 hour'), "
             "(9223372036854775807, 0, now() - interval '1 hour')",
             ledger_id("broken"));
    PQclear(th_sql(th_svc_pg(), sql));
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.objects_%" PRId64 " WHERE deleted",
             ledger_id("healthy"));
    assert_int_equal(th_svc_sql_int(sql), 1);

    /* the janitor still purges healthy's tombstone (retention 1 s, passes every 100 ms) */
    double deadline = th_now() + 15;
    while (th_svc_sql_int(sql) != 0 && th_now() < deadline)
        usleep(100 * 1000);
    assert_int_equal(th_svc_sql_int(sql), 0);
    json_t *l = th_svc_get("/ledgers/healthy");
    assert_int_equal(json_integer_value(json_object_get(l, "horizon")), 2);
    json_decref(l);
    assert_true(
        th_metric(th_svc.port, "rowlock_ledger_janitor_failures_total{ledger=\"broken\"}") >= 1);
    assert_true(
        th_metric(th_svc.port, "rowlock_ledger_janitor_failures_total{ledger=\"healthy\"}") < 0);

    /* healthy's gauges are still served; broken's are missing and counted */
    assert_true(th_metric(th_svc.port, "rowlock_ledger_metrics_up") == 1);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_watermark{ledger=\"healthy\"}") == 2);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_tombstones{ledger=\"healthy\"}") == 0);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_watermark{ledger=\"broken\"}") < 0);
    double before =
        th_metric(th_svc.port, "rowlock_ledger_metrics_failures_total{ledger=\"broken\"}");
    assert_true(before >= 1);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_metrics_failures_total{ledger=\"broken\"}") >
                before);
    assert_true(
        th_metric(th_svc.port, "rowlock_ledger_metrics_failures_total{ledger=\"healthy\"}") < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_broken_ledger_costs_only_its_own_metrics_and_janitor),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
