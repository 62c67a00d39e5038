/* Consumer cursors of topics over HTTP against a real rowlock: create (at the beginning, the end
 * or an offset), read, list (paged), delete, and the topic's DELETE taking them along; start
 * "end" and commits are gap-safe (an offset held by a transaction still running stops them; a
 * rolled-back one does not); the commit's compare-and-set (expect and If-Match) and its refusals
 * (backwards, past the readable end, bad input: each a problem with its code, changing nothing);
 * reads with ?consumer=; lag values and the lag metrics (with the per-topic fallback when one
 * topic fails); retention that keeps what a consumer has not committed past, and ignores
 * consumers when the topic says so. The races of shared consumers are in
 * test_topic_consumer_race.c. */
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

static int setup(void **state)
{
    static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    return th_svc_start("consumers", env);
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s in %s", member, json_dumps(j, JSON_COMPACT));
    return json_integer_value(v);
}

static void put_topic(const char *topic, const char *body)
{
    char path[160];
    snprintf(path, sizeof(path), "/topics/%s", topic);
    json_decref(th_svc_call("PUT", path, body, 201));
}

/* Produces n messages of key (value i) to topic. */
static void produce(const char *topic, const char *key, int n)
{
    char path[160], body[160];
    snprintf(path, sizeof(path), "/topics/%s/messages", topic);
    for (int i = 0; i < n; i++) {
        snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":%d}", key, i);
        json_decref(th_svc_call("POST", path, body, 201));
    }
}

/* method on /topics/<topic>/consumers/<name><suffix> with body; asserts want; returns the JSON. */
static json_t *consumer_call(const char *method, const char *topic, const char *name,
                             const char *suffix, const char *body, long want)
{
    char path[512];
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s%s", topic, name, suffix);
    return th_svc_call(method, path, body, want);
}

static json_int_t consumer_offset(const char *topic, const char *name)
{
    json_t *c = consumer_call("GET", topic, name, "", NULL, 200);
    json_int_t o = int_at(c, "offset");
    json_decref(c);
    return o;
}

/* A refused request: status and code, and the problem JSON (a new reference). */
static json_t *refused(const char *method, const char *path, const char *const *headers,
                       const char *body, long status, const char *code)
{
    struct th_response r;
    const char *const json_ct[] = {"Content-Type: application/json", NULL};
    assert_int_equal(th_http(th_svc.port, method, path, headers ? headers : json_ct, body,
                             body ? strlen(body) : 0, &r),
                     0);
    if (r.status != status || strcmp(th_problem_code(&r), code) != 0)
        fail_msg("%s %s %s: want %ld %s, got %ld %s", method, path, body ? body : "", status, code,
                 r.status, r.body);
    json_t *j = json_incref(r.json);
    th_response_free(&r);
    return j;
}

/* The consumers of t (c-begin, c-end, c-off), two to a page. */
static void list_is_paged(void)
{
    json_t *page = th_svc_get("/topics/t/consumers?limit=2");
    json_t *items = json_object_get(page, "consumers");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "consumer")),
                        "c-end");
    assert_int_equal(int_at(json_array_get(items, 0), "lag_messages"), 3);
    assert_string_equal(json_string_value(json_object_get(page, "next")), "c-end");
    json_decref(page);
    page = th_svc_get("/topics/t/consumers?limit=2&after=c-end");
    assert_int_equal(json_array_size(json_object_get(page, "consumers")), 1);
    assert_true(json_is_null(json_object_get(page, "next")));
    json_decref(page);
}

