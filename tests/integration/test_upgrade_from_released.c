/* THE UPGRADE TEST. A database is filled through the previous release's binary (built from the
 * commit named in db/schema/released/6/RELEASE; its path in ROWLOCK_TEST_PREV_BINARY, which
 * deploy/local.sh test sets): topics with heads, a headless row and a tombstone, a log follower's
 * `next`; a queue with a pending job, a processing one under a live lease, a failed and a
 * succeeded one with two attempts each; ledgers with objects, a tombstone, events, a checkpoint
 * and a horizon. This build then migrates it (--migrate-only): every row of every table is
 * unchanged and every migration is recorded once, in order. Then this build serves it: the lease
 * taken before is completed with its fence, the follower continues from its `next`, a
 * checkpoint replay applies nothing twice, and a consumer cursor (migration 8) is created on the
 * old topic, read from and committed; rowlock.jobs has migration 9's fillfactor. Last, the previous
 * release still starts on the migrated database and serves it (the expand rule): deleting a topic
 * there takes its consumers along. This build finds it current after. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "schema_fixture.h"

/* What the filling left for the checks after the upgrade. */
struct filled {
    json_int_t log_next;    /* the follower's position */
    json_int_t live_job;    /* the job under a live lease */
    json_int_t live_fence;  /* its fence */
    json_int_t pending_job; /* the job nobody claimed */
    json_int_t done_job;    /* succeeded after a failed attempt */
    json_int_t failed_job;  /* failed twice: out of attempts */
    json_int_t events;      /* events of ledger l */
    json_int_t horizon;     /* of ledger h */
};

static const char *prev_binary(void)
{
    const char *p = getenv("ROWLOCK_TEST_PREV_BINARY");
    if (p == NULL || p[0] == '\0' || access(p, X_OK) != 0)
        fail_msg("ROWLOCK_TEST_PREV_BINARY is not set to the previous release's binary (\"%s\"): "
                 "deploy/local.sh test builds it into build-prev/ from the commit in "
                 "db/schema/released/6/RELEASE; the upgrade test cannot run without it",
                 p ? p : "");
    return p;
}

/* Starts the previous release. 0 or -1. */
static int start_prev(struct th_service *s, const char *prev, const char *url,
                      const char *const *env)
{
    return th_service_start_binary(s, prev, url, env);
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s", member);
    return json_integer_value(v);
}

/* Claims one job for owner; returns its lease (a new reference). */
static json_t *claim_one(int port, const char *owner)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":1}", owner);
    json_t *r = th_call(port, "POST", "/queues/q/leases", body, 200);
    json_t *lease = json_array_get(json_object_get(r, "leases"), 0);
    assert_non_null(lease);
    json_incref(lease);
    json_decref(r);
    return lease;
}

/* Enqueues a job and runs it through attempts: each 'f' claims and fails, 'c' claims and
 * completes, 'l' claims and keeps the lease. Returns the job id; *fence the last fence. */
static json_int_t job_through(int port, const char *steps, json_int_t *fence)
{
    json_t *r = th_call(port, "POST", "/queues/q/jobs", "{\"payload\":{\"n\":1}}", 201);
    json_int_t id = int_at(r, "id");
    json_decref(r);
    for (const char *s = steps; *s != '\0'; s++) {
        const char *owner = *s == 'l' ? "worker-live" : "worker-1";
        json_t *lease = claim_one(port, owner);
        assert_int_equal(int_at(lease, "job_id"), id);
        *fence = int_at(lease, "fence");
        json_decref(lease);
        char path[128], body[160];
        snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"fence\":%" JSON_INTEGER_FORMAT "%s}",
                 owner, *fence, *s == 'f' ? ",\"error\":{\"why\":\"x\"}" : "");
        snprintf(path, sizeof(path), "/queues/q/leases/%" JSON_INTEGER_FORMAT "/%s", id,
                 *s == 'f' ? "fail" : "complete");
        if (*s != 'l')
            json_decref(th_call(port, "POST", path, body, 200));
    }
    return id;
}

