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
static char long_key[1026], max_key[1025];

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
             "rowlock.topic_heads WHERE topic_id = %" PRId64 " ORDER BY key",
             id);
    snprintf(sequence_sql, sizeof(sequence_sql),
             "SELECT last_value, is_called FROM rowlock.topic_offsets_%" PRId64, id);
    return ok && k1_offset > 0 ? 0 : -1;
}

/* Every route that takes {topic}, with a valid body, for one bad topic (path-encoded); PUT
 * /topics/{topic} too unless skip_put (for a valid name it creates the topic). */
static void every_topic_route(const char *topic, long status, const char *code, int skip_put)
{
    const struct th_req routes[] = {
        {"PUT", "/topics/%s", JSON, "{}"},
        {"GET", "/topics/%s", NULL, NULL},
        {"DELETE", "/topics/%s", NULL, NULL},
        {"PUT", "/topics/%s/producers/p", JSON, "{}"},
        {"POST", "/topics/%s/messages", JSON, "{\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/%s/messages", JSON, "{\"messages\":[{\"key\":\"k\",\"value\":1}]}"},
        {"GET", "/topics/%s/messages?after=0&wait=0", NULL, NULL},
        {"GET", "/topics/%s/keys", NULL, NULL},
        {"GET", "/topics/%s/keys/k1/head", NULL, NULL},
        {"PATCH", "/topics/%s/keys/k1/head", PATCH, "{\"a\":2}"},
        {"PUT", "/topics/%s/keys/k1/head", JSON, "{\"a\":2}"},
        {"DELETE", "/topics/%s/keys/k1/head", NULL, NULL},
    };
    th_bad_expect_named(&topic_state, routes + skip_put, N(routes) - (size_t)skip_put, topic, 0,
                        status, code);
}

static void bad_topic_names_are_400_invalid_name_on_every_route(void **state)
{
    const char *names[TH_BAD_NAMES];
    th_bad_names(names);
    for (size_t i = 0; i < TH_BAD_NAMES; i++)
        every_topic_route(names[i], 400, "invalid_name", 0);
    const struct th_req producers[] = {
        {"PUT", "/topics/t/producers/.p", JSON, "{}"},
        {"PUT", "/topics/t/producers/p%2Fq", JSON, "{}"},
        {"POST", "/topics/t/messages", JSON, "{\"producer\":\".p\",\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/t/messages", JSON, "{\"producer\":7,\"key\":\"k\",\"value\":1}"},
        {"PUT", "/topics/t/keys/k1/head?producer=a%20b", JSON, "{}"},
    };
    th_bad_expect_all(&topic_state, producers, N(producers), 400, "invalid_name");
}

static void unknown_topic_is_404_topic_not_found_on_every_route(void **state)
{
    every_topic_route("ghost", 404, "topic_not_found", 1);
}

static void bad_keys_are_400(void **state)
{
    const char *keys[] = {long_key, "%FF", "a%C0%AFb" /* overlong encoding */,
                          "%ED%A0%80" /* a surrogate */};
    char p[N(keys)][1200];
    struct th_req key_routes[4 * N(keys)];
    size_t n = 0;
    for (size_t i = 0; i < N(keys); i++) {
        snprintf(p[i], sizeof(p[i]), "/topics/t/keys/%s/head", keys[i]);
        key_routes[n++] = (struct th_req){"GET", p[i], NULL, NULL};
        key_routes[n++] = (struct th_req){"PATCH", p[i], PATCH, "{\"a\":2}"};
        key_routes[n++] = (struct th_req){"PUT", p[i], JSON, "{\"a\":2}"};
        key_routes[n++] = (struct th_req){"DELETE", p[i], NULL, NULL};
    }
    th_bad_expect_all(&topic_state, key_routes, n, 400, "invalid_key");
    char long_body[1200], long_batch[1300];
    snprintf(long_body, sizeof(long_body), "{\"key\":\"%s\",\"value\":1}", long_key);
    snprintf(long_batch, sizeof(long_batch),
             "{\"messages\":[{\"key\":\"ok\",\"value\":1},{\"key\":\"%s\",\"value\":1}]}",
             long_key);
    const char *messages[] = {long_body, long_batch, "{\"key\":\"\",\"value\":1}",
                              "{\"key\":5,\"value\":1}"};
    th_bad_expect_bodies(&topic_state, "POST", "/topics/t/messages", JSON, messages, N(messages),
                         400, "invalid_message");
    /* raw invalid UTF-8 in a JSON body is not JSON at all */
    th_bad_expect_bodies(&topic_state, "POST", "/topics/t/messages", JSON,
                         (const char *[]){"{\"key\":\"\xff\",\"value\":1}"}, 1, 400,
                         "invalid_json");

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
    const char *patches[] = {"[1,2]", "\"str\"", "5", "null"};
    th_bad_expect_bodies(&topic_state, "PATCH", "/topics/t/keys/k1/head", PATCH, patches,
                         N(patches), 400, "invalid_merge_patch");
    const struct th_req others[] = {
        {"PATCH", "/topics/t/keys/newkey/head", PATCH, "[]"},
        {"PATCH", "/topics/t/keys/headless/head", PATCH, "true"},
    };
    th_bad_expect_all(&topic_state, others, N(others), 400, "invalid_merge_patch");
}

