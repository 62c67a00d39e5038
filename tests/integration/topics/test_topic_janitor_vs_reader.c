/* Janitor versus locked reader on a key's compaction-head row, in forced interleavings: two (or
 * three) database sessions run the service's own statements step by step, and a statement that
 * must block is shown blocked (pg_stat_activity: waiting on a Lock) before the test goes on, so
 * no sleep decides an order. (a) reader first: the janitor skips the locked headless row and
 * never waits for it; (b) janitor first: the reader's SELECT FOR UPDATE waits, finds nothing
 * once the delete commits, and recreates the row; (c) the janitor deletes between the reader's
 * lost insert race and its lock: the reader finds nothing and inserts again. (d) end to end over
 * HTTP: a merge patch that changes nothing leaves a headless row that no read or list shows, that
 * the counts and metrics report, and that the service's janitor deletes after the TTL. */
#include <inttypes.h>
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

/* These mirror db/topic_handles.c (st_head_lock, st_head_touch, st_head_insert) and db/topics.c
 * (st_janitor), {t} standing for the topic id the service passes as a parameter (the key, TTL and
 * batch keep their own $n); keep them in step. The service sends the lock, the insert and the
 * head's read as one pipeline, so its insert also runs when the lock found the row: case (a)
 * runs it there too. */
static const char tpl_head_lock[] = "SELECT head_id IS NOT NULL FROM rowlock.topic_heads "
                                    "WHERE topic_id = {t} AND key = $1 FOR UPDATE";
static const char tpl_head_touch[] =
    "UPDATE rowlock.topic_heads SET updated_at = now() WHERE topic_id = {t} AND key = $1";
static const char tpl_head_insert[] = "INSERT INTO rowlock.topic_heads (topic_id, key) "
                                      "VALUES ({t}, $1) ON CONFLICT (topic_id, key) DO NOTHING "
                                      "RETURNING key";
static const char tpl_janitor[] =
    "DELETE FROM rowlock.topic_heads WHERE topic_id = {t} AND key IN ("
    "  SELECT key FROM rowlock.topic_heads WHERE topic_id = {t} AND head_id IS NULL "
    "  AND updated_at < now() - make_interval(secs => $1::double precision) "
    "  ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "AND head_id IS NULL";

/* TTL 0: every headless row the janitor can lock counts as expired, so only a lock keeps it. */
#define JANITOR_TTL   "0"
#define JANITOR_BATCH "1000"

static const char *const json_body[] = {"Content-Type: application/json", NULL};
static const char *const merge_patch[] = {"Content-Type: application/merge-patch+json", NULL};

static struct th_service e2e; /* case (d): its own database, janitor every 100 ms */

/* A topic's statements, expanded. */
struct topic_sql {
    char heads[32]; /* the topic id */
    char lock[512], touch[256], insert[256], janitor[512];
};

static void expand(const char *tpl, const char *topic, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = tpl; *p; p++) {
        const char *add = p[0] == '{' && p[1] == 't' && p[2] == '}' ? topic : NULL;
        size_t n = add ? strlen(add) : 1;
        assert_true(o + n < size);
        memcpy(out + o, add ? add : p, n);
        o += n;
        p += add ? 2 : 0;
    }
    out[o] = '\0';
}

static void put_topic(int port, const char *topic, int ttl, long status)
{
    char path[64], body[64];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s", topic);
    snprintf(body, sizeof(body), "{\"headless_ttl_seconds\": %d}", ttl);
    assert_int_equal(th_http(port, "PUT", path, json_body, body, strlen(body), &r), 0);
    assert_int_equal(r.status, status);
    th_response_free(&r);
}

