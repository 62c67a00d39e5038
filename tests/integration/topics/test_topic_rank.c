/* Rank ordering of a key's head: a produce moves the head only to a message of strictly higher
 * rank. A lower rank leaves it (response head=rank_rejected, head_offset and ETag = the old
 * head); a higher rank moves it; an equal rank does not: the first message of a rank keeps the
 * head (first wins), in separate produces and inside one batch alike. Without a rank the rank is
 * the message's offset, so a later default-rank message beats an earlier one. A batch naming a
 * key several times ends with its highest-ranked message as head. A rank_rejected message is
 * still written: it stays in the log with its rank. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define NO_RANK INT64_MIN

static const char *const json_body[] = {"Content-Type: application/json", NULL};

struct produced {
    int64_t offset, head_offset;
    char head[32]; /* advanced, rank_rejected, duplicate */
};

static void produced_from(json_t *j, struct produced *p)
{
    p->offset = json_integer_value(json_object_get(j, "offset"));
    p->head_offset = json_integer_value(json_object_get(j, "head_offset"));
    snprintf(p->head, sizeof(p->head), "%s", json_string_value(json_object_get(j, "head")));
}

/* Produces one message (rank NO_RANK: the default) and checks the response's ETag. */
static struct produced produce(const char *key, const char *value, int64_t rank)
{
    json_t *m = json_pack("{s:s, s:o}", "key", key, "value", json_loads(value, 0, NULL));
    if (rank != NO_RANK)
        json_object_set_new(m, "rank", json_integer(rank));
    char *body = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    struct th_response r;
    assert_int_equal(
        th_http(th_svc.port, "POST", "/topics/t/messages", json_body, body, strlen(body), &r), 0);
    free(body);
    if (r.status != 201)
        fprintf(stderr, "produce: %ld %s\n", r.status, r.body);
    assert_int_equal(r.status, 201);
    struct produced p;
    produced_from(r.json, &p);
    char etag[32], want[32];
    snprintf(want, sizeof(want), "\"%" PRId64 "\"", p.head_offset);
    assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
    assert_string_equal(etag, want);
    th_response_free(&r);
    return p;
}

/* Produces a batch of n messages of key: values[i] with ranks[i] (NO_RANK: default). */
static void produce_batch(const char *key, const char *const *values, const int64_t *ranks,
                          size_t n, struct produced *out)
{
    json_t *msgs = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_pack("{s:s, s:o}", "key", key, "value", json_loads(values[i], 0, NULL));
        if (ranks[i] != NO_RANK)
            json_object_set_new(m, "rank", json_integer(ranks[i]));
        json_array_append_new(msgs, m);
    }
    json_t *b = json_pack("{s:o}", "messages", msgs);
    char *body = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    struct th_response r;
    assert_int_equal(
        th_http(th_svc.port, "POST", "/topics/t/messages", json_body, body, strlen(body), &r), 0);
    free(body);
    assert_int_equal(r.status, 201);
    json_t *res = json_object_get(r.json, "messages");
    assert_int_equal(json_array_size(res), n);
    for (size_t i = 0; i < n; i++)
        produced_from(json_array_get(res, i), &out[i]);
    th_response_free(&r);
}

/* Asserts the key's head: offset, rank and value (JSON text). */
static void assert_head(const char *key, int64_t offset, int64_t rank, const char *value)
{
    char path[128], etag[32], want[32];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    if (r.status != 200 || json_integer_value(json_object_get(r.json, "offset")) != offset)
        fprintf(stderr, "head of %s: %ld %s (want offset %" PRId64 ")\n", key, r.status, r.body,
                offset);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "offset")), offset);
    assert_int_equal(json_integer_value(json_object_get(r.json, "rank")), rank);
    json_t *v = json_loads(value, 0, NULL);
    assert_true(json_equal(json_object_get(r.json, "value"), v));
    json_decref(v);
    snprintf(want, sizeof(want), "\"%" PRId64 "\"", offset);
    assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
    assert_string_equal(etag, want);
    th_response_free(&r);
}