static void create_get_list_delete(void **state)
{
    (void)state;
    put_topic("t", "{}");
    produce("t", "k", 3);
    json_t *c = consumer_call("PUT", "t", "c-begin", "", "{\"start\":\"beginning\"}", 201);
    assert_int_equal(int_at(c, "offset"), 0);
    assert_int_equal(int_at(c, "lag_messages"), 3);
    assert_string_equal(json_string_value(json_object_get(c, "consumer")), "c-begin");
    assert_string_equal(json_string_value(json_object_get(c, "topic")), "t");
    assert_true(json_is_string(json_object_get(c, "committed_at")));
    json_decref(c);
    /* it exists: 200 and unchanged, whatever the body */
    c = consumer_call("PUT", "t", "c-begin", "", "{\"start\":\"end\"}", 200);
    assert_int_equal(int_at(c, "offset"), 0);
    json_decref(c);
    c = consumer_call("PUT", "t", "c-end", "", "{}", 201); /* {} starts at the end */
    assert_int_equal(int_at(c, "offset"), 3);
    assert_int_equal(int_at(c, "lag_messages"), 0);
    assert_true(json_real_value(json_object_get(c, "lag_seconds")) == 0.0);
    json_decref(c);
    c = consumer_call("PUT", "t", "c-off", "", "{\"offset\":2}", 201);
    assert_int_equal(int_at(c, "lag_messages"), 1);
    json_decref(c);
    json_t *p = refused("PUT", "/topics/t/consumers/c-far", NULL, "{\"offset\":4}", 409,
                        "offset_beyond_end");
    assert_int_equal(int_at(p, "readable_end"), 3);
    json_decref(p);
    json_decref(refused("GET", "/topics/t/consumers/c-far", NULL, NULL, 404, "consumer_not_found"));
    /* the ETag is the offset */
    struct th_response r;
    char etag[32];
    assert_int_equal(th_http(th_svc.port, "GET", "/topics/t/consumers/c-off", NULL, NULL, 0, &r),
                     0);
    assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
    assert_string_equal(etag, "\"2\"");
    th_response_free(&r);
    list_is_paged();
    /* delete */
    json_decref(consumer_call("DELETE", "t", "c-off", "", NULL, 204));
    json_decref(refused("GET", "/topics/t/consumers/c-off", NULL, NULL, 404, "consumer_not_found"));
    json_decref(
        refused("DELETE", "/topics/t/consumers/c-off", NULL, NULL, 404, "consumer_not_found"));
    /* the topic's DELETE takes its consumers along; a new topic of the name has none */
    json_decref(th_svc_call("DELETE", "/topics/t", NULL, 200));
    put_topic("t", "{}");
    json_t *page = th_svc_get("/topics/t/consumers");
    assert_int_equal(json_array_size(json_object_get(page, "consumers")), 0);
    json_decref(page);
    PGconn *pg = th_pg(th_svc_dburl);
    json_t *rows = th_sql_rows(pg, "SELECT count(*) FROM rowlock.topic_consumers");
    assert_string_equal(json_string_value(json_array_get(json_array_get(rows, 0), 0)), "0");
    json_decref(rows);
    PQfinish(pg);
}

static void unknown_topic_and_bad_names(void **state)
{
    (void)state;
    static const struct {
        const char *method, *path, *body;
    } calls[] = {
        {"PUT", "/topics/nope/consumers/c", "{}"},
        {"GET", "/topics/nope/consumers/c", NULL},
        {"GET", "/topics/nope/consumers", NULL},
        {"DELETE", "/topics/nope/consumers/c", NULL},
        {"POST", "/topics/nope/consumers/c/commit", "{\"offset\":0}"},
        {"GET", "/topics/nope/messages?consumer=c", NULL},
    };
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        json_decref(
            refused(calls[i].method, calls[i].path, NULL, calls[i].body, 404, "topic_not_found"));
    put_topic("names", "{}");
    char long_name[160];
    memset(long_name, 'a', 129);
    long_name[129] = '\0';
    const char *bad[] = {"-x", "a%20b", long_name};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "/topics/names/consumers/%s", bad[i]);
        json_decref(refused("PUT", path, NULL, "{}", 400, "invalid_name"));
        snprintf(path, sizeof(path), "/topics/names/consumers/%s/commit", bad[i]);
        json_decref(refused("POST", path, NULL, "{\"offset\":0}", 400, "invalid_name"));
        snprintf(path, sizeof(path), "/topics/names/messages?consumer=%s", bad[i]);
        json_decref(refused("GET", path, NULL, NULL, 400, "invalid_name"));
    }
    json_t *page = th_svc_get("/topics/names/consumers");
    assert_int_equal(json_array_size(json_object_get(page, "consumers")), 0);
    json_decref(page);
}

/* The topic's id, for the sessions that hold offsets. */
static long topic_id(PGconn *pg, const char *topic)
{
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.topics WHERE name = '%s'", topic);
    PGresult *r = th_sql(pg, sql);
    long id = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return id;
}

/* Starts a transaction on pg that takes the topic's next offset and writes its message without
 * committing: the offset is in progress. Returns it. */