static void wrong_content_type_is_415(void **state)
{
    const struct th_req bad[] = {
        {"POST", "/topics/t/messages", "text/plain", "{\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/t/messages", NULL, "{\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/t/messages", PATCH, "{\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/t/messages", "application/jsonx", "{\"key\":\"k\",\"value\":1}"},
        {"PUT", "/topics/t", "text/plain", "{}"},
        {"PUT", "/topics/fresh", "application/xml", "{}"},
        {"PUT", "/topics/t/producers/q", "text/plain", "{}"},
        {"PATCH", "/topics/t/keys/k1/head", "text/plain", "{\"a\":2}"},
        {"PATCH", "/topics/t/keys/k1/head", NULL, "{\"a\":2}"},
        {"PUT", "/topics/t/keys/k1/head", PATCH, "{\"a\":2}"},
        {"PUT", "/topics/t/keys/k1/head", "text/json", "{\"a\":2}"},
    };
    th_bad_expect_all(&topic_state, bad, N(bad), 415, "unsupported_media_type");
}

static void malformed_json_is_400_invalid_json(void **state)
{
    const char *messages[] = {"{\"key\":\"k\",\"value\":1", "{\"key\":\"k\",\"value\":}", "",
                              "{\"key\":\"a\\u0000b\",\"value\":1}", "{} {}"};
    th_bad_expect_bodies(&topic_state, "POST", "/topics/t/messages", JSON, messages, N(messages),
                         400, "invalid_json");
    const struct th_req others[] = {
        {"PUT", "/topics/t", JSON, "{"},
        {"PUT", "/topics/fresh", JSON, "{'a':1}"},
        {"PUT", "/topics/t/producers/q", JSON, "{,}"},
        {"PATCH", "/topics/t/keys/k1/head", PATCH, "{\"a\":"},
        {"PUT", "/topics/t/keys/k1/head", JSON, "{\"a\":tru}"},
    };
    th_bad_expect_all(&topic_state, others, N(others), 400, "invalid_json");
}

static void unknown_producer_is_404_producer_not_found(void **state)
{
    const struct th_req bad[] = {
        {"POST", "/topics/t/messages", JSON, "{\"producer\":\"ghost\",\"key\":\"k\",\"value\":1}"},
        {"POST", "/topics/t/messages", JSON,
         "{\"producer\":\"ghost\",\"messages\":[{\"key\":\"k\",\"value\":1}]}"},
        {"PATCH", "/topics/t/keys/k1/head?producer=ghost", PATCH, "{\"a\":2}"},
        {"PATCH", "/topics/t/keys/newkey/head?producer=ghost", PATCH, "{\"a\":2}"},
        {"PUT", "/topics/t/keys/k1/head?producer=ghost", JSON, "{\"a\":2}"},
        {"DELETE", "/topics/t/keys/k1/head?producer=ghost", NULL, NULL},
    };
    th_bad_expect_all(&topic_state, bad, N(bad), 404, "producer_not_found");
}

