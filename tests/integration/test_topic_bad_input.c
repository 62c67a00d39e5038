/* Bad input on every topic route: each request answers its problem code (problem+json) and
 * writes nothing. After every group the whole visible state is compared with a snapshot taken
 * before it: the topic list and configs, producers, the log, the heads (with updated_at, so a
 * stray lock shows), and the offset sequence (so not even an offset was drawn). */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_bad.h"

static int64_t k1_offset; /* the head of key k1 */
static char long_name[130], long_key[1026], max_key[1025];

#define JSON  "application/json"
#define PATCH "application/merge-patch+json"
#define N(a)  (sizeof(a) / sizeof((a)[0]))

/* ---- the state that bad input must leave alone: everything a write could change ---- */

/* The topic's heads and offset sequence are tables named by its id: setup writes their SQL. */
static char heads_sql[256], sequence_sql[256];
static const struct th_read topic_reads[] = {
    {"topics", "/topics?limit=1000", NULL, "headless_oldest_age_seconds"},
    {"log", "/topics/t/messages?after=0&limit=1000", NULL, NULL},
    {"keys", "/topics/t/keys?limit=1000", NULL, NULL},
    {"producers", NULL,
     "SELECT topic_id, name, schema_version, updated_at FROM rowlock.producers ORDER BY 1, 2",
     NULL},
    {"heads", NULL, heads_sql, NULL},
    {"sequence", NULL, sequence_sql, NULL},
    {"tables", NULL,
     "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
     "WHERE nspname = 'rowlock' ORDER BY 1",
     NULL},
};
static const struct th_state topic_state = {topic_reads, N(topic_reads), NULL};