static long hold_offset(PGconn *pg, long id)
{
    char sql[512];
    PQclear(th_sql(pg, "BEGIN"));
    snprintf(
        sql, sizeof(sql),
        "INSERT INTO rowlock.topic_messages (topic_id, \"offset\", key, value, schema_version, "
        "rank) SELECT %ld, o, 'held', '1', 1, o FROM nextval('rowlock.topic_offsets_%ld') o "
        "RETURNING \"offset\"",
        id, id);
    PGresult *r = th_sql(pg, sql);
    long off = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    return off;
}

static void start_end_and_commits_are_gap_safe(void **state)
{
    (void)state;
    put_topic("g", "{}");
    produce("g", "k", 2);
    PGconn *pg = th_pg(th_svc_dburl);
    long id = topic_id(pg, "g");
    long held = hold_offset(pg, id); /* 3, in progress */
    produce("g", "k", 1);            /* 4, committed after it */
    json_t *c = consumer_call("PUT", "g", "tail", "", "{\"start\":\"end\"}", 201);
    assert_int_equal(int_at(c, "offset"), held - 1); /* never past the running transaction */
    json_decref(c);
    json_decref(refused("PUT", "/topics/g/consumers/at4", NULL, "{\"offset\":4}", 409,
                        "offset_beyond_end"));
    json_decref(refused("POST", "/topics/g/consumers/tail/commit", NULL, "{\"offset\":4}", 409,
                        "offset_beyond_end"));
    json_decref(refused("POST", "/topics/g/consumers/tail/commit", NULL, "{\"offset\":3}", 409,
                        "offset_beyond_end"));
    assert_int_equal(consumer_offset("g", "tail"), held - 1);
    PQclear(th_sql(pg, "COMMIT"));
    c = consumer_call("POST", "g", "tail", "/commit", "{\"offset\":4,\"expect\":2}", 200);
    assert_int_equal(int_at(c, "offset"), 4);
    assert_int_equal(int_at(c, "lag_messages"), 0);
    json_decref(c);
    /* a rolled-back offset does not stop the end: it becomes a hole */
    long gone = hold_offset(pg, id); /* 5 */
    PQclear(th_sql(pg, "ROLLBACK"));
    produce("g", "k", 1); /* 6 */
    c = consumer_call("GET", "g", "tail", "", NULL, 200);
    assert_int_equal(int_at(c, "lag_messages"), 2); /* offsets 5 (a hole) and 6 */
    json_decref(c);
    c = consumer_call("POST", "g", "tail", "/commit", "{\"offset\":6}", 200);
    assert_int_equal(int_at(c, "offset"), gone + 1);
    json_decref(c);
    c = consumer_call("PUT", "g", "late", "", "{\"start\":\"end\"}", 201);
    assert_int_equal(int_at(c, "offset"), 6);
    json_decref(c);
    PQfinish(pg);
}

static void commit_compare_and_set(void **state)
{
    (void)state;
    put_topic("cas", "{}");
    produce("cas", "k", 5);
    json_decref(consumer_call("PUT", "cas", "c", "", "{\"start\":\"beginning\"}", 201));
    json_t *c = consumer_call("POST", "cas", "c", "/commit", "{\"offset\":2,\"expect\":0}", 200);
    assert_int_equal(int_at(c, "offset"), 2);
    assert_int_equal(int_at(c, "lag_messages"), 3);
    json_decref(c);
    /* expect is not the committed offset: 409 with the committed offset */
    json_t *p = refused("POST", "/topics/cas/consumers/c/commit", NULL,
                        "{\"offset\":3,\"expect\":0}", 409, "consumer_conflict");
    assert_int_equal(int_at(p, "offset"), 2);
    json_decref(p);
    /* backwards is refused even without expect; the committed offset itself is a no-op */
    p = refused("POST", "/topics/cas/consumers/c/commit", NULL, "{\"offset\":1}", 409,
                "consumer_conflict");
    assert_int_equal(int_at(p, "offset"), 2);
    json_decref(p);
    json_decref(consumer_call("POST", "cas", "c", "/commit", "{\"offset\":2}", 200));
    /* If-Match instead of expect */
    const char *const match2[] = {"Content-Type: application/json", "If-Match: \"2\"", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "POST", "/topics/cas/consumers/c/commit", match2,
                             "{\"offset\":3}", 12, &r),
                     0);
    assert_int_equal(r.status, 200);
    char etag[32];
    assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
    assert_string_equal(etag, "\"3\"");
    th_response_free(&r);
    p = refused("POST", "/topics/cas/consumers/c/commit", match2, "{\"offset\":4}", 409,
                "consumer_conflict");
    assert_int_equal(int_at(p, "offset"), 3);
    json_decref(p);
    /* a plain forward move, then past the readable end */
    json_decref(consumer_call("POST", "cas", "c", "/commit", "{\"offset\":4}", 200));
    p = refused("POST", "/topics/cas/consumers/c/commit", NULL, "{\"offset\":99}", 409,
                "offset_beyond_end");
    assert_int_equal(int_at(p, "offset"), 4);
    assert_int_equal(int_at(p, "readable_end"), 5);
    json_decref(p);
    json_decref(refused("POST", "/topics/cas/consumers/nobody/commit", NULL, "{\"offset\":1}", 404,
                        "consumer_not_found"));
    assert_int_equal(consumer_offset("cas", "c"), 4);
}