/* Creates topic through the service (TTL 1 s) and expands its statements. */
static void topic_create(PGconn *c, const char *topic, struct topic_sql *s)
{
    put_topic(th_svc.port, topic, 1, 201);
    const char *params[] = {topic};
    PGresult *r = PQexecParams(c, "SELECT id FROM rowlock.topics WHERE name = $1", 1, NULL, params,
                               NULL, NULL, 0);
    assert_int_equal(PQntuples(r), 1);
    snprintf(s->heads, sizeof(s->heads), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    expand(tpl_head_lock, s->heads, s->lock, sizeof(s->lock));
    expand(tpl_head_touch, s->heads, s->touch, sizeof(s->touch));
    expand(tpl_head_insert, s->heads, s->insert, sizeof(s->insert));
    expand(tpl_janitor, s->heads, s->janitor, sizeof(s->janitor));
}

/* A session with a statement timeout, so that a wrong interleaving fails instead of hanging. */
static PGconn *session(void)
{
    PGconn *c = th_pg(th_svc_dburl);
    PQclear(th_sql(c, "SET statement_timeout = '20s'"));
    return c;
}

static void check_ok(PGresult *r, const char *sql)
{
    ExecStatusType t = PQresultStatus(r);
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(r));
}

/* Runs sql with up to two text parameters; returns the result (PQclear it). */
static PGresult *run(PGconn *c, const char *sql, const char *p1, const char *p2)
{
    const char *params[] = {p1, p2};
    PGresult *r = PQexecParams(c, sql, p2 ? 2 : p1 ? 1 : 0, NULL, params, NULL, NULL, 0);
    check_ok(r, sql);
    return r;
}

/* Number of rows sql returns (or affects). */
static int run_count(PGconn *c, const char *sql, const char *p1, const char *p2)
{
    PGresult *r = run(c, sql, p1, p2);
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : atoi(PQcmdTuples(r));
    PQclear(r);
    return n;
}

static void send_async(PGconn *c, const char *sql, const char *p1, const char *p2)
{
    const char *params[] = {p1, p2};
    if (!PQsendQueryParams(c, sql, p2 ? 2 : 1, NULL, params, NULL, NULL, 0))
        fail_msg("cannot send %s: %s", sql, PQerrorMessage(c));
}

/* The result of the statement sent on c (blocks until it is there). */
static PGresult *collect(PGconn *c)
{
    PGresult *r = PQgetResult(c), *extra;
    assert_non_null(r);
    check_ok(r, "the statement sent");
    while ((extra = PQgetResult(c)) != NULL)
        PQclear(extra);
    return r;
}

