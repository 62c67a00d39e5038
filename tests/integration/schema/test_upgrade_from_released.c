/* THE UPGRADE TEST. A database is filled through the previous release's binary (built from the
 * commit named in db/schema/released/6/RELEASE; its path in ROWLOCK_TEST_PREV_BINARY, which
 * deploy/local.sh test sets): two topics with heads, a headless row, a tombstone, a hole (an
 * offset whose produce rolled back, recorded by a reader), a producer's sequenced messages and a
 * log follower's `next`; a queue with a pending job, a processing one under a live lease, a
 * failed and a succeeded one with two attempts each; ledgers with objects, a tombstone, events, a
 * checkpoint and a horizon. This build then migrates it (--migrate-only): every row of every
 * table is unchanged, every topic's log, heads and offset sequence are in the shared tables of
 * migration 12 exactly as they were in its generated tables (which are gone), and every
 * migration is recorded once, in order. Then this build serves it: the lease taken before is
 * completed with its fence, the follower continues from its `next`, offsets go on after the
 * last one drawn before (none is reused), a sequence sent before is still a duplicate, a
 * checkpoint replay applies nothing twice, and a consumer cursor (migration 8) is created on the
 * old topic, read from and committed; rowlock.jobs has migration 9's fillfactor. Last, the
 * previous release refuses the migrated database (migration 12 is a contract step: serves_from
 * 12), and this build finds it current. A second case starts from a database as a build of
 * schema version 11 left it, with consumers, and migrates only migration 12 over it. A third
 * starts from a database as a build of schema version 13 left it, filled, and migrates only
 * migration 14 (schedules) over it: every row kept, the new tables empty, and migration 14
 * declaring that it serves builds of schema 12 on (an expand step, so the builds of a rolling
 * upgrade's older half keep serving it); a schedule on the old queue then fires into
 * it, and the old queue cannot be deleted while the schedule targets it. */
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
    json_int_t log_next;     /* the follower's position: topic t's last offset */
    json_int_t log_messages; /* the messages of t's log (its hole left out) */
    json_int_t seq2_offset;  /* the offset of producer p's sequence 2 */
    json_int_t live_job;     /* the job under a live lease */
    json_int_t live_fence;   /* its fence */
    json_int_t pending_job;  /* the job nobody claimed */
    json_int_t done_job;     /* succeeded after a failed attempt */
    json_int_t failed_job;   /* failed twice: out of attempts */
    json_int_t events;       /* events of ledger l */
    json_int_t horizon;      /* of ledger h */
};

static const char *prev_binary(void)
{
    const char *p = tsf_prev_binary();
    if (p == NULL)
        fail_msg("the upgrade test cannot run without the previous release's binary");
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

/* Draws the next offset of the released topic named name and rolls back, as a produce that
 * failed does: the offset is a gap until a reader records it as a hole. */
static void roll_back_offset(const char *url, const char *name)
{
    PGconn *c = th_pg(url);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT nextval(format('rowlock.%%I', 'messages_' || id || '_offset')) "
             "FROM rowlock.topics WHERE name = '%s'",
             name);
    PQclear(th_sql(c, "BEGIN"));
    PQclear(th_sql(c, sql));
    PQclear(th_sql(c, "ROLLBACK"));
    PQfinish(c);
}