static void bad_input_changes_nothing(void **state)
{
    (void)state;
    put_topic("bad", "{}");
    produce("bad", "k", 3);
    json_decref(consumer_call("PUT", "bad", "c", "", "{\"offset\":1}", 201));
    static const char *const puts[] = {"[]",
                                       "{\"start\":\"middle\"}",
                                       "{\"start\":1}",
                                       "{\"start\":\"end\",\"offset\":1}",
                                       "{\"offset\":-1}",
                                       "{\"offset\":9223372036854775807}",
                                       "{\"offset\":\"1\"}",
                                       "{\"from\":1}"};
    for (size_t i = 0; i < sizeof(puts) / sizeof(puts[0]); i++)
        json_decref(
            refused("PUT", "/topics/bad/consumers/new", NULL, puts[i], 400, "invalid_consumer"));
    json_decref(refused("GET", "/topics/bad/consumers/new", NULL, NULL, 404, "consumer_not_found"));
    static const char *const commits[] = {"{}",
                                          "[]",
                                          "{\"expect\":1}",
                                          "{\"offset\":-1}",
                                          "{\"offset\":1.5}",
                                          "{\"offset\":2,\"expect\":\"1\"}",
                                          "{\"offset\":2,\"expect\":-1}",
                                          "{\"offset\":2,\"x\":1}",
                                          "{\"offset\":9223372036854775807}"};
    for (size_t i = 0; i < sizeof(commits) / sizeof(commits[0]); i++)
        json_decref(refused("POST", "/topics/bad/consumers/c/commit", NULL, commits[i], 400,
                            "invalid_consumer"));
    static const char *const matches[] = {"If-Match: *", "If-Match: \"x\"", "If-Match: W/\"1\"",
                                          "If-Match: \"1\", \"2\"", "If-Match: \"-1\""};
    for (size_t i = 0; i < sizeof(matches) / sizeof(matches[0]); i++) {
        const char *const h[] = {"Content-Type: application/json", matches[i], NULL};
        json_decref(refused("POST", "/topics/bad/consumers/c/commit", h, "{\"offset\":2}", 400,
                            "invalid_consumer"));
    }
    const char *const both[] = {"Content-Type: application/json", "If-Match: \"1\"", NULL};
    json_decref(refused("POST", "/topics/bad/consumers/c/commit", both,
                        "{\"offset\":2,\"expect\":1}", 400, "invalid_consumer"));
    json_decref(
        refused("GET", "/topics/bad/consumers?limit=0", NULL, NULL, 400, "invalid_parameter"));
    json_decref(
        refused("GET", "/topics/bad/consumers?limit=1001", NULL, NULL, 400, "invalid_parameter"));
    assert_int_equal(consumer_offset("bad", "c"), 1);
    /* every number at and past its range: a 2xx or a 4xx problem, never a 5xx */
    static const struct th_bound bounds[] = {
        {"PUT", "/topics/bad/consumers/b1", "{\"offset\":@V@}", NULL, 9223372036854775806LL,
         "invalid_consumer", "/topics/bad/consumers/c"},
        {"POST", "/topics/bad/consumers/c/commit", "{\"offset\":@V@}", NULL, 9223372036854775806LL,
         "invalid_consumer", "/topics/bad/consumers/c"},
        {"POST", "/topics/bad/consumers/c/commit", "{\"offset\":3,\"expect\":@V@}", NULL,
         9223372036854775806LL, "invalid_consumer", "/topics/bad/consumers/c"},
        {"GET", "/topics/bad/consumers?limit={V}", NULL, NULL, 1000, "invalid_parameter", NULL},
    };
    assert_int_equal(th_bounds_check(th_svc.port, bounds, sizeof(bounds) / sizeof(bounds[0])), 0);
}