static int waits_on_lock(PGconn *observer, int pid)
{
    char p[16];
    snprintf(p, sizeof(p), "%d", pid);
    return run_count(observer,
                     "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                     p, NULL) == 1;
}

/* Polls until the backend of c waits on a lock (up to 10 s), or fails. */
static void wait_until_blocked(PGconn *observer, PGconn *c)
{
    for (int i = 0; i < 5000; i++) {
        if (waits_on_lock(observer, PQbackendPID(c)))
            return;
        usleep(2000);
    }
    fail_msg("backend %d never came to wait on a lock", PQbackendPID(c));
}

/* The result of the statement sent on c, which must finish without ever waiting on a lock. */
static PGresult *collect_without_waiting(PGconn *observer, PGconn *c)
{
    for (int i = 0; i < 5000; i++) {
        if (!PQconsumeInput(c))
            fail_msg("connection lost: %s", PQerrorMessage(c));
        if (!PQisBusy(c))
            return collect(c);
        if (waits_on_lock(observer, PQbackendPID(c)))
            fail_msg("the janitor waited on a lock held by a reader");
        usleep(1000);
    }
    fail_msg("the statement did not finish in 5 s");
    return NULL;
}

/* The key's row: 1 when present (then *headless and, when asked, its timestamps as text). */
static int row_of(PGconn *c, const struct topic_sql *s, const char *key, int *headless,
                  char *created, char *updated)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT head_id IS NULL AND schema_version IS NULL AND compaction_rank IS NULL, "
             "created_at::text, updated_at::text FROM rowlock.topic_heads "
             "WHERE topic_id = %s AND key = $1",
             s->heads);
    PGresult *r = run(c, sql, key, NULL);
    int present = PQntuples(r) == 1;
    if (present) {
        *headless = PQgetvalue(r, 0, 0)[0] == 't';
        if (created)
            snprintf(created, 64, "%s", PQgetvalue(r, 0, 1));
        if (updated)
            snprintf(updated, 64, "%s", PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    return present;
}

static int later(PGconn *c, const char *a, const char *b)
{
    PGresult *r = run(c, "SELECT $1::timestamptz > $2::timestamptz", a, b);
    int yes = PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return yes;
}

/* A committed headless row for key, made by the service's own insert. */
static void seed_headless(PGconn *c, const struct topic_sql *s, const char *key)
{
    assert_int_equal(run_count(c, s->insert, key, NULL), 1);
}

/* (a) The reader locks the headless row first (and refreshes it); the janitor's DELETE, even with
 * TTL 0, skips that row without waiting and deletes nothing; after the reader commits the row is
 * still there with a later updated_at. A last janitor pass, with nobody holding the row, deletes
 * it: the skip was the lock's doing, not the predicate's. */
static void reader_locks_first_janitor_skips_the_row(void **state)
{
    PGconn *reader = session(), *janitor = session(), *observer = session();
    struct topic_sql s;
    char created[64], updated[64], now_updated[64];
    int headless = 0;
    topic_create(observer, "reader_first", &s);
    seed_headless(observer, &s, "k");
    assert_true(row_of(observer, &s, "k", &headless, created, updated));

    PQclear(run(reader, "BEGIN", NULL, NULL));
    PGresult *r = run(reader, s.lock, "k", NULL);
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "f"); /* locked, no head */
    PQclear(r);
    /* the service sends the insert in the lock's pipeline: on a row it holds, it does nothing */
    assert_int_equal(run_count(reader, s.insert, "k", NULL), 0);
    assert_int_equal(run_count(reader, s.touch, "k", NULL), 1);

    PQclear(run(janitor, "BEGIN", NULL, NULL));
    send_async(janitor, s.janitor, JANITOR_TTL, JANITOR_BATCH);
    r = collect_without_waiting(observer, janitor);
    assert_string_equal(PQcmdTuples(r), "0");
    PQclear(r);
    PQclear(run(janitor, "COMMIT", NULL, NULL));

    PQclear(run(reader, "COMMIT", NULL, NULL));
    assert_true(row_of(observer, &s, "k", &headless, NULL, now_updated));
    assert_true(headless);
    assert_true(later(observer, now_updated, updated));

    assert_int_equal(run_count(janitor, s.janitor, JANITOR_TTL, JANITOR_BATCH), 1);
    assert_false(row_of(observer, &s, "k", &headless, NULL, NULL));
    PQfinish(reader);
    PQfinish(janitor);
    PQfinish(observer);
}

/* (b) The janitor deletes the expired headless row first and has not committed; the reader's
 * SELECT FOR UPDATE waits on it; the janitor commits; the reader's SELECT returns no row, its
 * insert creates a new headless row (locked, no head) and it commits: the row exists again, newer
 * than the deleted one. */
static void janitor_deletes_first_reader_waits_and_recreates(void **state)
{
    PGconn *reader = session(), *janitor = session(), *observer = session();
    struct topic_sql s;
    char created[64], updated[64], new_created[64], new_updated[64];
    int headless = 0;
    topic_create(observer, "janitor_first", &s);
    seed_headless(observer, &s, "k");
    assert_true(row_of(observer, &s, "k", &headless, created, updated));

    PQclear(run(janitor, "BEGIN", NULL, NULL));
    assert_int_equal(run_count(janitor, s.janitor, JANITOR_TTL, JANITOR_BATCH), 1);

    PQclear(run(reader, "BEGIN", NULL, NULL));
    send_async(reader, s.lock, "k", NULL);
    wait_until_blocked(observer, reader);
    PQclear(run(janitor, "COMMIT", NULL, NULL));
    PGresult *r = collect(reader);
    assert_int_equal(PQntuples(r), 0); /* the row it waited for is gone */
    PQclear(r);
    r = run(reader, s.insert, "k", NULL);
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "k");
    PQclear(r);
    PQclear(run(reader, "COMMIT", NULL, NULL));

    assert_true(row_of(observer, &s, "k", &headless, new_created, new_updated));
    assert_true(headless);
    assert_true(later(observer, new_created, created));
    assert_true(later(observer, new_updated, updated));
    PQfinish(reader);
    PQfinish(janitor);
    PQfinish(observer);
}