static void fill_topics(int port, const char *url, struct filled *f)
{
    json_decref(th_call(port, "PUT", "/topics/t", "{\"headless_ttl_seconds\":86400}", 201));
    json_decref(th_call(port, "PUT", "/topics/t/producers/p", "{\"schema_version\":2}", 201));
    json_decref(th_call(port, "POST", "/topics/t/messages",
                        "{\"messages\":[{\"key\":\"a\",\"value\":{\"v\":1}},"
                        "{\"key\":\"b\",\"value\":{\"v\":1}},{\"key\":\"c\",\"value\":[1]}]}",
                        201));
    roll_back_offset(url, "t"); /* offset 4 */
    json_decref(
        th_call(port, "POST", "/topics/t/messages", "{\"key\":\"a\",\"value\":{\"v\":2}}", 201));
    json_decref(th_call(port, "POST", "/topics/t/messages",
                        "{\"producer\":\"p\",\"messages\":[{\"key\":\"s\",\"value\":1,"
                        "\"sequence\":1},{\"key\":\"s\",\"value\":2,\"sequence\":2}]}",
                        201));
    json_decref(th_call(port, "DELETE", "/topics/t/keys/b/head", NULL, 200)); /* a tombstone */
    json_decref(th_call(port, "PUT", "/topics/u", "{}", 201)); /* offsets of its own */
    json_decref(th_call(port, "POST", "/topics/u/messages", "{\"key\":\"x\",\"value\":1}", 201));
    json_decref(th_call(port, "POST", "/topics/u/messages", "{\"key\":\"x\",\"value\":2}", 201));
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
    /* the read records the rolled back offset as a hole */
    json_t *page = th_get_json(port, "/topics/t/messages?after=0&limit=100");
    json_t *msgs = json_object_get(page, "messages");
    f->log_messages = (json_int_t)json_array_size(msgs);
    assert_int_equal(f->log_messages, 7);
    f->seq2_offset = int_at(json_array_get(msgs, 5), "offset");
    assert_int_equal(f->seq2_offset, 7);
    f->log_next = int_at(page, "next");
    assert_int_equal(f->log_next, 8);
    json_decref(page);
    PGconn *c = th_pg(url);
    PGresult *id = th_sql(c, "SELECT id FROM rowlock.topics WHERE name = 't'");
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.messages_%s WHERE hole",
             PQgetvalue(id, 0, 0));
    PQclear(id);
    assert_int_equal(tsf_int(c, sql), 1);
    PQfinish(c);
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
    /* the horizon is the newest checkpoint past its retention: wait for the last one, 2, since a
     * janitor pass between the two checkpoints' retentions (a loaded machine spaces them) records
     * 1 first, and the new build's janitor would then move it on after the upgrade */
    for (int i = 0; i < 100; i++) {
        json_t *h = th_get_json(port, "/ledgers/h");
        f->horizon = int_at(h, "horizon");
        json_decref(h);
        if (f->horizon >= 2)
            return;
        usleep(100000);
    }
    fail_msg("the previous release's janitor did not record horizon 2 on ledger h within 10 s");
}

/* The tables of the rowlock schemas but rowlock.migrations, each with its columns: the shape
 * the snapshots compare (taken before the upgrade, so that what migrations add is left out and
 * checked on its own). Left out too: the version row (check_migration_12 reads it) and the
 * topics' generated tables, compared with the shared tables by topic_rows. */
static json_t *shape(PGconn *c)
{
    return th_sql_rows(
        c, "SELECT quote_ident(t.schemaname) || '.' || quote_ident(t.tablename), "
           "string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) FROM pg_tables t "
           "JOIN pg_attribute a ON a.attrelid = (quote_ident(t.schemaname) || '.' || "
           "quote_ident(t.tablename))::regclass AND a.attnum > 0 AND NOT a.attisdropped "
           "WHERE t.schemaname LIKE 'rowlock%' "
           "AND t.tablename NOT IN ('migrations', 'schema_version') "
           "AND t.tablename !~ '^(messages|compaction_head)_[0-9]+$' "
           "GROUP BY 1 ORDER BY 1");
}

/* Every topic's log, heads and offset sequence, as text: from its generated tables in the
 * released layout (released 1), from the shared tables and rowlock.topic_offsets_<id> after
 * migration 12 (the generated tables are left out of shape). */
/* noinline: inlined at -O3, GCC 12 takes open_memstream's buffer for a dangling pointer. */
__attribute__((noinline)) static char *topic_rows(PGconn *c, int released)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    PGresult *ids = th_sql(c, "SELECT id FROM rowlock.topics ORDER BY id");
    for (int i = 0; i < PQntuples(ids); i++) {
        const char *id = PQgetvalue(ids, i, 0);
        char msgs[128], heads[128], seq[128], sql[1024];
        snprintf(msgs, sizeof(msgs),
                 released ? "rowlock.messages_%s" : "rowlock.topic_messages WHERE topic_id = %s",
                 id);
        snprintf(heads, sizeof(heads),
                 released ? "rowlock.compaction_head_%s"
                          : "rowlock.topic_heads WHERE topic_id = %s",
                 id);
        snprintf(seq, sizeof(seq),
                 released ? "rowlock.messages_%s_offset" : "rowlock.topic_offsets_%s", id);
        snprintf(sql, sizeof(sql),
                 "SELECT (SELECT coalesce(json_agg(x ORDER BY x.\"offset\")::text, '[]') FROM "
                 "(SELECT \"offset\", hole, key, value, producer, sequence, schema_version, rank, "
                 "created_at FROM %s) x), "
                 "(SELECT coalesce(json_agg(y ORDER BY y.key)::text, '[]') FROM "
                 "(SELECT key, head_id, schema_version, compaction_rank, created_at, updated_at "
                 "FROM %s) y), "
                 "(SELECT last_value || ' ' || is_called FROM %s)",
                 msgs, heads, seq);
        PGresult *r = th_sql(c, sql);
        fprintf(f, "topic %s\nlog: %s\nheads: %s\nsequence: %s\n", id, PQgetvalue(r, 0, 0),
                PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2));
        PQclear(r);
    }
    PQclear(ids);
    fclose(f);
    return out;
}

