/* A transaction run again because of a stale id hint is a redo, not a retry: the retries metric
 * counts serialization failures and deadlocks only (SQLSTATE 40001, 40P01). A rowlock process
 * learns queue h's id by enqueueing; h is then deleted and created again under a new id in SQL
 * (as another process or an operator would). The next enqueue lands on the new queue through one
 * redo: /metrics shows rowlock_db_transaction_redos_total grown by one and
 * rowlock_db_transaction_retries_total unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    (void)state;
    return th_svc_start("redo_metric", NULL);
}

/* PUTs or POSTs body to path and asserts the status. */
static void send(const char *method, const char *path, const char *body, long want)
{
    json_decref(th_svc_call(method, path, body, want));
}

/* The id of queue h in the database, or 0. */
static long long queue_id(void)
{
    return th_svc_sql_int("SELECT coalesce(max(id), 0) FROM rowlock.queues WHERE name = 'h'");
}

static void stale_hint_is_a_redo_not_a_retry(void **state)
{
    (void)state;
    send("PUT", "/queues/h", "{}", 201);
    send("POST", "/queues/h/jobs", "{\"jobs\":[{\"payload\":{\"n\":1}}]}", 201); /* learns h's id */
    long long old_id = queue_id();
    PQclear(th_sql(th_svc_pg(), "DELETE FROM rowlock.queues WHERE name = 'h'"));
    PQclear(th_sql(th_svc_pg(), "INSERT INTO rowlock.queues (name, max_attempts, lease_seconds, "
                                "backoff_base_seconds, backoff_max_seconds, retention_seconds) "
                                "VALUES ('h', 3, 60, 0, 0, 3600)"));
    long long new_id = queue_id();
    assert_true(new_id != old_id);

    double retries0 = th_metric(th_svc.port, "rowlock_db_transaction_retries_total");
    double redos0 = th_metric(th_svc.port, "rowlock_db_transaction_redos_total");
    assert_true(retries0 >= 0);
    assert_true(redos0 >= 0);
    send("POST", "/queues/h/jobs", "{\"jobs\":[{\"payload\":{\"n\":2}}]}", 201);
    double retries1 = th_metric(th_svc.port, "rowlock_db_transaction_retries_total");
    double redos1 = th_metric(th_svc.port, "rowlock_db_transaction_redos_total");
    assert_true(redos1 - redos0 == 1);
    assert_true(retries1 - retries0 == 0);

    /* and the job went to the new queue */
    char q[160];
    snprintf(q, sizeof(q), "SELECT count(*) FROM rowlock.jobs WHERE queue_id = %lld", new_id);
    assert_int_equal(th_svc_sql_int(q), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stale_hint_is_a_redo_not_a_retry),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