static void consumer_reads(void **state)
{
    (void)state;
    put_topic("r", "{}");
    produce("r", "k", 4);
    json_decref(consumer_call("PUT", "r", "c", "", "{\"offset\":1}", 201));
    json_t *page = th_svc_get("/topics/r/messages?consumer=c&limit=2");
    json_t *msgs = json_object_get(page, "messages");
    assert_int_equal(json_array_size(msgs), 2);
    assert_int_equal(int_at(json_array_get(msgs, 0), "offset"), 2);
    assert_int_equal(int_at(page, "next"), 3);
    json_decref(page);
    assert_int_equal(consumer_offset("r", "c"), 1); /* reading does not commit */
    json_decref(consumer_call("POST", "r", "c", "/commit", "{\"offset\":4,\"expect\":1}", 200));
    /* caught up: a long-poll waits, then answers an empty page at the committed offset */
    double t0 = th_now();
    page = th_svc_get("/topics/r/messages?consumer=c&wait=1");
    assert_true(th_now() - t0 >= 0.9);
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 0);
    assert_int_equal(int_at(page, "next"), 4);
    json_decref(page);
    json_decref(refused("GET", "/topics/r/messages?consumer=c&after=0", NULL, NULL, 400,
                        "invalid_parameter"));
    json_decref(refused("GET", "/topics/r/messages?consumer=nobody", NULL, NULL, 404,
                        "consumer_not_found"));
}

/* One series of /metrics, -1 when absent. */
static double metric(const char *series)
{
    return th_metric(th_svc.port, series);
}

static void lag_values_and_metrics(void **state)
{
    (void)state;
    put_topic("lag", "{}");
    produce("lag", "k", 5);
    json_decref(consumer_call("PUT", "lag", "c", "", "{\"start\":\"beginning\"}", 201));
    json_decref(consumer_call("PUT", "lag", "d", "", "{\"start\":\"end\"}", 201));
    usleep(1200 * 1000);
    json_t *c = consumer_call("GET", "lag", "c", "", NULL, 200);
    assert_int_equal(int_at(c, "lag_messages"), 5);
    double age = json_real_value(json_object_get(c, "lag_seconds"));
    assert_true(age >= 1.1 && age < 30);
    json_decref(c);
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"lag\",consumer=\"c\"}") == 5);
    assert_true(metric("rowlock_topic_consumer_lag_seconds{topic=\"lag\",consumer=\"c\"}") >= 1.1);
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"lag\",consumer=\"d\"}") == 0);
    assert_true(metric("rowlock_topic_consumer_lag_seconds{topic=\"lag\",consumer=\"d\"}") == 0);
    /* committed halfway: the age is that of the first message after the offset */
    produce("lag", "k", 1); /* offset 6, fresh */
    c = consumer_call("POST", "lag", "c", "/commit", "{\"offset\":5}", 200);
    assert_int_equal(int_at(c, "lag_messages"), 1);
    assert_true(json_real_value(json_object_get(c, "lag_seconds")) < 1.0);
    json_decref(c);
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"lag\",consumer=\"d\"}") == 1);
    json_decref(consumer_call("POST", "lag", "c", "/commit", "{\"offset\":6}", 200));
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"lag\",consumer=\"c\"}") == 0);
    assert_true(metric("rowlock_topic_consumer_lag_seconds{topic=\"lag\",consumer=\"c\"}") == 0);
    /* one broken topic: the others' lag is still served, the broken one is counted. Broken by
     * its message's time, whose age PostgreSQL cannot compute (15, as deploy/ runs, refuses to
     * subtract an infinite timestamp), so that its lag fails where the others' does not */
    put_topic("broken", "{}");
    produce("broken", "k", 1);
    json_decref(consumer_call("PUT", "broken", "c", "", "{\"start\":\"beginning\"}", 201));
    PGconn *pg = th_pg(th_svc_dburl);
    char sql[160];
    snprintf(sql, sizeof(sql),
             "UPDATE rowlock.topic_messages SET created_at = '-infinity' WHERE topic_id = %ld",
             topic_id(pg, "broken"));
    PQclear(th_sql(pg, sql));
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"lag\",consumer=\"d\"}") == 1);
    assert_true(metric("rowlock_topic_consumer_lag_messages{topic=\"broken\",consumer=\"c\"}") ==
                -1);
    assert_true(metric("rowlock_topic_consumer_metrics_failures_total{topic=\"broken\"}") >= 1);
    json_decref(th_svc_call("DELETE", "/topics/broken", NULL, 200));
    PQfinish(pg);
}