static void bad_batches_write_none_of_their_messages(void **state)
{
    static const struct th_batch_shape messages = {"/topics/t/messages", "messages",
                                                   "{\"key\":\"b%d\",\"value\":%d}", "message"};
    static const struct th_batch_case bad[] = {
        {5, 3, "{\"key\":\"\",\"value\":1}", 1},
        {5, 4, "{\"key\":\"x\"}", 0},
        {5, 0, "{\"value\":1}", 0},
        {5, 2, "{\"key\":\"x\",\"value\":1,\"colour\":\"red\"}", 0},
        {5, 1, "[1]", 0},
        {5, 3, "{\"key\":\"x\",\"value\":1,\"rank\":\"high\"}", 0},
        {5, 3, "{\"key\":\"x\",\"value\":1,\"sequence\":1}", 0}, /* no producer */
    };
    th_bad_expect_batches(&topic_state, &messages, bad, N(bad), "invalid_message");
    const char *bodies[] = {
        "{\"messages\":[]}",
        "{\"messages\":{}}",
        "{\"messages\":null}",
        "{\"messages\":[{\"key\":\"k\",\"value\":1}],\"key\":\"k\"}",
        /* single messages */
        "{\"key\":\"k\"}",
        "{\"value\":1}",
        "{\"key\":\"k\",\"value\":1,\"extra\":true}",
        "{\"key\":\"k\",\"value\":1,\"rank\":1.5}",
        "{\"producer\":\"p\",\"key\":\"k\",\"value\":1,\"sequence\":-1}",
        "[{\"key\":\"k\",\"value\":1}]",
        "\"k\"",
    };
    th_bad_expect_bodies(&topic_state, "POST", "/topics/t/messages", JSON, bodies, N(bodies), 400,
                         "invalid_message");
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
    for (size_t t = 0; t < N(topics); t++)
        th_bad_expect_bodies(&topic_state, "PUT", topics[t], JSON, bodies, N(bodies), 400,
                             "invalid_config");
    const struct th_req producers[] = {
        {"PUT", "/topics/t/producers/p", JSON, "{\"schema_version\":0}"},
        {"PUT", "/topics/t/producers/q", JSON, "{\"schema_version\":\"2\"}"},
        {"PUT", "/topics/t/producers/q", JSON, "{\"version\":2}"},
        {"PUT", "/topics/t/producers/q", JSON, "[]"},
    };
    th_bad_expect_all(&topic_state, producers, N(producers), 400, "invalid_config");
}

static void bad_query_parameters_are_400_invalid_parameter(void **state)
{
    const char *reads[] = {
        "limit=0",   "limit=1001", "limit=x", "limit=",  "after=-1", "after=x",
        "after=1.5", "wait=999",   "wait=-1", "wait=1s", "limit=5x", "after=0x10"};
    th_bad_expect_gets(&topic_state, "/topics/t/messages?", reads, N(reads), 400,
                       "invalid_parameter");
    const char *keys[] = {"limit=0", "limit=1001"}, *topics[] = {"limit=0", "limit=abc"};
    th_bad_expect_gets(&topic_state, "/topics/t/keys?", keys, N(keys), 400, "invalid_parameter");
    th_bad_expect_gets(&topic_state, "/topics?", topics, N(topics), 400, "invalid_parameter");
}

/* A number past int64 is not silently clamped to the largest one. */
static void out_of_range_numbers_are_400_not_clamped(void **state)
{
    const char *params[] = {"after=99999999999999999999", "limit=99999999999999999999",
                            "wait=99999999999999999999"};
    th_bad_expect_gets(&topic_state, "/topics/t/messages?", params, N(params), 400,
                       "invalid_parameter");
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
    const struct th_req bad[] = {
        {"PUT", "/topics/t/keys/k1/head", JSON, "null"},
        {"PUT", "/topics/t/keys/newkey/head", JSON, "null"},
    };
    th_bad_expect_all(&topic_state, bad, N(bad), 400, "invalid_message");
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
