/* Head writes remember a topic's id by name, as a hint for sending the topic lookup with the
 * locked read (db/topic_handles.c). The hint is never trusted: two rowlock processes on one
 * database, A writing heads and B deleting and recreating the topic under A's feet, show that after
 * B recreates the topic (a new id) A's PATCH lands on the new topic alone; after B deletes it, A's
 * PATCH is 404 topic_not_found and leaves no row behind; and a PATCH naming an unknown producer on
 * a hinted topic is 404 producer_not_found and leaves no headless row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static struct th_service a, b;
static PGconn *sql;

static int setup(void **state)
{
    (void)state;
    if (th_svc_db("stale_hint") != 0)
        return -1;
    if (th_service_start(&a, th_svc_dburl, NULL) != 0 ||
        th_service_start(&b, th_svc_dburl, NULL) != 0)
        return -1;
    sql = th_svc_pg();
    return 0;
}

static int teardown(void **state)
{
    th_svc_teardown(state); /* sql's session */
    th_service_stop(&a);
    th_service_stop(&b);
    return 0;
}

/* A request that must answer want; returns the response (th_response_free it). */
static struct th_response call(struct th_service *s, const char *method, const char *path,
                               const char *type, const char *body, long want)
{
    char header[96];
    snprintf(header, sizeof(header), "Content-Type: %s", type);
    const char *headers[] = {header, NULL};
    struct th_response r;
    assert_int_equal(
        th_http(s->port, method, path, body ? headers : NULL, body, body ? strlen(body) : 0, &r),
        0);
    if (r.status != want)
        fprintf(stderr, "%s %s: %ld %s\n", method, path, r.status, r.body ? r.body : "");
    assert_int_equal(r.status, want);
    return r;
}

static void patch(struct th_service *s, const char *path, const char *body, long want,
                  const char *code)
{
    struct th_response r = call(s, "PATCH", path, "application/merge-patch+json", body, want);
    if (code != NULL)
        assert_string_equal(th_problem_code(&r), code);
    th_response_free(&r);
}

static void put_topic(struct th_service *s, long want)
{
    struct th_response r = call(s, "PUT", "/topics/t", "application/json", "{}", want);
    th_response_free(&r);
}

static long long count(const char *query)
{
    PGresult *r = th_sql(sql, query);
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static long long topic_id(void)
{
    return count("SELECT coalesce((SELECT id FROM rowlock.topics WHERE name = 't'), 0)");
}

static void head_value(struct th_service *s, const char *key, const char *want_json)
{
    char path[128];
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    struct th_response r = call(s, "GET", path, NULL, NULL, 200);
    json_t *want = json_loads(want_json, 0, NULL);
    assert_non_null(want);
    assert_true(json_equal(json_object_get(r.json, "value"), want));
    json_decref(want);
    th_response_free(&r);
}

static void recreated_topic_gets_the_write(void **state)
{
    (void)state;
    put_topic(&b, 201);
    long long first = topic_id();
    patch(&a, "/topics/t/keys/k/head", "{\"old\":1}", 200, NULL); /* A now hints t -> first */
    patch(&a, "/topics/t/keys/k/head", "{\"old\":2}", 200, NULL);
    struct th_response r = call(&b, "DELETE", "/topics/t", "application/json", NULL, 200);
    th_response_free(&r);
    put_topic(&b, 201);
    long long second = topic_id();
    assert_true(second != first);
    patch(&a, "/topics/t/keys/k/head", "{\"new\":1}", 200, NULL);
    head_value(&a, "k", "{\"new\":1}"); /* nothing of the old topic's head */
    head_value(&b, "k", "{\"new\":1}");
    char q[160];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM rowlock.topic_messages WHERE topic_id = %lld AND NOT hole",
             second);
    assert_int_equal(count(q), 1);
    /* and A keeps writing there, hinted afresh */
    patch(&a, "/topics/t/keys/k/head", "{\"new\":2}", 200, NULL);
    assert_int_equal(count(q), 2);
}

static void deleted_topic_is_not_found(void **state)
{
    (void)state;
    put_topic(&b, topic_id() ? 200 : 201);
    patch(&a, "/topics/t/keys/gone/head", "{\"x\":1}", 200, NULL); /* hinted */
    struct th_response r = call(&b, "DELETE", "/topics/t", "application/json", NULL, 200);
    th_response_free(&r);
    patch(&a, "/topics/t/keys/gone/head", "{\"x\":2}", 404, "topic_not_found");
    assert_int_equal(count("SELECT count(*) FROM rowlock.topics"), 0);
    /* nothing of it is left: no head row of any topic, no offset sequence */
    assert_int_equal(count("SELECT count(*) FROM rowlock.topic_heads"), 0);
    assert_int_equal(count("SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                           "ON n.oid = c.relnamespace WHERE nspname = 'rowlock' AND "
                           "relname LIKE 'topic_offsets_%'"),
                     0);
}

static void unknown_producer_on_a_hinted_topic_writes_nothing(void **state)
{
    (void)state;
    put_topic(&b, topic_id() ? 200 : 201);
    patch(&a, "/topics/t/keys/seen/head", "{\"x\":1}", 200, NULL); /* hinted */
    patch(&a, "/topics/t/keys/fresh/head?producer=nobody", "{\"x\":1}", 404, "producer_not_found");
    char q[160];
    snprintf(q, sizeof(q),
             "SELECT count(*) FROM rowlock.topic_heads WHERE topic_id = %lld AND key = 'fresh'",
             topic_id());
    assert_int_equal(count(q), 0); /* not even a headless row */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recreated_topic_gets_the_write),
        cmocka_unit_test(deleted_topic_is_not_found),
        cmocka_unit_test(unknown_producer_on_a_hinted_topic_writes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