static void lower_rank_never_moves_the_head(void **state)
{
    struct produced a = produce("lower", "{\"v\": \"first\"}", 10);
    assert_string_equal(a.head, "advanced");
    assert_int_equal(a.head_offset, a.offset);
    struct produced b = produce("lower", "{\"v\": \"low\"}", 5);
    assert_true(b.offset > a.offset);
    assert_string_equal(b.head, "rank_rejected");
    assert_int_equal(b.head_offset, a.offset);
    struct produced c = produce("lower", "{\"v\": \"negative\"}", -1000);
    assert_string_equal(c.head, "rank_rejected");
    assert_int_equal(c.head_offset, a.offset);
    assert_head("lower", a.offset, 10, "{\"v\": \"first\"}");
}

static void higher_rank_moves_the_head(void **state)
{
    struct produced a = produce("higher", "{\"v\": 1}", 10);
    struct produced b = produce("higher", "{\"v\": 2}", 20);
    assert_string_equal(b.head, "advanced");
    assert_int_equal(b.head_offset, b.offset);
    assert_head("higher", b.offset, 20, "{\"v\": 2}");
    struct produced c = produce("higher", "{\"v\": 3}", 21);
    assert_string_equal(c.head, "advanced");
    assert_head("higher", c.offset, 21, "{\"v\": 3}");
    assert_true(a.offset < b.offset && b.offset < c.offset);
}

/* Equal ranks: the message already at the head keeps it (first wins). */
static void equal_rank_keeps_the_first(void **state)
{
    struct produced a = produce("equal", "{\"v\": \"first\"}", 10);
    struct produced b = produce("equal", "{\"v\": \"second\"}", 10);
    assert_string_equal(b.head, "rank_rejected");
    assert_int_equal(b.head_offset, a.offset);
    assert_head("equal", a.offset, 10, "{\"v\": \"first\"}");
}

static void default_rank_is_the_offset(void **state)
{
    struct produced a = produce("default", "{\"v\": 1}", NO_RANK);
    assert_string_equal(a.head, "advanced");
    assert_head("default", a.offset, a.offset, "{\"v\": 1}");
    struct produced b = produce("default", "{\"v\": 2}", NO_RANK);
    assert_string_equal(b.head, "advanced");
    assert_head("default", b.offset, b.offset, "{\"v\": 2}");
    /* explicit ranks compare with the default one: equal and below lose, above wins */
    struct produced c = produce("default", "{\"v\": 3}", b.offset);
    assert_string_equal(c.head, "rank_rejected");
    struct produced d = produce("default", "{\"v\": 4}", b.offset - 1);
    assert_string_equal(d.head, "rank_rejected");
    assert_head("default", b.offset, b.offset, "{\"v\": 2}");
    int64_t big = b.offset + 1000000;
    struct produced e = produce("default", "{\"v\": 5}", big);
    assert_string_equal(e.head, "advanced");
    /* a later default-rank message has a lower rank than that explicit one */
    struct produced f = produce("default", "{\"v\": 6}", NO_RANK);
    assert_string_equal(f.head, "rank_rejected");
    assert_int_equal(f.head_offset, e.offset);
    assert_head("default", e.offset, big, "{\"v\": 5}");
}

