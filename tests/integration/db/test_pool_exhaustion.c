/* Pool exhaustion: with one pooled connection held by a request that waits on a table lock the
 * test holds, the next request gets 503 pool_exhausted with Retry-After once the acquire timeout
 * passes, instead of hanging; the held request then completes, and the metrics count it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_POOL_SIZE=1", "ROWLOCK_THREADS=4",
                         "ROWLOCK_POOL_ACQUIRE_TIMEOUT_MS=300",
                         "ROWLOCK_STATEMENT_TIMEOUT_MS=30000", NULL};
    return th_svc_start("pool", env);
}

static void *held_readyz(void *arg)
{
    struct th_response *r = arg;
    th_http(th_svc.port, "GET", "/readyz", NULL, NULL, 0, r);
    return NULL;
}

/* Value of an unlabelled metric of the service under test, or -1. */
static double metric(const char *name)
{
    return th_metric(th_svc.port, name);
}

static void exhausted_pool_answers_503_not_a_hang(void **state)
{
    PGconn *locker = th_pg(th_svc_dburl);
    PQclear(th_sql(locker, "BEGIN"));
    PQclear(th_sql(locker, "LOCK TABLE rowlock.schema_version IN ACCESS EXCLUSIVE MODE"));

    struct th_response held;
    pthread_t t;
    pthread_create(&t, NULL, held_readyz, &held);
    for (int i = 0; i < 500 && metric("rowlock_db_pool_in_use") != 1; i++)
        usleep(10000);
    if (metric("rowlock_db_pool_in_use") != 1)
        fail_msg("pool in_use is %g, not 1", metric("rowlock_db_pool_in_use"));

    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/readyz", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 503, "pool_exhausted");
    char retry[32];
    assert_int_equal(th_header(&r, "Retry-After", retry, sizeof(retry)), 0);
    assert_true(atoi(retry) >= 1);
    assert_true(r.seconds < 5.0); /* bounded by the 300 ms acquire timeout, not the lock */
    th_response_free(&r);
    /* requests that need no connection are unaffected */
    assert_int_equal(th_http(th_svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);

    PQclear(th_sql(locker, "COMMIT"));
    pthread_join(t, NULL);
    assert_int_equal(held.status, 200);
    th_response_free(&held);
    PQfinish(locker);

    assert_true(metric("rowlock_db_pool_acquire_timeouts_total") >= 1);
    assert_true(metric("rowlock_db_pool_acquire_waits_total") >= 1);
    assert_true(metric("rowlock_db_pool_in_use") == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exhausted_pool_answers_503_not_a_hang),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
