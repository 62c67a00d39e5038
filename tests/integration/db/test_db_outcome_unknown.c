/* One 503 code for two outcomes: a write whose connection is lost after
 * its COMMIT was sent may have committed, and must say so. A synchronous standby that never
 * acknowledges (db_syncrep.h) holds the enqueue's COMMIT; the test terminates that backend
 * (pg_terminate_backend), and PostgreSQL ends the session after the commit was written locally
 * ("the transaction has already committed locally"). The answer must be 503 outcome_unknown,
 * never retried by the service, and the job is there: a retry with its dedupe key answers 200
 * duplicate. Before the code existed this answered database_unavailable, which promises that
 * nothing was committed. Also: a connection killed before anything reached the server (an
 * idle pooled connection terminated) is not reported at all: the request runs on a fresh one.
 * Runs alone: it changes a setting of the whole server. */
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

#define DB TH_DB_PREFIX "outcome"

static int setup(void **state)
{
    syncrep_set(""); /* whatever an earlier run left */
    if (th_svc_db("outcome") != 0)
        return -1;
    syncrep_database_on(DB);
    /* a deadline far away: here the backend is killed, the deadline does not cut */
    const char *env[] = {"ROWLOCK_DB_DEADLINE_MS=30000", "ROWLOCK_POOL_SIZE=2", NULL};
    return th_svc_run(env);
}

static int teardown(void **state)
{
    syncrep_set("");
    th_svc_teardown(state);
    return 0;
}

struct write {
    const char *body;
    long status;
    char code[64];
};

static void *post_job(void *arg)
{
    struct write *w = arg;
    struct th_response r;
    const char *const headers[] = {"Content-Type: application/json", NULL};
    w->status = -1;
    if (th_http(th_svc.port, "POST", "/queues/q/jobs", headers, w->body, strlen(w->body), &r) ==
        0) {
        w->status = r.status;
        snprintf(w->code, sizeof(w->code), "%s", th_problem_code(&r));
        th_response_free(&r);
    }
    return NULL;
}

static void connection_killed_after_commit_is_outcome_unknown(void **state)
{
    json_decref(th_call(th_svc.port, "PUT", "/queues/q", "{}", 201));
    syncrep_set("rowlock_no_such_standby");
    struct write w = {"{\"payload\": {\"n\": 1}, \"dedupe_key\": \"killed-1\"}", 0, ""};
    pthread_t t;
    pthread_create(&t, NULL, post_job, &w);
    int pid = syncrep_waiting_backend(DB, 10000);
    if (pid != 0)
        syncrep_terminate(pid);
    else
        syncrep_set(""); /* let the write finish, so that the test ends */
    pthread_join(t, NULL);
    syncrep_set("");
    fprintf(stderr, "the write whose backend was killed at COMMIT answered %ld %s\n", w.status,
            w.code);
    assert_int_not_equal(pid, 0);
    assert_int_equal(w.status, 503);
    assert_string_equal(w.code, "outcome_unknown");
    /* it had committed: the row is there, and a retry with the dedupe key is a duplicate */
    assert_int_equal(syncrep_count(th_svc_dburl, "SELECT count(*) FROM rowlock.jobs"), 1);
    json_t *again = th_call(th_svc.port, "POST", "/queues/q/jobs", w.body, 200);
    assert_true(json_is_true(json_object_get(again, "duplicate")));
    json_decref(again);
}

static void idle_connection_killed_is_not_reported(void **state)
{
    json_decref(th_call(th_svc.port, "GET", "/queues/q", NULL, 200)); /* a pooled connection */
    /* every pooled connection is idle now; kill them all behind the service's back */
    PGconn *c = th_admin_pg();
    PGresult *r = th_sql(c, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = '" DB "' AND pid <> pg_backend_pid()");
    long killed = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    fprintf(stderr, "idle connections terminated: %ld\n", killed);
    assert_true(killed >= 1);
    for (int i = 0; i < 4; i++) {
        struct write w = {"{\"payload\": {\"n\": 2}}", 0, ""};
        post_job(&w);
        assert_int_equal(w.status, 201);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(connection_killed_after_commit_is_outcome_unknown),
        cmocka_unit_test(idle_connection_killed_is_not_reported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
