/* PostgreSQL going away and coming back (stopped and started for real through
 * ROWLOCK_TEST_PGCTL): /readyz turns 503 database_unavailable with Retry-After while it is
 * down, /healthz keeps answering, /readyz is 200 again after the restart on reconnected pool
 * connections, and the process never crashes. Also: startup waits, with log lines, for a
 * database that is not up yet. Runs alone: it stops the server every other test uses. */
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
    return th_svc_db("restart");
}

static int teardown(void **state)
{
    /* whatever happened, leave the server running for the tests after this one */
    return th_pgctl_leave_running();
}

static long status_of(int port, const char *path, char *code, size_t codesize, int *retry_after)
{
    struct th_response r;
    if (th_http(port, "GET", path, NULL, NULL, 0, &r) != 0)
        return -1;
    snprintf(code, codesize, "%s", th_problem_code(&r));
    char ra[32] = "";
    *retry_after = th_header(&r, "Retry-After", ra, sizeof(ra)) == 0 ? atoi(ra) : 0;
    long s = r.status;
    th_response_free(&r);
    return s;
}

static void readyz_follows_the_database_down_and_up(void **state)
{
    struct th_service svc;
    const char *env[] = {"ROWLOCK_POOL_SIZE=4", "ROWLOCK_THREADS=2",
                         "ROWLOCK_DB_CONNECT_TIMEOUT_S=2", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    char code[64];
    int retry;
    /* warm every pooled connection so that all of them break on the restart */
    for (int i = 0; i < 8; i++)
        assert_int_equal(status_of(svc.port, "/readyz", code, sizeof(code), &retry), 200);

    th_pgctl("stop", 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(status_of(svc.port, "/readyz", code, sizeof(code), &retry), 503);
        assert_string_equal(code, "database_unavailable");
        assert_true(retry >= 1);
        assert_int_equal(status_of(svc.port, "/healthz", code, sizeof(code), &retry), 200);
    }
    th_pgctl("start", 0);
    long s = 0;
    for (int i = 0; i < 300 && s != 200; i++) {
        s = status_of(svc.port, "/readyz", code, sizeof(code), &retry);
        if (s != 200)
            usleep(100000);
    }
    assert_int_equal(s, 200);
    /* every connection is usable again, not just one */
    for (int i = 0; i < 8; i++)
        assert_int_equal(status_of(svc.port, "/readyz", code, sizeof(code), &retry), 200);
    assert_int_equal(kill(svc.pid, 0), 0);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void *start_database_later(void *arg)
{
    struct th_service *svc = arg;
    for (int i = 0; i < 1000 && !th_service_logged(svc, "waiting for the database"); i++)
        usleep(10000);
    th_pgctl("start", 0);
    return NULL;
}

static void startup_waits_for_the_database(void **state)
{
    th_pgctl("stop", 0);
    struct th_service svc;
    const char *env[] = {"ROWLOCK_DB_STARTUP_WAIT_S=60", NULL};
    assert_int_equal(th_service_spawn(&svc, th_svc_dburl, env), 0);
    pthread_t t; /* watches the log of the service spawned, never of one being set up */
    pthread_create(&t, NULL, start_database_later, &svc);
    int rc = th_service_await(&svc);
    pthread_join(t, NULL);
    assert_int_equal(rc, 0);
    assert_true(th_service_logged(&svc, "\"msg\":\"waiting for the database\",\"attempt\":1,"));
    char code[64];
    int retry;
    assert_int_equal(status_of(svc.port, "/readyz", code, sizeof(code), &retry), 200);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void startup_gives_up_after_the_wait(void **state)
{
    th_pgctl("stop", 0);
    struct th_service svc;
    const char *env[] = {"ROWLOCK_DB_STARTUP_WAIT_S=2", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), -1);
    assert_int_equal(svc.exit_code, 1);
    assert_true(th_service_logged(&svc, "database did not become reachable"));
    th_pgctl("start", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(readyz_follows_the_database_down_and_up),
        cmocka_unit_test(startup_waits_for_the_database),
        cmocka_unit_test(startup_gives_up_after_the_wait),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
