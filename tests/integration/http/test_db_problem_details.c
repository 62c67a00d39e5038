/* A database failure reaches the client as a sentence written for people, with the SQLSTATE in a
 * member of its own: never PostgreSQL's or libpq's text ("ERROR:  canceling statement due to
 * statement timeout", "CONTEXT: ...", "FATAL:  terminating connection ..."), which the log keeps
 * with the request id. Provoked for real: a request waits on a table lock held by a session of
 * the test until the statement timeout (1 s here) cancels it; then the backends of a waiting
 * request are terminated under it (pg_terminate_backend). */
#include <pthread.h>
#include <stdatomic.h>
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
    const char *env[] = {"ROWLOCK_STATEMENT_TIMEOUT_MS=1000", NULL};
    if (th_svc_start("db_problem_details", env) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/t/keys/k/head", "{\"n\": 1}", 200));
    return 0;
}

/* Holds an ACCESS EXCLUSIVE lock on the topics table in a transaction of th_svc_pg's session:
 * every topic request waits on it. */
static void lock_topics(void)
{
    PQclear(th_sql(th_svc_pg(), "BEGIN"));
    PQclear(th_sql(th_svc_pg(), "LOCK TABLE rowlock.topics IN ACCESS EXCLUSIVE MODE"));
}

static void unlock_topics(void)
{
    PQclear(th_sql(th_svc_pg(), "ROLLBACK"));
}

/* The detail is rowlock's sentence, free of the database's own words. */
static void assert_written_for_people(const struct th_response *r)
{
    const char *detail = json_string_value(json_object_get(r->json, "detail"));
    assert_non_null(detail);
    fprintf(stderr, "detail: %s\n", detail);
    const char *raw[] = {"ERROR",     "FATAL",       "CONTEXT",
                         "canceling", "terminating", "server closed",
                         "rowlock.",  "relation",    "statement timeout\n"};
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++)
        if (strstr(detail, raw[i]) != NULL)
            fail_msg("detail holds the database's text (%s): %s", raw[i], detail);
}

static void statement_timeout_is_a_sentence_and_a_sqlstate(void **state)
{
    lock_topics();
    struct th_response r;
    const char *id[] = {"X-Request-Id: timeout-1", NULL};
    assert_int_equal(th_http(th_svc.port, "GET", "/topics/t/keys/k/head", id, NULL, 0, &r), 0);
    unlock_topics();
    th_assert_problem(&r, 503, "database_timeout");
    assert_written_for_people(&r);
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    assert_non_null(strstr(detail, "the database did not answer in time"));
    /* statement_timeout and lock_timeout are both 1 s: either may fire first */
    const char *sqlstate = json_string_value(json_object_get(r.json, "sqlstate"));
    assert_non_null(sqlstate);
    assert_true(strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "55P03") == 0);
    th_response_free(&r);
    /* the database's own text is in the log, with the request id */
    assert_true(th_service_logged(&th_svc, "\"request_id\":\"timeout-1\",\"code\":"
                                           "\"database_timeout\",\"sqlstate\":\""));
    assert_true(th_service_logged(&th_svc, "due to statement timeout") ||
                th_service_logged(&th_svc, "could not obtain lock"));
}

struct waiting_read {
    struct th_response r;
    atomic_int done;
};

static void *get_head(void *arg)
{
    struct waiting_read *w = arg;
    const char *id[] = {"X-Request-Id: terminated-1", NULL};
    if (th_http(th_svc.port, "GET", "/topics/t/keys/k/head", id, NULL, 0, &w->r) != 0)
        w->r.status = -1;
    atomic_store(&w->done, 1);
    return NULL;
}

/* A read lost before anything ran is run once more on a fresh connection, so every backend that
 * comes to wait on the lock is terminated until the request is answered. */
static void terminated_connection_is_a_sentence_and_a_sqlstate(void **state)
{
    lock_topics();
    static struct waiting_read w;
    memset(&w.r, 0, sizeof(w.r));
    atomic_init(&w.done, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, get_head, &w), 0);
    /* (another session: the locking one would see pg_stat_activity as of its first look) */
    PGconn *observer = th_pg(th_svc_dburl);
    th_wait_lock_waiter(observer, "the head read");
    for (int i = 0; i < 500 && !atomic_load(&w.done); i++) {
        PQclear(th_sql(observer, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                                 "datname = current_database() AND wait_event_type = 'Lock'"));
        usleep(5000);
    }
    PQfinish(observer);
    pthread_join(t, NULL);
    unlock_topics();
    th_assert_problem(&w.r, 503, "database_unavailable");
    assert_written_for_people(&w.r);
    /* libpq may see the server's FATAL (57P01) or only the closed socket (no SQLSTATE) */
    const char *sqlstate = json_string_value(json_object_get(w.r.json, "sqlstate"));
    const char *detail = json_string_value(json_object_get(w.r.json, "detail"));
    if (sqlstate != NULL) {
        assert_string_equal(sqlstate, "57P01");
        assert_non_null(strstr(detail, "the database ended the connection"));
    } else {
        assert_false(json_object_get(w.r.json, "sqlstate") != NULL);
        assert_non_null(strstr(detail, "the database connection was lost"));
    }
    th_response_free(&w.r);
    assert_true(th_service_logged(&th_svc, "\"request_id\":\"terminated-1\",\"code\":"
                                           "\"database_unavailable\""));
    /* the pool opens a new connection: the service answers again */
    json_decref(th_svc_get("/topics/t/keys/k/head"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(statement_timeout_is_a_sentence_and_a_sqlstate),
        cmocka_unit_test(terminated_connection_is_a_sentence_and_a_sqlstate),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
