/* Writes while commits hang: with a synchronous standby that never
 * acknowledges (db_syncrep.h), a COMMIT waits without limit and statement_timeout does not
 * cover that wait. The service's deadline (ROWLOCK_DB_DEADLINE_MS, 2 s here) must answer the
 * write 503 within it, by closing the connection (never cancelling the COMMIT, which would make
 * a commit the standby lacks visible): since COMMIT was on its way, the code is
 * outcome_unknown, and nothing is acknowledged or visible meanwhile. /readyz, whose probe
 * transaction must commit, answers 503 too. Once the standby setting is reset the waiting
 * commit completes (the job did commit: a retry with its dedupe key is a duplicate, which is
 * why the answer said outcome_unknown and not database_unavailable) and the service recovers
 * by itself. Before the deadline existed, the write hung until the setting was reset (here by
 * a rescuer thread after 10 s) and /readyz stayed 200. Runs alone: it changes a setting of the
 * whole server. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "db_syncrep.h"
#include "harness_svc.h"

#define DEADLINE_MS    2000
#define RESCUE_AFTER_S 10.0

static int setup(void **state)
{
    syncrep_set(""); /* whatever an earlier run left */
    if (th_svc_db("stuckcommit") != 0)
        return -1;
    syncrep_database_on(TH_DB_PREFIX "stuckcommit");
    return 0;
}

static int teardown(void **state)
{
    syncrep_set("");
    th_svc_teardown(state);
    return 0;
}

/* Resets the standby setting after RESCUE_AFTER_S unless told to stop: keeps a hanging request
 * (the code before the deadline) from hanging the test. */
static pthread_mutex_t rescue_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rescue_cv = PTHREAD_COND_INITIALIZER;
static int rescue_cancelled;

static void *rescuer(void *arg)
{
    (void)arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)RESCUE_AFTER_S;
    pthread_mutex_lock(&rescue_mu);
    int rc = 0;
    while (!rescue_cancelled && rc == 0)
        rc = pthread_cond_timedwait(&rescue_cv, &rescue_mu, &until);
    int fire = !rescue_cancelled;
    pthread_mutex_unlock(&rescue_mu);
    if (fire) {
        fprintf(stderr, "rescuer: resetting synchronous_standby_names after %.0f s\n",
                RESCUE_AFTER_S);
        syncrep_set("");
    }
    return NULL;
}

static long get_status(const char *path, char *code, size_t size, double *seconds)
{
    struct th_response r;
    double t0 = th_now();
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    *seconds = th_now() - t0;
    snprintf(code, size, "%s", th_problem_code(&r));
    long s = r.status;
    th_response_free(&r);
    return s;
}

static const char job[] = "{\"payload\": {\"n\": 1}, \"dedupe_key\": \"stuck-1\"}";

static void stuck_commit_answers_503_within_the_deadline(void **state)
{
    char deadline[64];
    snprintf(deadline, sizeof(deadline), "ROWLOCK_DB_DEADLINE_MS=%d", DEADLINE_MS);
    const char *env[] = {"ROWLOCK_STATEMENT_TIMEOUT_MS=1000", deadline, "ROWLOCK_POOL_SIZE=4",
                         NULL};
    assert_int_equal(th_svc_run(env), 0);
    json_decref(th_call(th_svc.port, "PUT", "/queues/q", "{}", 201));
    char code[64];
    double secs;
    assert_int_equal(get_status("/readyz", code, sizeof(code), &secs), 200);

    syncrep_set("rowlock_no_such_standby");
    pthread_t t;
    pthread_create(&t, NULL, rescuer, NULL);
    struct th_response r;
    double t0 = th_now();
    assert_int_equal(th_http(th_svc.port, "POST", "/queues/q/jobs",
                             (const char *const[]){"Content-Type: application/json", NULL}, job,
                             strlen(job), &r),
                     0);
    double took = th_now() - t0;
    fprintf(stderr, "stuck write answered %ld %s after %.2f s (deadline %d ms)\n", r.status,
            th_problem_code(&r), took, DEADLINE_MS);
    long status = r.status;
    char wcode[64];
    snprintf(wcode, sizeof(wcode), "%s", th_problem_code(&r));
    th_response_free(&r);
    /* nothing acknowledged, and nothing visible while the commit waits for the standby */
    long visible = syncrep_count(th_svc_dburl, "SELECT count(*) FROM rowlock.jobs");
    long readyz = get_status("/readyz", code, sizeof(code), &secs);
    fprintf(stderr, "readyz while commits hang: %ld %s after %.2f s\n", readyz, code, secs);

    pthread_mutex_lock(&rescue_mu);
    rescue_cancelled = 1;
    pthread_cond_signal(&rescue_cv);
    pthread_mutex_unlock(&rescue_mu);
    pthread_join(t, NULL);
    syncrep_set("");

    assert_int_equal(status, 503);
    assert_string_equal(wcode, "outcome_unknown");
    assert_true(took >= DEADLINE_MS / 1000.0 * 0.9 && took < DEADLINE_MS / 1000.0 + 1.5);
    assert_int_equal(visible, 0);
    assert_int_equal(readyz, 503);
    assert_string_equal(code, "database_unavailable");
    assert_true(secs < DEADLINE_MS / 1000.0 + 1.5);

    /* recovered by itself: ready again, and the cut write had in fact committed */
    long s = 0;
    for (int i = 0; i < 100 && s != 200; i++) {
        s = get_status("/readyz", code, sizeof(code), &secs);
        if (s != 200)
            usleep(100000);
    }
    assert_int_equal(s, 200);
    json_t *again = th_call(th_svc.port, "POST", "/queues/q/jobs", job, 200);
    assert_true(json_is_true(json_object_get(again, "duplicate")));
    json_decref(again);
    json_decref(th_call(th_svc.port, "POST", "/queues/q/jobs", "{\"payload\": {\"n\": 2}}", 201));
    assert_true(th_metric(th_svc.port, "rowlock_db_deadline_cuts_total") >= 2);
    assert_int_equal(th_service_stop(&th_svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stuck_commit_answers_503_within_the_deadline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