static int setup(void **state)
{
    memset(long_name, 'a', 129);
    memset(long_key, 'k', 1025);
    memset(max_key, 'k', 1024);
    if (th_svc_start("badinput", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{\"headless_ttl_seconds\":600}", 201));
    json_decref(th_svc_call("PUT", "/topics/t/producers/p", "{}", 201));
    json_t *m =
        th_svc_call("POST", "/topics/t/messages", "{\"key\":\"k1\",\"value\":{\"a\":1}}", 201);
    k1_offset = json_integer_value(json_object_get(m, "offset"));
    json_decref(m);
    json_decref(th_svc_call("POST", "/topics/t/messages",
                            "{\"producer\":\"p\",\"messages\":[{\"key\":\"k2\",\"value\":[1]},"
                            "{\"key\":\"k3\",\"value\":\"x\",\"sequence\":1}]}",
                            201));
    /* a headless row too, so that a stray lock of it would show in updated_at */
    struct th_response r;
    int ok = th_bad_send("PATCH", "/topics/t/keys/headless/head", PATCH, "{}", &r) == 0 &&
             r.status == 200;
    th_response_free(&r);
    int64_t id = th_svc_sql_int("SELECT id FROM rowlock.topics WHERE name = 't'");
    snprintf(heads_sql, sizeof(heads_sql),
             "SELECT key, head_id, compaction_rank, updated_at FROM "
             "rowlock.compaction_head_%" PRId64 " ORDER BY key",
             id);
    snprintf(sequence_sql, sizeof(sequence_sql),
             "SELECT last_value, is_called FROM rowlock.messages_%" PRId64 "_offset", id);
    return ok && k1_offset > 0 ? 0 : -1;
}

/* Every route that takes {topic}, with a valid body, for one bad topic (path-encoded); PUT
 * /topics/{topic} too unless skip_put (for a valid name it creates the topic). */
static void every_topic_route(const char *topic, long status, const char *code, int skip_put)
{
    char p[6][400];
    snprintf(p[0], sizeof(p[0]), "/topics/%s", topic);
    snprintf(p[1], sizeof(p[1]), "/topics/%s/producers/p", topic);
    snprintf(p[2], sizeof(p[2]), "/topics/%s/messages", topic);
    snprintf(p[3], sizeof(p[3]), "/topics/%s/messages?after=0&wait=0", topic);
    snprintf(p[4], sizeof(p[4]), "/topics/%s/keys", topic);
    snprintf(p[5], sizeof(p[5]), "/topics/%s/keys/k1/head", topic);
    const struct th_bad bad[] = {
        {"PUT", p[0], JSON, "{}", status, code},
        {"GET", p[0], NULL, NULL, status, code},
        {"DELETE", p[0], NULL, NULL, status, code},
        {"PUT", p[1], JSON, "{}", status, code},
        {"POST", p[2], JSON, "{\"key\":\"k\",\"value\":1}", status, code},
        {"POST", p[2], JSON, "{\"messages\":[{\"key\":\"k\",\"value\":1}]}", status, code},
        {"GET", p[3], NULL, NULL, status, code},
        {"GET", p[4], NULL, NULL, status, code},
        {"GET", p[5], NULL, NULL, status, code},
        {"PATCH", p[5], PATCH, "{\"a\":2}", status, code},
        {"PUT", p[5], JSON, "{\"a\":2}", status, code},
        {"DELETE", p[5], NULL, NULL, status, code},
    };
    th_bad_expect(&topic_state, bad + skip_put, N(bad) - (size_t)skip_put);
}

static void bad_topic_names_are_400_invalid_name_on_every_route(void **state)
{
    const char *names[] = {".lead", "-lead", "_lead",  long_name, "a%2Fb",
                           "a%20b", "a+b",   "%C3%A9", "a%3Bb",   "a*"};
    for (size_t i = 0; i < N(names); i++)
        every_topic_route(names[i], 400, "invalid_name", 0);
    const struct th_bad bad[] = {
        {"PUT", "/topics/t/producers/.p", JSON, "{}", 400, "invalid_name"},
        {"PUT", "/topics/t/producers/p%2Fq", JSON, "{}", 400, "invalid_name"},
        {"POST", "/topics/t/messages", JSON, "{\"producer\":\".p\",\"key\":\"k\",\"value\":1}", 400,
         "invalid_name"},
        {"POST", "/topics/t/messages", JSON, "{\"producer\":7,\"key\":\"k\",\"value\":1}", 400,
         "invalid_name"},
        {"PUT", "/topics/t/keys/k1/head?producer=a%20b", JSON, "{}", 400, "invalid_name"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

static void unknown_topic_is_404_topic_not_found_on_every_route(void **state)
{
    every_topic_route("ghost", 404, "topic_not_found", 1);
}

static void bad_keys_are_400(void **state)
{
    char p[4][1200];
    snprintf(p[0], sizeof(p[0]), "/topics/t/keys/%s/head", long_key);
    snprintf(p[1], sizeof(p[1]), "/topics/t/keys/%%FF/head");
    snprintf(p[2], sizeof(p[2]), "/topics/t/keys/a%%C0%%AFb/head");   /* overlong encoding */
    snprintf(p[3], sizeof(p[3]), "/topics/t/keys/%%ED%%A0%%80/head"); /* a surrogate */
    char long_body[1200], long_batch[1300];
    snprintf(long_body, sizeof(long_body), "{\"key\":\"%s\",\"value\":1}", long_key);
    snprintf(long_batch, sizeof(long_batch),
             "{\"messages\":[{\"key\":\"ok\",\"value\":1},{\"key\":\"%s\",\"value\":1}]}",
             long_key);
    struct th_bad bad[32];
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        bad[n++] = (struct th_bad){"GET", p[i], NULL, NULL, 400, "invalid_key"};
        bad[n++] = (struct th_bad){"PATCH", p[i], PATCH, "{\"a\":2}", 400, "invalid_key"};
        bad[n++] = (struct th_bad){"PUT", p[i], JSON, "{\"a\":2}", 400, "invalid_key"};
        bad[n++] = (struct th_bad){"DELETE", p[i], NULL, NULL, 400, "invalid_key"};
    }
    bad[n++] =
        (struct th_bad){"POST", "/topics/t/messages", JSON, long_body, 400, "invalid_message"};
    bad[n++] =
        (struct th_bad){"POST", "/topics/t/messages", JSON, long_batch, 400, "invalid_message"};
    bad[n++] = (struct th_bad){"POST", "/topics/t/messages", JSON, "{\"key\":\"\",\"value\":1}",
                               400,    "invalid_message"};
    bad[n++] = (struct th_bad){"POST", "/topics/t/messages", JSON, "{\"key\":5,\"value\":1}",
                               400,    "invalid_message"};
    /* raw invalid UTF-8 in a JSON body is not JSON at all */
    bad[n++] = (struct th_bad){"POST", "/topics/t/messages", JSON, "{\"key\":\"\xff\",\"value\":1}",
                               400,    "invalid_json"};
    th_bad_expect(&topic_state, bad, n);

    /* 1024 bytes is a valid key: the boundary is exact */
    char path[1200];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", max_key);
    assert_int_equal(th_bad_send("GET", path, NULL, NULL, &r), 0);
    th_assert_problem(&r, 404, "head_not_found");
    th_response_free(&r);
}

static void non_object_merge_patch_is_400_invalid_merge_patch(void **state)
{
    const struct th_bad bad[] = {
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "[1,2]", 400, "invalid_merge_patch"},
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "\"str\"", 400, "invalid_merge_patch"},
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "5", 400, "invalid_merge_patch"},
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "null", 400, "invalid_merge_patch"},
        {"PATCH", "/topics/t/keys/newkey/head", PATCH, "[]", 400, "invalid_merge_patch"},
        {"PATCH", "/topics/t/keys/headless/head", PATCH, "true", 400, "invalid_merge_patch"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

static void wrong_content_type_is_415(void **state)
{
    const struct th_bad bad[] = {
        {"POST", "/topics/t/messages", "text/plain", "{\"key\":\"k\",\"value\":1}", 415,
         "unsupported_media_type"},
        {"POST", "/topics/t/messages", NULL, "{\"key\":\"k\",\"value\":1}", 415,
         "unsupported_media_type"},
        {"POST", "/topics/t/messages", PATCH, "{\"key\":\"k\",\"value\":1}", 415,
         "unsupported_media_type"},
        {"POST", "/topics/t/messages", "application/jsonx", "{\"key\":\"k\",\"value\":1}", 415,
         "unsupported_media_type"},
        {"PUT", "/topics/t", "text/plain", "{}", 415, "unsupported_media_type"},
        {"PUT", "/topics/fresh", "application/xml", "{}", 415, "unsupported_media_type"},
        {"PUT", "/topics/t/producers/q", "text/plain", "{}", 415, "unsupported_media_type"},
        {"PATCH", "/topics/t/keys/k1/head", "text/plain", "{\"a\":2}", 415,
         "unsupported_media_type"},
        {"PATCH", "/topics/t/keys/k1/head", NULL, "{\"a\":2}", 415, "unsupported_media_type"},
        {"PUT", "/topics/t/keys/k1/head", PATCH, "{\"a\":2}", 415, "unsupported_media_type"},
        {"PUT", "/topics/t/keys/k1/head", "text/json", "{\"a\":2}", 415, "unsupported_media_type"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

static void malformed_json_is_400_invalid_json(void **state)
{
    const struct th_bad bad[] = {
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"k\",\"value\":1", 400, "invalid_json"},
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"k\",\"value\":}", 400, "invalid_json"},
        {"POST", "/topics/t/messages", JSON, "", 400, "invalid_json"},
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"a\\u0000b\",\"value\":1}", 400,
         "invalid_json"},
        {"POST", "/topics/t/messages", JSON, "{} {}", 400, "invalid_json"},
        {"PUT", "/topics/t", JSON, "{", 400, "invalid_json"},
        {"PUT", "/topics/fresh", JSON, "{'a':1}", 400, "invalid_json"},
        {"PUT", "/topics/t/producers/q", JSON, "{,}", 400, "invalid_json"},
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "{\"a\":", 400, "invalid_json"},
        {"PUT", "/topics/t/keys/k1/head", JSON, "{\"a\":tru}", 400, "invalid_json"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

static void unknown_producer_is_404_producer_not_found(void **state)
{
    const struct th_bad bad[] = {
        {"POST", "/topics/t/messages", JSON, "{\"producer\":\"ghost\",\"key\":\"k\",\"value\":1}",
         404, "producer_not_found"},
        {"POST", "/topics/t/messages", JSON,
         "{\"producer\":\"ghost\",\"messages\":[{\"key\":\"k\",\"value\":1}]}", 404,
         "producer_not_found"},
        {"PATCH", "/topics/t/keys/k1/head?producer=ghost", PATCH, "{\"a\":2}", 404,
         "producer_not_found"},
        {"PATCH", "/topics/t/keys/newkey/head?producer=ghost", PATCH, "{\"a\":2}", 404,
         "producer_not_found"},
        {"PUT", "/topics/t/keys/k1/head?producer=ghost", JSON, "{\"a\":2}", 404,
         "producer_not_found"},
        {"DELETE", "/topics/t/keys/k1/head?producer=ghost", NULL, NULL, 404, "producer_not_found"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

/* A batch of n messages where message bad_at (or none, when -1) is replaced by bad. */
static char *batch(int n, int bad_at, const char *bad)
{
    size_t cap = (size_t)n * 64 + 256;
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "{\"messages\":[");
    for (int i = 0; i < n; i++) {
        if (i == bad_at)
            o += (size_t)snprintf(b + o, cap - o, "%s%s", i ? "," : "", bad);
        else
            o += (size_t)snprintf(b + o, cap - o, "%s{\"key\":\"b%d\",\"value\":%d}", i ? "," : "",
                                  i, i);
    }
    snprintf(b + o, cap - o, "]}");
    return b;
}

static void bad_batches_write_none_of_their_messages(void **state)
{
    char *too_big = batch(1001, -1, NULL);
    char *bad_key = batch(5, 3, "{\"key\":\"\",\"value\":1}");
    char *no_value = batch(5, 4, "{\"key\":\"x\"}");
    char *no_key = batch(5, 0, "{\"value\":1}");
    char *unknown = batch(5, 2, "{\"key\":\"x\",\"value\":1,\"colour\":\"red\"}");
    char *not_object = batch(5, 1, "[1]");
    char *bad_rank = batch(5, 3, "{\"key\":\"x\",\"value\":1,\"rank\":\"high\"}");
    char *bad_seq = batch(5, 3, "{\"key\":\"x\",\"value\":1,\"sequence\":1}"); /* no producer */
    const struct th_bad bad[] = {
        {"POST", "/topics/t/messages", JSON, too_big, 400, "batch_too_large"},
        {"POST", "/topics/t/messages", JSON, "{\"messages\":[]}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "{\"messages\":{}}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "{\"messages\":null}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON,
         "{\"messages\":[{\"key\":\"k\",\"value\":1}],\"key\":\"k\"}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, bad_key, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, no_value, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, no_key, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, unknown, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, not_object, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, bad_rank, 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, bad_seq, 400, "invalid_message"},
        /* single messages */
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"k\"}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "{\"value\":1}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"k\",\"value\":1,\"extra\":true}", 400,
         "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "{\"key\":\"k\",\"value\":1,\"rank\":1.5}", 400,
         "invalid_message"},
        {"POST", "/topics/t/messages", JSON,
         "{\"producer\":\"p\",\"key\":\"k\",\"value\":1,\"sequence\":-1}", 400, "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "[{\"key\":\"k\",\"value\":1}]", 400,
         "invalid_message"},
        {"POST", "/topics/t/messages", JSON, "\"k\"", 400, "invalid_message"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
    /* the refusal names the bad message of a batch */
    struct th_response r;
    assert_int_equal(th_bad_send("POST", "/topics/t/messages", JSON, bad_key, &r), 0);
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "detail")), "message 3"));
    th_response_free(&r);
    assert_int_equal(th_bad_send("POST", "/topics/t/messages", JSON, too_big, &r), 0);
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "detail")), "1000"));
    th_response_free(&r);
    free(too_big);
    free(bad_key);
    free(no_value);
    free(no_key);
    free(unknown);
    free(not_object);
    free(bad_rank);
    free(bad_seq);
}

static void invalid_config_is_400_invalid_config(void **state)
{
    const char *topics[] = {"/topics/t", "/topics/fresh"}; /* update and create */
    const char *bodies[] = {
        "{\"headless_ttl_seconds\":0}",
        "{\"headless_ttl_seconds\":-1}",
        "{\"headless_ttl_seconds\":\"x\"}",
        "{\"headless_ttl_seconds\":1.5}",
        "{\"headless_ttl_seconds\":null}",
        "{\"headless_ttl_seconds\":2147483648}",
        "{\"retention_seconds\":0}",
        "{\"retention_seconds\":\"1\"}",
        "{\"default_schema_version\":0}",
        "{\"colour\":\"red\"}",
        "[]",
        "7",
    };
    struct th_bad bad[2 * N(bodies) + 4];
    size_t n = 0;
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < N(bodies); i++)
            bad[n++] = (struct th_bad){"PUT", topics[t], JSON, bodies[i], 400, "invalid_config"};
    bad[n++] = (struct th_bad){"PUT", "/topics/t/producers/p", JSON, "{\"schema_version\":0}",
                               400,   "invalid_config"};
    bad[n++] = (struct th_bad){"PUT", "/topics/t/producers/q", JSON, "{\"schema_version\":\"2\"}",
                               400,   "invalid_config"};
    bad[n++] = (struct th_bad){"PUT", "/topics/t/producers/q", JSON, "{\"version\":2}",
                               400,   "invalid_config"};
    bad[n++] = (struct th_bad){"PUT", "/topics/t/producers/q", JSON, "[]", 400, "invalid_config"};
    th_bad_expect(&topic_state, bad, n);
}

static void bad_query_parameters_are_400_invalid_parameter(void **state)
{
    const char *reads[] = {
        "limit=0",   "limit=1001", "limit=x", "limit=",  "after=-1", "after=x",
        "after=1.5", "wait=999",   "wait=-1", "wait=1s", "limit=5x", "after=0x10"};
    struct th_bad bad[N(reads) + 6];
    char paths[N(reads)][128];
    size_t n = 0;
    for (size_t i = 0; i < N(reads); i++) {
        snprintf(paths[i], sizeof(paths[i]), "/topics/t/messages?%s", reads[i]);
        bad[n++] = (struct th_bad){"GET", paths[i], NULL, NULL, 400, "invalid_parameter"};
    }
    bad[n++] =
        (struct th_bad){"GET", "/topics/t/keys?limit=0", NULL, NULL, 400, "invalid_parameter"};
    bad[n++] =
        (struct th_bad){"GET", "/topics/t/keys?limit=1001", NULL, NULL, 400, "invalid_parameter"};
    bad[n++] = (struct th_bad){"GET", "/topics?limit=0", NULL, NULL, 400, "invalid_parameter"};
    bad[n++] = (struct th_bad){"GET", "/topics?limit=abc", NULL, NULL, 400, "invalid_parameter"};
    th_bad_expect(&topic_state, bad, n);
}

/* A number past int64 is not silently clamped to the largest one. */
static void out_of_range_numbers_are_400_not_clamped(void **state)
{
    const struct th_bad bad[] = {
        {"GET", "/topics/t/messages?after=99999999999999999999", NULL, NULL, 400,
         "invalid_parameter"},
        {"GET", "/topics/t/messages?limit=99999999999999999999", NULL, NULL, 400,
         "invalid_parameter"},
        {"GET", "/topics/t/messages?wait=99999999999999999999", NULL, NULL, 400,
         "invalid_parameter"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

/* A key or name cursor that is not UTF-8 is a client error, not a database error (500). */
static void non_utf8_list_cursors_are_400_not_500(void **state)
{
    const char *paths[] = {"/topics/t/keys?after=%FF", "/topics?after=%FF"};
    char *before = th_bad_snapshot(&topic_state);
    for (size_t i = 0; i < N(paths); i++) {
        struct th_response r;
        assert_int_equal(th_bad_send("GET", paths[i], NULL, NULL, &r), 0);
        if (r.status != 400)
            fprintf(stderr, "GET %s: %ld %s\n", paths[i], r.status, r.body);
        assert_int_equal(r.status, 400);
        assert_non_null(strstr(th_problem_code(&r), "invalid_"));
        th_response_free(&r);
    }
    th_bad_unchanged(&topic_state, before);
    free(before);
}

static void put_head_null_is_400_and_leaves_the_head(void **state)
{
    const struct th_bad bad[] = {
        {"PUT", "/topics/t/keys/k1/head", JSON, "null", 400, "invalid_message"},
        {"PUT", "/topics/t/keys/newkey/head", JSON, "null", 400, "invalid_message"},
    };
    th_bad_expect(&topic_state, bad, N(bad));
}

static void if_match_mismatch_is_412_with_current_and_head_unchanged(void **state)
{
    char stale[64], garbage[] = "If-Match: nonsense";
    snprintf(stale, sizeof(stale), "If-Match: \"%" PRId64 "\"", k1_offset + 100);
    const char *none_match = "If-None-Match: *";
    const struct {
        const char *method, *ct, *body, *cond;
    } writes[] = {
        {"PUT", JSON, "{\"a\":9}", stale},         {"PUT", JSON, "{\"a\":9}", garbage},
        {"PUT", JSON, "{\"a\":9}", none_match},    {"PATCH", PATCH, "{\"a\":9}", stale},
        {"PATCH", PATCH, "{\"b\":1}", none_match}, {"DELETE", NULL, NULL, stale},
    };
    char *before = th_bad_snapshot(&topic_state);
    for (size_t i = 0; i < N(writes); i++) {
        char ct[64];
        snprintf(ct, sizeof(ct), "Content-Type: %s", writes[i].ct ? writes[i].ct : JSON);
        const char *headers[] = {writes[i].cond, ct, NULL};
        struct th_response r;
        const char *b = writes[i].body;
        assert_int_equal(th_http(th_svc.port, writes[i].method, "/topics/t/keys/k1/head", headers,
                                 b, b ? strlen(b) : 0, &r),
                         0);
        if (r.status != 412)
            fprintf(stderr, "%s with %s: %ld %s\n", writes[i].method, writes[i].cond, r.status,
                    r.body);
        th_assert_problem(&r, 412, "precondition_failed");
        json_t *cur = json_object_get(r.json, "current");
        assert_true(json_is_object(cur));
        assert_string_equal(json_string_value(json_object_get(cur, "key")), "k1");
        assert_int_equal(json_integer_value(json_object_get(cur, "offset")), k1_offset);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(cur, "value"), "a")),
                         1);
        char etag[32], want[32];
        snprintf(want, sizeof(want), "\"%" PRId64 "\"", k1_offset);
        assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
        assert_string_equal(etag, want);
        th_response_free(&r);
    }
    th_bad_unchanged(&topic_state, before);
    free(before);
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/topics/t/keys/k1/head", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "offset")), k1_offset);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r.json, "value"), "a")), 1);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_topic_names_are_400_invalid_name_on_every_route),
        cmocka_unit_test(unknown_topic_is_404_topic_not_found_on_every_route),
        cmocka_unit_test(bad_keys_are_400),
        cmocka_unit_test(non_object_merge_patch_is_400_invalid_merge_patch),
        cmocka_unit_test(wrong_content_type_is_415),
        cmocka_unit_test(malformed_json_is_400_invalid_json),
        cmocka_unit_test(unknown_producer_is_404_producer_not_found),
        cmocka_unit_test(bad_batches_write_none_of_their_messages),
        cmocka_unit_test(invalid_config_is_400_invalid_config),
        cmocka_unit_test(bad_query_parameters_are_400_invalid_parameter),
        cmocka_unit_test(out_of_range_numbers_are_400_not_clamped),
        cmocka_unit_test(non_utf8_list_cursors_are_400_not_500),
        cmocka_unit_test(put_head_null_is_400_and_leaves_the_head),
        cmocka_unit_test(if_match_mismatch_is_412_with_current_and_head_unchanged),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