/* (c) The reader's SELECT FOR UPDATE finds no row; another writer inserts the headless row; the
 * reader's insert waits on that insert and, once it commits, returns nothing (lost race); now the
 * janitor deletes the committed row and commits, before the reader's loop locks it; the reader's
 * next SELECT FOR UPDATE finds nothing and its next insert succeeds. */
static void janitor_deletes_between_lost_insert_and_lock(void **state)
{
    PGconn *reader = session(), *other = session(), *janitor = session(), *observer = session();
    struct topic_sql s;
    int headless = 0;
    topic_create(observer, "between", &s);

    PQclear(run(reader, "BEGIN", NULL, NULL));
    assert_int_equal(run_count(reader, s.lock, "k", NULL), 0);

    PQclear(run(other, "BEGIN", NULL, NULL));
    assert_int_equal(run_count(other, s.insert, "k", NULL), 1);
    send_async(reader, s.insert, "k", NULL);
    wait_until_blocked(observer, reader);
    PQclear(run(other, "COMMIT", NULL, NULL));
    PGresult *r = collect(reader);
    assert_int_equal(PQntuples(r), 0); /* lost the insert race */
    PQclear(r);
    assert_true(row_of(observer, &s, "k", &headless, NULL, NULL));

    PQclear(run(janitor, "BEGIN", NULL, NULL));
    send_async(janitor, s.janitor, JANITOR_TTL, JANITOR_BATCH);
    r = collect_without_waiting(observer, janitor);
    assert_string_equal(PQcmdTuples(r), "1");
    PQclear(r);
    PQclear(run(janitor, "COMMIT", NULL, NULL));

    assert_int_equal(run_count(reader, s.lock, "k", NULL), 0);
    r = run(reader, s.insert, "k", NULL);
    assert_int_equal(PQntuples(r), 1);
    PQclear(r);
    PQclear(run(reader, "COMMIT", NULL, NULL));
    assert_true(row_of(observer, &s, "k", &headless, NULL, NULL));
    assert_true(headless);
    PQfinish(reader);
    PQfinish(other);
    PQfinish(janitor);
    PQfinish(observer);
}

/* ---- (d) end to end ---- */

static json_t *topic_counts(int port, struct th_response *r)
{
    assert_int_equal(th_http(port, "GET", "/topics/t", NULL, NULL, 0, r), 0);
    assert_int_equal(r->status, 200);
    json_t *counts = json_object_get(r->json, "counts");
    assert_non_null(counts);
    return counts;
}

static long long count_of(json_t *counts, const char *name)
{
    json_t *v = json_object_get(counts, name);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void patch(int port, const char *key, const char *body, int produced)
{
    char path[128];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    assert_int_equal(th_http(port, "PATCH", path, merge_patch, body, strlen(body), &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_is_true(json_object_get(r.json, "produced")), produced);
    th_response_free(&r);
}

/* Headless rows (every head column null) of key of the topic whose id is heads. */
static int headless_rows(PGconn *c, const char *heads, const char *key)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT 1 FROM rowlock.topic_heads WHERE topic_id = %s AND key = $1 "
             "AND head_id IS NULL AND schema_version IS NULL AND compaction_rank IS NULL",
             heads);
    return run_count(c, sql, key, NULL);
}

/* Topic t holds the materialized key "live" and the headless key "ghost": reads and lists show
 * only "live"; the counts and the metrics report the headless row. */