/* Every row of every table of shape (its columns only), as text (noinline: as topic_rows). */
__attribute__((noinline)) static char *snapshot(PGconn *c, json_t *tables)
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

/* What migration 12 did: no generated table of a topic is left; each topic has its sequence;
 * the database served builds of schema 12 on, until migration 18 (the next contract step) raised
 * that to 17. */
static void check_migration_12(PGconn *c)
{
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                                "ON n.oid = c.relnamespace WHERE nspname = 'rowlock' "
                                "AND relname ~ '^(messages|compaction_head)_[0-9]+'"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topics "
                                "WHERE to_regclass('rowlock.topic_offsets_' || id) IS NULL"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT serves_from FROM rowlock.migrations WHERE number = 12"),
                     12);
    assert_int_equal(tsf_int(c, "SELECT serves_from FROM rowlock.migrations WHERE number = 18"),
                     17);
    assert_int_equal(tsf_int(c, "SELECT version FROM rowlock.schema_version"), 17);
}

/* What migration 14 added: the schedules' tables, empty, and nothing of what the database
 * serves changed (an expand step, as every migration after it up to 17: serves_from stays 12,
 * so builds of schema 12 and 13 serve it; migration 18, a contract step, raises it to 17). */
static void check_migration_14(PGconn *c)
{
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.schedules"), 0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.schedule_fires"), 0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.upkeep WHERE family = 'schedules'"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT serves_from FROM rowlock.migrations WHERE number = 14"),
                     12);
    assert_int_equal(tsf_int(c, "SELECT max(serves_from) FROM rowlock.migrations "
                                "WHERE number BETWEEN 13 AND 17"),
                     12);
    assert_int_equal(tsf_int(c, "SELECT version FROM rowlock.schema_version"), 17);
}

/* A schedule on queue q, which the previous release created and filled: fired now, its job is
 * in q after the jobs enqueued before, and q cannot be deleted while the schedule targets it
 * (not even with force, which would take its job in processing along): the refusal changes
 * nothing. Deleted, the schedule takes its fires along and leaves its job. */
static void check_schedule_on_old_queue(int port, PGconn *c)
{
    long before = tsf_int(c, "SELECT max(id) FROM rowlock.jobs");
    json_decref(
        th_call(port, "PUT", "/schedules/upgraded",
                "{\"cron\":\"@yearly\",\"queue\":\"q\",\"payload\":{\"from\":\"schedule\"}}", 201));
    json_t *f = th_call(port, "POST", "/schedules/upgraded/fire", NULL, 201);
    json_int_t job = int_at(f, "job_id");
    json_decref(f);
    assert_true(job > before);
    char path[96];
    snprintf(path, sizeof(path), "/queues/q/jobs/%" JSON_INTEGER_FORMAT, job);
    json_t *j = th_get_json(port, path);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "pending");
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "payload"), "from")),
                        "schedule");
    json_decref(j);
    json_t *jobs = th_sql_rows(c, "SELECT * FROM rowlock.jobs ORDER BY id");
    json_t *refused = th_call(port, "DELETE", "/queues/q?force=true", NULL, 409);
    assert_string_equal(json_string_value(json_object_get(refused, "code")), "queue_has_schedules");
    json_decref(refused);
    json_t *still = th_sql_rows(c, "SELECT * FROM rowlock.jobs ORDER BY id");
    assert_true(json_equal(jobs, still));
    json_decref(jobs);
    json_decref(still);
    json_decref(th_call(port, "DELETE", "/schedules/upgraded", NULL, 200));
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.schedule_fires"), 0);
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.jobs WHERE id = %" JSON_INTEGER_FORMAT,
             job);
    assert_int_equal(tsf_int(c, sql), 1);
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
    assert_int_equal(json_array_size(json_object_get(page, "messages")), f->log_messages + 1);
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

/* Offsets go on after the last one drawn before the upgrade, in each topic; a sequence used
 * before is still a duplicate. */