/* The topic's compacted counter, once it has stopped moving at want (or failed to reach it). */
static void await_compacted(const char *topic, double want)
{
    char series[160];
    snprintf(series, sizeof(series), "rowlock_topic_retention_compacted_total{topic=\"%s\"}",
             topic);
    /* a counter that never moved is absent: 0 */
    for (int i = 0; i < 100 && (metric(series) < 0 ? 0 : metric(series)) < want; i++)
        usleep(100 * 1000);
    usleep(500 * 1000); /* five janitor passes more: nothing else may go */
    double got = metric(series) < 0 ? 0 : metric(series);
    if (got != want)
        fail_msg("%s: %g compacted, want %g", topic, got, want);
}

/* Offsets of topic's log that are still messages. */
static json_int_t log_size(const char *topic)
{
    char path[160];
    snprintf(path, sizeof(path), "/topics/%s/messages?after=0&limit=1000", topic);
    json_t *page = th_svc_get(path);
    json_int_t n = (json_int_t)json_array_size(json_object_get(page, "messages"));
    json_decref(page);
    return n;
}

static void retention_respects_consumers(void **state)
{
    (void)state;
    put_topic("ret", "{\"retention_seconds\":1}");
    json_decref(consumer_call("PUT", "ret", "slow", "", "{\"start\":\"beginning\"}", 201));
    produce("ret", "k", 4); /* 1..3 superseded, 4 the head */
    usleep(1500 * 1000);    /* past the retention: only the consumer keeps them */
    await_compacted("ret", 0);
    assert_int_equal(log_size("ret"), 4);
    json_decref(consumer_call("POST", "ret", "slow", "/commit", "{\"offset\":2}", 200));
    await_compacted("ret", 2); /* up to the committed offset, not past it */
    assert_int_equal(log_size("ret"), 2);
    json_t *c = consumer_call("GET", "ret", "slow", "", NULL, 200);
    assert_int_equal(int_at(c, "lag_messages"), 2);
    json_decref(c);
    json_decref(consumer_call("DELETE", "ret", "slow", "", NULL, 204));
    await_compacted("ret", 3); /* no consumer left: by age alone */
    assert_int_equal(log_size("ret"), 1);

    /* the topic says so: consumers are ignored */
    json_t *t = th_svc_call("PUT", "/topics/ign",
                            "{\"retention_seconds\":1,\"retention_ignores_consumers\":true}", 201);
    assert_true(json_is_true(json_object_get(t, "retention_ignores_consumers")));
    json_decref(t);
    json_decref(consumer_call("PUT", "ign", "slow", "", "{\"start\":\"beginning\"}", 201));
    produce("ign", "k", 3);
    usleep(1100 * 1000);
    await_compacted("ign", 2);
    assert_int_equal(log_size("ign"), 1);
    c = consumer_call("GET", "ign", "slow", "", NULL, 200);
    assert_int_equal(int_at(c, "lag_messages"), 3); /* offsets: the two holes count */
    json_decref(c);
    json_decref(refused("PUT", "/topics/ign", NULL, "{\"retention_ignores_consumers\":1}", 400,
                        "invalid_config"));
    t = th_svc_get("/topics/ign");
    assert_true(json_is_true(json_object_get(t, "retention_ignores_consumers")));
    json_decref(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_get_list_delete),
        cmocka_unit_test(unknown_topic_and_bad_names),
        cmocka_unit_test(start_end_and_commits_are_gap_safe),
        cmocka_unit_test(commit_compare_and_set),
        cmocka_unit_test(bad_input_changes_nothing),
        cmocka_unit_test(consumer_reads),
        cmocka_unit_test(lag_values_and_metrics),
        cmocka_unit_test(retention_respects_consumers),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