static void fill_topics(int port, struct filled *f)
{
    json_decref(th_call(port, "PUT", "/topics/t", "{\"headless_ttl_seconds\":86400}", 201));
    json_decref(th_call(port, "POST", "/topics/t/messages",
                        "{\"messages\":[{\"key\":\"a\",\"value\":{\"v\":1}},"
                        "{\"key\":\"b\",\"value\":{\"v\":1}},{\"key\":\"c\",\"value\":[1]}]}",
                        201));
    json_decref(
        th_call(port, "POST", "/topics/t/messages", "{\"key\":\"a\",\"value\":{\"v\":2}}", 201));
    json_decref(th_call(port, "DELETE", "/topics/t/keys/b/head", NULL, 200)); /* a tombstone */
    /* a conditional write that fails still locks the new key: a headless row */
    static const char *const if_match[] = {"Content-Type: application/json", "If-Match: \"999\"",
                                           NULL};
    struct th_response r;
    assert_int_equal(th_http(port, "PUT", "/topics/t/keys/h/head", if_match, "{}", 2, &r), 0);
    assert_int_equal(r.status, 412);
    th_response_free(&r);
    json_t *t = th_get_json(port, "/topics/t");
    assert_int_equal(int_at(json_object_get(t, "counts"), "headless_rows"), 1);
    json_decref(t);
    json_t *page = th_get_json(port, "/topics/t/messages?after=0&limit=100");
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 5);
    f->log_next = int_at(page, "next");
    json_decref(page);
}

static void fill_queues(int port, struct filled *f)
{
    json_decref(th_call(port, "PUT", "/queues/q",
                        "{\"max_attempts\":2,\"lease_seconds\":3600,\"backoff_base_seconds\":0}",
                        201));
    json_int_t fence = 0;
    f->done_job = job_through(port, "fc", &fence);
    f->failed_job = job_through(port, "ff", &fence);
    f->live_job = job_through(port, "l", &f->live_fence);
    json_t *r = th_call(port, "POST", "/queues/q/jobs", "{\"payload\":{\"n\":2}}", 201);
    f->pending_job = int_at(r, "id");
    json_decref(r);
}

static const char tx1[] = "{\"digest\":\"tx-1\",\"writes\":[{\"object_id\":\"o1\",\"version\":1,"
                          "\"type\":\"Coin\",\"data\":{\"value\":10}},{\"object_id\":\"o2\","
                          "\"version\":1,\"type\":\"Coin\",\"data\":{}}],"
                          "\"events\":[{\"type\":\"Minted\",\"data\":{\"coin\":\"o1\"}}]}";
static const char tx2[] = "{\"digest\":\"tx-2\",\"deletes\":[{\"object_id\":\"o2\",\"version\":2}],"
                          "\"events\":[{\"type\":\"Burned\"}]}";

static void fill_ledgers(int port, struct filled *f)
{
    char body[1024];
    json_decref(th_call(port, "PUT", "/ledgers/l", "{\"tombstone_retention_seconds\":86400}", 201));
    json_decref(th_call(port, "POST", "/ledgers/l/transactions", tx1, 201));
    json_decref(th_call(port, "POST", "/ledgers/l/transactions", tx2, 201));
    snprintf(body, sizeof(body), "{\"sequence\":1,\"transactions\":[%s]}", tx1);
    json_decref(th_call(port, "POST", "/ledgers/l/checkpoints", body, 201));
    json_t *ev = th_get_json(port, "/ledgers/l/events");
    f->events = (json_int_t)json_array_size(json_object_get(ev, "events"));
    assert_int_equal(f->events, 2);
    json_decref(ev);
    /* ledger h: a tombstone purged by the janitor after 1 s, which records the horizon */
    json_decref(th_call(port, "PUT", "/ledgers/h", "{\"tombstone_retention_seconds\":1}", 201));
    json_decref(th_call(port, "POST", "/ledgers/h/checkpoints",
                        "{\"sequence\":1,\"transactions\":[{\"digest\":\"h-1\",\"deletes\":"
                        "[{\"object_id\":\"x\",\"version\":1}]}]}",
                        201));
    json_decref(th_call(port, "POST", "/ledgers/h/checkpoints",
                        "{\"sequence\":2,\"transactions\":[]}", 201));
    for (int i = 0; i < 100; i++) {
        json_t *h = th_get_json(port, "/ledgers/h");
        f->horizon = int_at(h, "horizon");
        json_decref(h);
        if (f->horizon >= 1)
            return;
        usleep(100000);
    }
    fail_msg("the previous release's janitor recorded no horizon on ledger h within 10 s");
}

/* The tables of the rowlock schemas but rowlock.migrations, each with its columns: the shape
 * the snapshots compare (taken before the upgrade, so that what migrations add is left out and
 * checked on its own). */
static json_t *shape(PGconn *c)
{
    return th_sql_rows(
        c, "SELECT quote_ident(t.schemaname) || '.' || quote_ident(t.tablename), "
           "string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_tables t "
           "JOIN pg_attribute a ON a.attrelid = (quote_ident(t.schemaname) || '.' || "
           "quote_ident(t.tablename))::regclass AND a.attnum > 0 AND NOT a.attisdropped "
           "WHERE t.schemaname LIKE 'rowlock%' AND t.tablename <> 'migrations' "
           "GROUP BY 1 ORDER BY 1");
}

