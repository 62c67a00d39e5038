/* The long-poll tests' two processes and their shared checks (long_poll.h). Knows no resource
 * family: the tests say what waits and what wakes it. */
#include "long_poll.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

struct th_service lp_svc, lp_quiet;

#define STR_(x) #x
#define STR(x)  STR_(x)

int lp_start(const char *name, int waiters)
{
    const char *env[] = {"ROWLOCK_CONNECTION_LIMIT=4096", "ROWLOCK_PER_IP_CONNECTION_LIMIT=4096",
                         "ROWLOCK_POOL_SIZE=" STR(LP_POOL_SIZE), "ROWLOCK_MAX_WAIT_S=30", NULL};
    const char *quiet_env[] = {"ROWLOCK_POLL_INTERVAL_MS=60000", NULL};
    if (th_raise_fd_limit(4 * (unsigned long)waiters) != 0 || th_svc_db(name) != 0)
        return -1;
    if (th_service_start(&lp_svc, th_svc_dburl, env) != 0)
        return -1;
    return th_service_start(&lp_quiet, th_svc_dburl, quiet_env);
}

int lp_teardown(void **state)
{
    (void)state;
    int a = th_service_stop(&lp_quiet), b = th_service_stop(&lp_svc);
    return a == 0 && b == 0 ? 0 : -1;
}

void lp_create(const char *path)
{
    static const char *const json_ct[] = {"Content-Type: application/json", NULL};
    struct th_response r;
    assert_int_equal(th_http(lp_svc.port, "PUT", path, json_ct, "{}", 2, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
}

double lp_await_waiting(int port, double n, double timeout_s)
{
    double v = -1, give_up = th_now() + timeout_s;
    while ((v = th_metric(port, "rowlock_http_long_polls_waiting")) < n && th_now() < give_up)
        usleep(20000);
    return v;
}

void lp_assert_healthz_prompt(void)
{
    struct th_response r;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(th_http(lp_svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        fprintf(stderr, "/healthz took %.3f s\n", r.seconds);
        assert_true(r.seconds < 1.0);
        th_response_free(&r);
        usleep(300000);
    }
}

double lp_pool_in_use_max(void)
{
    double in_use_max = 0;
    for (int i = 0; i < 5; i++) {
        double in_use = th_metric(lp_svc.port, "rowlock_db_pool_in_use");
        in_use_max = in_use > in_use_max ? in_use : in_use_max;
        assert_int_equal((int)th_metric(lp_svc.port, "rowlock_db_pool_size"), LP_POOL_SIZE);
        usleep(200000);
    }
    return in_use_max;
}
