/* Stale pooled connections after a database restart: 16 concurrent enqueues
 * open 16 pooled connections; PostgreSQL is stopped and started again (ROWLOCK_TEST_PGCTL), and
 * 2 s after it answers again 16 more concurrent enqueues must all succeed: every pooled
 * connection the server closed is found closed before it is used (an idle connection's socket
 * is readable), the pool is flushed, and a transaction whose connection turned out dead before
 * anything reached the server runs again on a fresh one. Before this was built, 7 of the 16
 * answered 503 database_unavailable ("terminating connection due to administrator command").
 * Runs alone: it restarts the database server. */
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

#define BURST 16

static int setup(void **state)
{
    return th_svc_db("restartburst");
}

static int teardown(void **state)
{
    th_svc_teardown(state);
    /* whatever happened, leave the server running for the tests after this one */
    return th_pgctl_leave_running();
}

static void job_body(int i, char *buf, size_t size)
{
    snprintf(buf, size, "{\"payload\": {\"n\": %d}}", i);
}

/* Sends BURST concurrent enqueues; returns how many answered 503, printing each such answer;
 * *ok counts the 2xx. */
static int burst(int port, int *ok)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/queues/q/jobs", port);
    struct th_crowd c;
    th_crowd_start(&c, BURST, url, job_body);
    th_crowd_run(&c);
    int unavailable = 0;
    *ok = 0;
    for (int i = 0; i < BURST; i++) {
        if (c.w[i].status == 503) {
            unavailable++;
            fprintf(stderr, "503: %s\n", c.w[i].body.data ? c.w[i].body.data : "");
        }
        *ok += c.w[i].status >= 200 && c.w[i].status < 300;
    }
    th_crowd_free(&c);
    return unavailable;
}

static void burst_after_restart_gets_no_503(void **state)
{
    const char *env[] = {"ROWLOCK_POOL_SIZE=16", "ROWLOCK_WORKERS=16", "ROWLOCK_THREADS=2", NULL};
    assert_int_equal(th_svc_run(env), 0);
    json_decref(th_call(th_svc.port, "PUT", "/queues/q", "{}", 201));
    int ok = 0;
    assert_int_equal(burst(th_svc.port, &ok), 0);
    assert_int_equal(ok, BURST);
    double opened = th_metric(th_svc.port, "rowlock_db_pool_connected");
    fprintf(stderr, "pooled connections open before the restart: %g\n", opened);
    assert_true(opened >= 4); /* enough warm connections for the restart to break */

    th_pgctl("stop", 0);
    th_pgctl("start", 0);
    sleep(2);
    int unavailable = burst(th_svc.port, &ok);
    fprintf(stderr, "after the restart: %d of %d answered 503, %d succeeded\n", unavailable, BURST,
            ok);
    assert_int_equal(unavailable, 0);
    assert_int_equal(ok, BURST);
    /* the pool found the closed connections before using them */
    assert_true(th_metric(th_svc.port, "rowlock_db_pool_stale_total") >= 1);
    assert_int_equal(th_service_stop(&th_svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(burst_after_restart_gets_no_503),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