/* Every row of every table of shape (its columns only), as text. */
static char *snapshot(PGconn *c, json_t *tables)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    size_t i;
    json_t *t;
    json_array_foreach(tables, i, t)
    {
        const char *name = json_string_value(json_array_get(t, 0));
        char sql[4096];
        snprintf(sql, sizeof(sql),
                 "SELECT coalesce(json_agg(x ORDER BY x::text)::text, '[]') FROM "
                 "(SELECT %s FROM %s) x",
                 json_string_value(json_array_get(t, 1)), name);
        PGresult *rows = th_sql(c, sql);
        fprintf(f, "%s: %s\n", name, PQgetvalue(rows, 0, 0));
        PQclear(rows);
    }
    fclose(f);
    return out;
}

/* What migration 8 added to a filled database: a default on every topic, no consumers. */
static void check_migration_8_added(PGconn *c)
{
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topics "
                                "WHERE retention_ignores_consumers"),
                     0);
    assert_true(tsf_int(c, "SELECT count(*) FROM rowlock.topics") > 0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topic_consumers"), 0);
}

/* What migration 9 changed on a filled database: rowlock.jobs leaves half of each new page free
 * (its rows, compared by the snapshots, are untouched). */
static void check_migration_9_added(PGconn *c)
{
    assert_int_equal(tsf_int(c,
                             "SELECT count(*) FROM pg_class WHERE oid = 'rowlock.jobs'::regclass "
                             "AND 'fillfactor=50' = ANY (reloptions)"),
                     1);
    assert_true(tsf_int(c, "SELECT count(*) FROM rowlock.jobs") > 0);
}

/* A consumer cursor on the topic the previous release filled: created at the beginning, it
 * reads the old log from its start, commits, and reads on from there. */
static void check_consumer_after(int port, const struct filled *f)
{
    json_t *c =
        th_call(port, "PUT", "/topics/t/consumers/old-log", "{\"start\":\"beginning\"}", 201);
    assert_int_equal(int_at(c, "offset"), 0);
    assert_int_equal(int_at(c, "lag_messages"), f->log_next + 1); /* and d, produced since */
    json_decref(c);
    json_t *page = th_get_json(port, "/topics/t/messages?consumer=old-log&limit=100");
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 6);
    json_int_t next = int_at(page, "next");
    json_decref(page);
    char body[128];
    snprintf(body, sizeof(body), "{\"offset\":%" JSON_INTEGER_FORMAT ",\"expect\":0}", next);
    c = th_call(port, "POST", "/topics/t/consumers/old-log/commit", body, 200);
    assert_int_equal(int_at(c, "lag_messages"), 0);
    json_decref(c);
    json_decref(th_call(port, "PUT", "/topics/t2", "{}", 201));
    json_decref(th_call(port, "PUT", "/topics/t2/consumers/c", "{}", 201));
}

static void check_queue_after(int port, const struct filled *f)
{
    char path[128], body[160];
    snprintf(path, sizeof(path), "/queues/q/leases/%" JSON_INTEGER_FORMAT "/complete", f->live_job);
    snprintf(body, sizeof(body), "{\"owner\":\"worker-live\",\"fence\":%" JSON_INTEGER_FORMAT "}",
             f->live_fence + 1);
    json_decref(th_call(port, "POST", path, body, 409)); /* the fence still guards it */
    snprintf(body, sizeof(body),
             "{\"owner\":\"worker-live\",\"fence\":%" JSON_INTEGER_FORMAT ",\"result\":7}",
             f->live_fence);
    json_t *r = th_call(port, "POST", path, body, 200);
    assert_string_equal(json_string_value(json_object_get(r, "state")), "succeeded");
    json_decref(r);
    json_t *lease = claim_one(port, "worker-2");
    assert_int_equal(int_at(lease, "job_id"), f->pending_job);
    json_decref(lease);
    json_int_t ids[] = {f->done_job, f->failed_job};
    const char *states[] = {"succeeded", "failed"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "/queues/q/jobs/%" JSON_INTEGER_FORMAT, ids[i]);
        json_t *job = th_get_json(port, path);
        assert_string_equal(json_string_value(json_object_get(job, "state")), states[i]);
        assert_int_equal(int_at(job, "attempts"), 2);
        json_decref(job);
    }
}

