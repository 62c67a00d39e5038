/* A write that waits on a topic's DELETE: forced interleaving. The test's own transaction plays
 * the DELETE as db/topics.c runs it (the topic's row deleted, its rows with it, its offset
 * sequence dropped; not yet committed); a write of the topic, which still finds the topic's row
 * until that commits, comes to wait on it (shown waiting in pg_stat_activity before the test goes
 * on): a produce on the sequence's lock, a PATCH of a new key on the topic row (its headless
 * row's foreign key). The DELETE commits. Each must answer 404 topic_not_found and leave nothing
 * of the topic. The produce finds the sequence it waited for gone, which PostgreSQL reports as
 * an internal error (the sequence was bound by its OID), not a missing relation: a 500 before
 * db_topic_missing knew it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

struct writer {
    const char *method, *path, *body;
    const char *const *headers;
    struct th_response r;
    int rc;
};

static const char *const json_body[] = {"Content-Type: application/json", NULL};
static const char *const merge_patch[] = {"Content-Type: application/merge-patch+json", NULL};

static void *write_alone(void *arg)
{
    struct writer *w = arg;
    w->rc = th_http(th_svc.port, w->method, w->path, w->headers, w->body, strlen(w->body), &w->r);
    return NULL;
}

static void write_waits_on_the_delete(struct writer *w)
{
    json_decref(th_svc_call("PUT", "/topics/d", "{}", 201));
    json_decref(th_svc_call("POST", "/topics/d/messages", "{\"key\":\"old\",\"value\":1}", 201));
    PGconn *deleter = th_pg(th_svc_dburl), *observer = th_pg(th_svc_dburl);
    int64_t id = th_svc_sql_int("SELECT id FROM rowlock.topics WHERE name = 'd'");
    char sql[256];
    PQclear(th_sql(deleter, "BEGIN"));
    PQclear(th_sql(deleter, "DELETE FROM rowlock.topics WHERE name = 'd'"));
    snprintf(sql, sizeof(sql), "SELECT rowlock.topic_drop_tables(%lld)", (long long)id);
    PQclear(th_sql(deleter, sql));
    pthread_t t;
    pthread_create(&t, NULL, write_alone, w);
    th_wait_lock_waiter(observer, "the DELETE's lock");
    PQclear(th_sql(deleter, "COMMIT"));
    pthread_join(t, NULL);
    assert_int_equal(w->rc, 0);
    th_assert_problem(&w->r, 404, "topic_not_found");
    th_response_free(&w->r);
    snprintf(sql, sizeof(sql),
             "SELECT (SELECT count(*) FROM rowlock.topic_messages WHERE topic_id = %lld) + "
             "(SELECT count(*) FROM rowlock.topic_heads WHERE topic_id = %lld)",
             (long long)id, (long long)id);
    assert_int_equal(th_svc_sql_int(sql), 0);
    PQfinish(deleter);
    PQfinish(observer);
}

static void produce_waiting_on_a_delete_is_not_found(void **state)
{
    (void)state;
    struct writer w = {.method = "POST",
                       .path = "/topics/d/messages",
                       .body = "{\"key\":\"new\",\"value\":2}",
                       .headers = json_body};
    write_waits_on_the_delete(&w);
}

static void patch_waiting_on_a_delete_is_not_found(void **state)
{
    (void)state;
    struct writer w = {.method = "PATCH",
                       .path = "/topics/d/keys/new/head",
                       .body = "{\"b\":2}",
                       .headers = merge_patch};
    write_waits_on_the_delete(&w);
}

static int setup(void **state)
{
    (void)state;
    return th_svc_start("topic_delete_race", NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(produce_waiting_on_a_delete_is_not_found),
        cmocka_unit_test(patch_waiting_on_a_delete_is_not_found),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
