/* One broken topic switches nothing off for the others. Topic a_bad's head table loses its
 * updated_at column (what any per-topic failure of the database looks like to rowlock: here
 * SQLSTATE 42703 in every statement on it); then /metrics still shows the headless gauges of
 * b_good and c_good, rowlock_topic_metrics_up stays 1, and the janitor still deletes their expired
 * headless rows, while rowlock_topic_metrics_failures_total and
 * rowlock_topic_janitor_failures_total count a_bad's failures. a_bad is created first and sorts
 * first, so a pass that gave up at its first failure would do nothing for the others. */
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

static const char *const topics[] = {"a_bad", "b_good", "c_good"};

/* Creates topic name with a 1 s headless TTL and leaves one headless row in it: a replace with
 * a precondition that fails still commits its lock. */
static void topic_with_headless_row(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/topics/%s", name);
    json_t *cfg = json_pack("{s:i}", "headless_ttl_seconds", 3);
    struct th_response r;
    assert_int_equal(th_http_json(th_svc.port, "PUT", path, cfg, &r), 0);
    json_decref(cfg);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    snprintf(path, sizeof(path), "/topics/%s/keys/locked/head", name);
    const char *headers[] = {"Content-Type: application/json", "If-Match: \"999\"", NULL};
    assert_int_equal(th_http(th_svc.port, "PUT", path, headers, "{\"v\":1}", 7, &r), 0);
    th_assert_problem(&r, 412, "precondition_failed");
    th_response_free(&r);
}

static long long headless_rows(PGconn *pg, const char *topic)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM rowlock.topic_heads WHERE topic_id = %s AND head_id IS NULL",
             topic); /* topic: an id */
    PGresult *r = th_sql(pg, sql);
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static char *topic_id(PGconn *pg, const char *name)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.topics WHERE name = '%s'", name);
    PGresult *r = th_sql(pg, sql);
    char *id = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    return id;
}

static void a_broken_topic_leaves_the_others_metrics_and_janitor_alone(void **state)
{
    (void)state;
    PGconn *pg = th_pg(th_svc_dburl);
    char *ids[3];
    for (int i = 0; i < 3; i++) {
        topic_with_headless_row(topics[i]);
        ids[i] = topic_id(pg, topics[i]);
        assert_int_equal(headless_rows(pg, ids[i]), 1);
    }
    /* every topic's TTL beside its headless gauges (alert rules compare the age with it) */
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_ttl_seconds{topic=\"a_bad\"}") == 3);
    /* a_bad broken in its rows alone (the tables are every topic's): its headless row's age cannot
     * be computed (PostgreSQL 15, as deploy/ runs, refuses to subtract an infinite timestamp),
     * so its gauges fail, and a trigger refuses to delete its rows, so its janitor fails */
    char sql[512];
    PQclear(th_sql(pg, "CREATE FUNCTION public.refuse_delete() RETURNS trigger LANGUAGE plpgsql "
                       "AS $$ BEGIN RAISE EXCEPTION 'topic % is broken', OLD.topic_id; END $$"));
    snprintf(sql, sizeof(sql),
             "CREATE TRIGGER a_bad_broken BEFORE DELETE ON rowlock.topic_heads FOR EACH ROW "
             "WHEN (OLD.topic_id = %s) EXECUTE FUNCTION public.refuse_delete()",
             ids[0]);
    PQclear(th_sql(pg, sql));
    snprintf(sql, sizeof(sql),
             "UPDATE rowlock.topic_heads SET updated_at = '-infinity' WHERE topic_id = %s", ids[0]);
    PQclear(th_sql(pg, sql));

    /* the gauges of the healthy topics are served (their rows are younger than the TTL, and the
     * janitor runs every 100 ms but deletes only after 3 s, room for a slow sanitizer build) */
    assert_true(th_metric(th_svc.port, "rowlock_topic_metrics_up") == 1);
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_rows{topic=\"b_good\"}") == 1);
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_rows{topic=\"c_good\"}") == 1);
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_rows{topic=\"a_bad\"}") < 0);
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_ttl_seconds{topic=\"b_good\"}") ==
                3);
    assert_true(th_metric(th_svc.port, "rowlock_topic_metrics_failures_total{topic=\"a_bad\"}") >=
                1);

    /* and their expired headless rows are deleted, pass after pass, while a_bad fails */
    double deadline = th_now() + 10;
    while (th_now() < deadline &&
           (headless_rows(pg, ids[1]) > 0 || headless_rows(pg, ids[2]) > 0 ||
            th_metric(th_svc.port, "rowlock_topic_janitor_failures_total{topic=\"a_bad\"}") < 2))
        usleep(100 * 1000);
    assert_int_equal(headless_rows(pg, ids[1]), 0);
    assert_int_equal(headless_rows(pg, ids[2]), 0);
    assert_true(th_metric(th_svc.port, "rowlock_topic_janitor_failures_total{topic=\"a_bad\"}") >=
                2);
    assert_true(th_metric(th_svc.port, "rowlock_topic_janitor_deleted_total{topic=\"b_good\"}") ==
                1);
    assert_true(th_metric(th_svc.port, "rowlock_topic_janitor_deleted_total{topic=\"c_good\"}") ==
                1);
    assert_true(th_metric(th_svc.port, "rowlock_topic_janitor_failures_total{topic=\"b_good\"}") <
                0);
    assert_true(th_metric(th_svc.port, "rowlock_topic_headless_rows{topic=\"b_good\"}") == 0);
    assert_true(th_service_logged(&th_svc, "topic janitor failed on a topic"));
    for (int i = 0; i < 3; i++)
        free(ids[i]);
    PQfinish(pg);
}

static int setup(void **state)
{
    (void)state;
    const char *env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    return th_svc_start("topic_isolation", env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_broken_topic_leaves_the_others_metrics_and_janitor_alone),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