static void check_topic_and_ledger_after(int port, const struct filled *f)
{
    json_decref(
        th_call(port, "POST", "/topics/t/messages", "{\"key\":\"d\",\"value\":{\"new\":1}}", 201));
    char path[128];
    snprintf(path, sizeof(path), "/topics/t/messages?after=%" JSON_INTEGER_FORMAT, f->log_next);
    json_t *page = th_get_json(port, path);
    json_t *msgs = json_object_get(page, "messages");
    assert_int_equal(json_array_size(msgs), 1); /* exactly what came after, nothing again */
    assert_string_equal(json_string_value(json_object_get(json_array_get(msgs, 0), "key")), "d");
    json_decref(page);
    json_t *head = th_get_json(port, "/topics/t/keys/a/head");
    assert_int_equal(int_at(json_object_get(head, "value"), "v"), 2);
    json_decref(head);
    json_decref(th_call(port, "GET", "/topics/t/keys/b/head", NULL, 404));
    char body[1024];
    snprintf(body, sizeof(body), "{\"sequence\":2,\"transactions\":[%s]}", tx2);
    json_t *cp = th_call(port, "POST", "/ledgers/l/checkpoints", body, 201);
    assert_int_equal(int_at(cp, "applied"), 0);
    assert_int_equal(int_at(cp, "skipped"), 1);
    json_decref(cp);
    snprintf(body, sizeof(body), "{\"sequence\":1,\"transactions\":[%s]}", tx1);
    cp = th_call(port, "POST", "/ledgers/l/checkpoints", body, 200);
    assert_true(json_is_true(json_object_get(cp, "replay")));
    json_decref(cp);
    json_t *ev = th_get_json(port, "/ledgers/l/events");
    assert_int_equal((json_int_t)json_array_size(json_object_get(ev, "events")), f->events);
    json_decref(ev);
    json_decref(th_call(port, "GET", "/ledgers/l/objects/o2", NULL, 404)); /* the tombstone */
    json_t *h = th_get_json(port, "/ledgers/h");
    assert_int_equal(int_at(h, "horizon"), f->horizon);
    json_decref(h);
}

static void upgrade_keeps_every_row_and_behaviour(void **state)
{
    const char *prev = prev_binary();
    static const char *const fast_janitor[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    static const char *const migrate_only[] = {"ROWLOCK_MIGRATE_ONLY=true", NULL};
    char url[1024];
    assert_int_equal(th_db_create("upgrade", url, sizeof(url)), 0);
    struct th_service svc;
    struct filled f;
    assert_int_equal(start_prev(&svc, prev, url, fast_janitor), 0);
    fill_topics(svc.port, &f);
    fill_queues(svc.port, &f);
    fill_ledgers(svc.port, &f);
    assert_int_equal(th_service_stop(&svc), 0);

    PGconn *c = th_pg(url);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_tables WHERE tablename = 'migrations'"),
                     0); /* really a database of the release before migrations */
    json_t *tables = shape(c);
    char *before = snapshot(c, tables);
    assert_int_equal(th_service_start(&svc, url, migrate_only), -1);
    assert_int_equal(svc.exit_code, 0);
    assert_true(th_service_logged(&svc, "database from the release before migrations adopted"));
    tsf_assert_all_recorded(c);
    char *after = snapshot(c, tables);
    assert_string_equal(before, after);
    free(before);
    free(after);
    json_decref(tables);
    check_migration_8_added(c);
    check_migration_9_added(c);

    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    check_queue_after(svc.port, &f);
    check_topic_and_ledger_after(svc.port, &f);
    check_consumer_after(svc.port, &f);
    assert_int_equal(th_service_stop(&svc), 0);

    /* rolling upgrade: the previous release still starts on the migrated database and serves */
    assert_int_equal(start_prev(&svc, prev, url, NULL), 0);
    json_t *head = th_get_json(svc.port, "/topics/t/keys/d/head");
    json_decref(head);
    json_decref(
        th_call(svc.port, "POST", "/topics/t/messages", "{\"key\":\"e\",\"value\":1}", 201));
    json_decref(th_call(svc.port, "POST", "/queues/q/jobs", "{\"payload\":{\"n\":3}}", 201));
    json_decref(th_call(svc.port, "DELETE", "/topics/t2", NULL, 200)); /* its consumer goes too */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topic_consumers"), 1);
    assert_int_equal(th_service_stop(&svc), 0);
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    assert_int_equal(th_service_stop(&svc), 0);
    tsf_assert_all_recorded(c);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(upgrade_keeps_every_row_and_behaviour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