static void assert_hidden_but_counted(int port)
{
    struct th_response g;
    assert_int_equal(th_http(port, "GET", "/topics/t/keys/ghost/head", NULL, NULL, 0, &g), 0);
    th_assert_problem(&g, 404, "head_not_found");
    th_response_free(&g);
    assert_int_equal(th_http(port, "GET", "/topics/t/keys", NULL, NULL, 0, &g), 0);
    assert_int_equal(g.status, 200);
    json_t *keys = json_object_get(g.json, "keys");
    assert_int_equal(json_array_size(keys), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(keys, 0), "key")), "live");
    th_response_free(&g);
    assert_int_equal(th_http(port, "GET", "/topics/t/messages", NULL, NULL, 0, &g), 0);
    assert_int_equal(json_array_size(json_object_get(g.json, "messages")), 1);
    th_response_free(&g);

    json_t *counts = topic_counts(port, &g);
    assert_int_equal(count_of(counts, "headless_rows"), 1);
    assert_int_equal(count_of(counts, "heads"), 1);
    assert_int_equal(count_of(counts, "messages"), 1);
    assert_true(json_real_value(json_object_get(counts, "headless_oldest_age_seconds")) > 0);
    th_response_free(&g);
    assert_true(th_metric(port, "rowlock_topic_headless_rows{topic=\"t\"}") == 1);
    assert_true(th_metric(port, "rowlock_topic_headless_oldest_age_seconds{topic=\"t\"}") > 0);
}

/* Polls (up to 10 s) until the service's janitor has deleted "ghost" and counted it. */
static void await_janitor(int port, PGconn *c, const char *heads)
{
    int gone = 0;
    for (int i = 0; i < 1000 && !gone; i++) {
        gone = headless_rows(c, heads, "ghost") == 0;
        if (!gone)
            usleep(10000);
    }
    assert_true(gone);
    /* the counter moves just after the janitor's transaction commits */
    const char *deleted = "rowlock_topic_janitor_deleted_total{topic=\"t\"}";
    for (int i = 0; i < 500 && th_metric(port, deleted) != 1; i++)
        usleep(10000);
    assert_true(th_metric(port, deleted) == 1);
}

/* An empty merge patch on a new key commits its lock as a headless row (all-null head columns);
 * the head reads 404 head_not_found, the key list leaves it out, the counts and the metrics show
 * it; once the TTL is shortened to 1 s the service's janitor (every 100 ms) deletes it within
 * 10 s and counts the deletion, while the key with a head, though as old, stays. The topic starts
 * with a long TTL so that the checks on the headless row cannot race the janitor. */
static void headless_row_is_hidden_counted_and_expired_by_the_janitor(void **state)
{
    static char url[1024];
    const char *env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    assert_int_equal(th_db_create("janitor_e2e", url, sizeof(url)), 0);
    assert_int_equal(th_service_start(&e2e, url, env), 0);
    int port = e2e.port;
    put_topic(port, "t", 3600, 201);
    patch(port, "live", "{\"a\": 1}", 1);
    patch(port, "ghost", "{}", 0);

    PGconn *c = th_pg(url);
    PGresult *r = th_sql(c, "SELECT id FROM rowlock.topics WHERE name = 't'");
    char heads[32]; /* the topic id */
    snprintf(heads, sizeof(heads), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    assert_int_equal(headless_rows(c, heads, "ghost"), 1);
    assert_hidden_but_counted(port);

    put_topic(port, "t", 1, 200);
    await_janitor(port, c, heads);
    PQfinish(c);
    struct th_response g;
    assert_true(th_metric(port, "rowlock_topic_headless_rows{topic=\"t\"}") == 0);
    json_t *counts = topic_counts(port, &g);
    assert_int_equal(count_of(counts, "headless_rows"), 0);
    assert_int_equal(count_of(counts, "heads"), 1);
    th_response_free(&g);
    assert_int_equal(th_http(port, "GET", "/topics/t/keys/live/head", NULL, NULL, 0, &g), 0);
    assert_int_equal(g.status, 200);
    th_response_free(&g);
}

static int stop_e2e(void **state)
{
    if (e2e.pid <= 0)
        return 0;
    return th_service_stop(&e2e) == 0 ? 0 : -1;
}

/* th_svc: the janitor off, the test's sessions are the only janitor. */
static int setup(void **state)
{
    const char *env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=3600000", NULL};
    return th_svc_start("janitor_reader", env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reader_locks_first_janitor_skips_the_row),
        cmocka_unit_test(janitor_deletes_first_reader_waits_and_recreates),
        cmocka_unit_test(janitor_deletes_between_lost_insert_and_lock),
        cmocka_unit_test_teardown(headless_row_is_hidden_counted_and_expired_by_the_janitor,
                                  stop_e2e),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