static void check_offsets_after(int port, const struct filled *f)
{
    json_t *r =
        th_call(port, "POST", "/topics/t/messages", "{\"key\":\"d\",\"value\":{\"new\":1}}", 201);
    assert_int_equal(int_at(r, "offset"), f->log_next + 1);
    json_decref(r);
    r = th_call(port, "POST", "/topics/u/messages", "{\"key\":\"x\",\"value\":3}", 201);
    assert_int_equal(int_at(r, "offset"), 3);
    json_decref(r);
    r = th_call(port, "POST", "/topics/t/messages",
                "{\"producer\":\"p\",\"key\":\"s\",\"value\":9,\"sequence\":2}", 200);
    assert_string_equal(json_string_value(json_object_get(r, "head")), "duplicate");
    assert_int_equal(int_at(r, "offset"), f->seq2_offset);
    json_decref(r);
    json_t *t = th_get_json(port, "/topics/t");
    assert_int_equal(int_at(json_object_get(t, "counts"), "headless_rows"), 1);
    json_decref(t);
}

static void check_topic_and_ledger_after(int port, const struct filled *f)
{
    check_offsets_after(port, f);
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

/* Migrates the database at url with this build (--migrate-only), checking that every row of
 * every table is as it was, and for a database from before migration 12 (released_topics) that
 * every topic's log, heads and sequence are in the shared tables as they were in its own. */
static void migrate_keeping_every_row(PGconn *c, const char *url, const char *logged,
                                      int released_topics)
{
    static const char *const migrate_only[] = {"ROWLOCK_MIGRATE_ONLY=true", NULL};
    struct th_service svc;
    json_t *tables = shape(c);
    char *before = snapshot(c, tables), *topics_before = topic_rows(c, released_topics);
    assert_non_null(strstr(topics_before, "\"hole\":true"));
    assert_int_equal(th_service_start(&svc, url, migrate_only), -1);
    assert_int_equal(svc.exit_code, 0);
    assert_true(th_service_logged(&svc, logged));
    tsf_assert_all_recorded(c);
    char *after = snapshot(c, tables), *topics_after = topic_rows(c, 0);
    assert_string_equal(before, after);
    assert_string_equal(topics_before, topics_after);
    free(before);
    free(after);
    free(topics_before);
    free(topics_after);
    json_decref(tables);
    check_migration_12(c);
}

/* Creates database TH_DB_PREFIX<name> (its URL in url) and fills it through the previous
 * release: topics, and with everything queues and ledgers too, into *f. Returns a session on
 * it (the caller's). */
static PGconn *filled_by_previous_release(const char *name, char *url, size_t size,
                                          struct filled *f, int everything)
{
    static const char *const fast_janitor[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    const char *prev = prev_binary();
    assert_int_equal(th_db_create(name, url, size), 0);
    struct th_service svc;
    assert_int_equal(start_prev(&svc, prev, url, fast_janitor), 0);
    fill_topics(svc.port, url, f);
    if (everything) {
        fill_queues(svc.port, f);
        fill_ledgers(svc.port, f);
    }
    assert_int_equal(th_service_stop(&svc), 0);
    return th_pg(url);
}

static void upgrade_keeps_every_row_and_behaviour(void **state)
{
    (void)state;
    const char *prev = prev_binary();
    char url[1024];
    struct th_service svc;
    struct filled f;
    PGconn *c = filled_by_previous_release("upgrade", url, sizeof(url), &f, 1);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_tables WHERE tablename = 'migrations'"),
                     0); /* really a database of the release before migrations */
    migrate_keeping_every_row(c, url, "database from the release before migrations adopted", 1);
    check_migration_8_added(c);
    check_migration_9_added(c);
    check_migration_14(c);

    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    check_queue_after(svc.port, &f);
    check_topic_and_ledger_after(svc.port, &f);
    check_consumer_after(svc.port, &f);
    /* a topic's DELETE takes its rows, consumers and sequence along */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topic_consumers"), 2);
    long t2 = tsf_int(c, "SELECT id FROM rowlock.topics WHERE name = 't2'");
    json_decref(
        th_call(svc.port, "POST", "/topics/t2/messages", "{\"key\":\"k\",\"value\":1}", 201));
    json_decref(th_call(svc.port, "DELETE", "/topics/t2", NULL, 200));
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.topic_consumers"), 1);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT (SELECT count(*) FROM rowlock.topic_messages WHERE topic_id = %ld) + "
             "(SELECT count(*) FROM rowlock.topic_heads WHERE topic_id = %ld) + "
             "(SELECT count(*) FROM pg_class WHERE relname = 'topic_offsets_%ld')",
             t2, t2, t2);
    assert_int_equal(tsf_int(c, sql), 0);
    assert_int_equal(th_service_stop(&svc), 0);

    /* a contract step: the previous release, which reads the generated tables, refuses it */
    assert_int_equal(start_prev(&svc, prev, url, NULL), -1);
    assert_true(th_service_logged(&svc, "incompatible database schema"));
    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    assert_int_equal(th_service_stop(&svc), 0);
    tsf_assert_all_recorded(c);
    PQfinish(c);
}