static void batch_keeps_the_highest_ranked_message_of_a_key(void **state)
{
    const char *vals[] = {"{\"v\": \"a\"}", "{\"v\": \"b\"}", "{\"v\": \"c\"}"};
    const int64_t ranks[] = {3, 9, 5};
    struct produced p[3];
    produce_batch("batch", vals, ranks, 3, p);
    assert_true(p[0].offset < p[1].offset && p[1].offset < p[2].offset);
    assert_string_equal(p[0].head, "rank_rejected");
    assert_string_equal(p[1].head, "advanced");
    assert_string_equal(p[2].head, "rank_rejected");
    for (int i = 0; i < 3; i++)
        assert_int_equal(p[i].head_offset, p[1].offset);
    assert_head("batch", p[1].offset, 9, "{\"v\": \"b\"}");

    /* a whole batch below the head changes nothing */
    int64_t head = p[1].offset;
    const int64_t low[] = {1, 8, 2};
    produce_batch("batch", vals, low, 3, p);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(p[i].head, "rank_rejected");
        assert_int_equal(p[i].head_offset, head);
    }
    assert_head("batch", head, 9, "{\"v\": \"b\"}");

    /* default ranks: the last message of the batch has the highest offset */
    const int64_t defaults[] = {NO_RANK, NO_RANK, NO_RANK};
    produce_batch("batch_default", vals, defaults, 3, p);
    assert_string_equal(p[2].head, "advanced");
    assert_head("batch_default", p[2].offset, p[2].offset, "{\"v\": \"c\"}");

    /* equal ranks in one batch: the first keeps the head, as across produces */
    const int64_t equal[] = {7, 7, 7};
    produce_batch("batch_equal", vals, equal, 3, p);
    assert_string_equal(p[0].head, "advanced");
    assert_string_equal(p[1].head, "rank_rejected");
    assert_string_equal(p[2].head, "rank_rejected");
    assert_head("batch_equal", p[0].offset, 7, "{\"v\": \"a\"}");
}

/* Finds offset in the log (read from after, paging with next); 1 with its rank and value. */
static int log_find(int64_t after, int64_t offset, int64_t *rank, json_t **value)
{
    for (;;) {
        char path[128];
        struct th_response r;
        snprintf(path, sizeof(path), "/topics/t/messages?after=%" PRId64 "&limit=2", after);
        assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        json_t *msgs = json_object_get(r.json, "messages");
        for (size_t i = 0; i < json_array_size(msgs); i++) {
            json_t *m = json_array_get(msgs, i);
            if (json_integer_value(json_object_get(m, "offset")) != offset)
                continue;
            assert_string_equal(json_string_value(json_object_get(m, "key")), "logged");
            *rank = json_integer_value(json_object_get(m, "rank"));
            *value = json_incref(json_object_get(m, "value"));
            th_response_free(&r);
            return 1;
        }
        int64_t next = json_integer_value(json_object_get(r.json, "next"));
        int empty = json_array_size(msgs) == 0;
        th_response_free(&r);
        if (empty && next == after)
            return 0;
        after = next;
    }
}

static void rank_rejected_messages_stay_in_the_log(void **state)
{
    struct produced head = produce("logged", "{\"v\": \"head\"}", 100);
    struct produced rej[3];
    rej[0] = produce("logged", "{\"v\": 0}", 50);
    const char *vals[] = {"{\"v\": 1}", "{\"v\": 2}"};
    const int64_t ranks[] = {60, 70};
    produce_batch("logged", vals, ranks, 2, rej + 1);
    const int64_t want_rank[] = {50, 60, 70};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(rej[i].head, "rank_rejected");
        int64_t rank = 0;
        json_t *value = NULL;
        assert_true(log_find(head.offset - 1, rej[i].offset, &rank, &value));
        assert_int_equal(rank, want_rank[i]);
        assert_int_equal(json_integer_value(json_object_get(value, "v")), i);
        json_decref(value);
    }
    int64_t rank = 0;
    json_t *value = NULL;
    assert_true(log_find(head.offset - 1, head.offset, &rank, &value));
    assert_int_equal(rank, 100);
    json_decref(value);
    assert_head("logged", head.offset, 100, "{\"v\": \"head\"}");
}

static int setup(void **state)
{
    struct th_response r;
    const char *body = "{}";
    if (th_svc_start("topic_rank", NULL) != 0)
        return -1;
    if (th_http(th_svc.port, "PUT", "/topics/t", json_body, body, strlen(body), &r) != 0 ||
        r.status != 201) {
        th_response_free(&r);
        th_service_stop(&th_svc);
        return -1;
    }
    th_response_free(&r);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lower_rank_never_moves_the_head),
        cmocka_unit_test(higher_rank_moves_the_head),
        cmocka_unit_test(equal_rank_keeps_the_first),
        cmocka_unit_test(default_rank_is_the_offset),
        cmocka_unit_test(batch_keeps_the_highest_ranked_message_of_a_key),
        cmocka_unit_test(rank_rejected_messages_stay_in_the_log),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
