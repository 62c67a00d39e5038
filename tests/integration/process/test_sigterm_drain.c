/* SIGTERM with a request in flight: the service stops accepting connections, lets the in-flight
 * request finish (it waits on a table lock the test releases after the signal), answers it 200,
 * and exits 0 with nothing cut short. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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
    return th_svc_db("drain");
}

static void *in_flight_readyz(void *arg)
{
    struct th_service *svc = ((void **)arg)[0];
    struct th_response *r = ((void **)arg)[1];
    th_http(svc->port, "GET", "/readyz", NULL, NULL, 0, r);
    return NULL;
}

static void sigterm_completes_in_flight_requests(void **state)
{
    struct th_service svc;
    const char *env[] = {"ROWLOCK_DRAIN_TIMEOUT_S=30", "ROWLOCK_STATEMENT_TIMEOUT_MS=30000", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    PGconn *locker = th_pg(th_svc_dburl);
    PQclear(th_sql(locker, "BEGIN"));
    PQclear(th_sql(locker, "LOCK TABLE rowlock.schema_version IN ACCESS EXCLUSIVE MODE"));

    struct th_response held;
    void *args[] = {&svc, &held};
    pthread_t t;
    pthread_create(&t, NULL, in_flight_readyz, args);
    /* the request is in flight once its backend waits for our lock */
    PGconn *watch = th_pg(th_svc_dburl);
    int waiting = 0;
    for (int i = 0; i < 500 && !waiting; i++) {
        PGresult *r = th_sql(watch, "SELECT count(*) FROM pg_stat_activity "
                                    "WHERE application_name = 'rowlock' AND datname = "
                                    "current_database() AND wait_event_type = "
                                    "'Lock'");
        waiting = atoi(PQgetvalue(r, 0, 0)) == 1;
        PQclear(r);
        usleep(10000);
    }
    PQfinish(watch);
    assert_true(waiting);

    th_service_signal(&svc, SIGTERM);
    for (int i = 0; i < 500 && !th_service_logged(&svc, "\"msg\":\"draining\""); i++)
        usleep(10000);
    assert_true(th_service_logged(&svc, "\"in_flight\":1"));
    /* no new connections while draining */
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/healthz", NULL, NULL, 0, &r), -1);
    th_response_free(&r);
    /* the process is still there, waiting for the request */
    usleep(300000);
    assert_int_equal(kill(svc.pid, 0), 0);

    PQclear(th_sql(locker, "COMMIT"));
    PQfinish(locker);
    pthread_join(t, NULL);
    assert_int_equal(held.status, 200);
    th_response_free(&held);
    assert_int_equal(th_service_wait(&svc, 30), 0);
    assert_true(th_service_logged(&svc, "\"requests_cut_short\":0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sigterm_completes_in_flight_requests),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