/* A database as a build of schema version 11 served it, topics with consumers among them:
 * migration 12 alone moves the logs, and every consumer goes on where it was. */
static void upgrade_from_11_keeps_consumers(void **state)
{
    (void)state;
    char url[1024];
    struct th_service svc;
    struct filled f;
    PGconn *c = filled_by_previous_release("upgrade11", url, sizeof(url), &f, 0);
    tsf_migrate_to(c, 11);
    /* consumers as the build of version 11 commits them: at 5 (after a, the hole and a's
     * second message), at the start, and at u's end */
    PQclear(th_sql(c, "INSERT INTO rowlock.topic_consumers (topic_id, name, \"offset\") "
                      "SELECT id, 'mid', 5 FROM rowlock.topics WHERE name = 't' UNION ALL "
                      "SELECT id, 'start', 0 FROM rowlock.topics WHERE name = 't' UNION ALL "
                      "SELECT id, 'all', 2 FROM rowlock.topics WHERE name = 'u'"));
    migrate_keeping_every_row(c, url, "schema migrated", 1);

    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    json_t *mid = th_get_json(svc.port, "/topics/t/consumers/mid");
    assert_int_equal(int_at(mid, "offset"), 5);
    assert_int_equal(int_at(mid, "lag_messages"), f.log_next - 5);
    json_decref(mid);
    json_t *page = th_get_json(svc.port, "/topics/t/messages?consumer=mid&limit=100");
    json_t *msgs = json_object_get(page, "messages");
    assert_int_equal(json_array_size(msgs), f.log_next - 5); /* 6, 7, 8: no hole after 5 */
    assert_int_equal(int_at(json_array_get(msgs, 0), "offset"), 6);
    assert_int_equal(int_at(page, "next"), f.log_next);
    json_decref(page);
    page = th_get_json(svc.port, "/topics/t/messages?consumer=start&limit=100");
    assert_int_equal(json_array_size(json_object_get(page, "messages")), f.log_messages);
    json_decref(page);
    json_t *all = th_get_json(svc.port, "/topics/u/consumers/all");
    assert_int_equal(int_at(all, "lag_messages"), 0);
    json_decref(all);
    check_offsets_after(svc.port, &f);
    all = th_get_json(svc.port, "/topics/u/consumers/all");
    assert_int_equal(int_at(all, "lag_messages"), 1);
    json_decref(all);
    char body[128];
    snprintf(body, sizeof(body), "{\"offset\":%" JSON_INTEGER_FORMAT ",\"expect\":5}",
             f.log_next + 1);
    json_t *r = th_call(svc.port, "POST", "/topics/t/consumers/mid/commit", body, 200);
    assert_int_equal(int_at(r, "lag_messages"), 0);
    json_decref(r);
    assert_int_equal(th_service_stop(&svc), 0);
    PQfinish(c);
}

/* A database as a build of schema version 13 served it, filled by the previous release:
 * migration 14 alone adds the schedules' tables, keeps every row, and stays an expand step;
 * this build then serves the old queue and a schedule on it. */
static void upgrade_from_13_adds_schedules(void **state)
{
    (void)state;
    char url[1024];
    struct th_service svc;
    struct filled f;
    PGconn *c = filled_by_previous_release("upgrade13", url, sizeof(url), &f, 1);
    tsf_migrate_to(c, 13);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_tables WHERE schemaname = 'rowlock' "
                                "AND tablename LIKE 'schedule%'"),
                     0);
    migrate_keeping_every_row(c, url, "schema migrated", 0);
    check_migration_14(c);

    assert_int_equal(th_service_start(&svc, url, NULL), 0);
    assert_true(th_service_logged(&svc, "schema current"));
    check_queue_after(svc.port, &f);
    check_schedule_on_old_queue(svc.port, c);
    assert_int_equal(th_service_stop(&svc), 0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(upgrade_keeps_every_row_and_behaviour),
        cmocka_unit_test(upgrade_from_11_keeps_consumers),
        cmocka_unit_test(upgrade_from_13_adds_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
