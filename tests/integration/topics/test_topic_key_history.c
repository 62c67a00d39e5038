/* GET /topics/{topic}/keys/{key}/messages: a key's messages newest first (tombstones too), paged
 * with limit and before (next), each request examining a bounded window of the log (the log has
 * no index by key): a key last written more than a window ago gives an empty page with a next,
 * and following next finds it; next is null once the log's start is reached. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define WINDOW 10000 /* DB_TOPIC_HISTORY_WINDOW */

static int setup(void **state)
{
    return th_svc_start("topic_key_history", NULL);
}

static long long offset_at(json_t *page, size_t i)
{
    return json_integer_value(
        json_object_get(json_array_get(json_object_get(page, "messages"), i), "offset"));
}

/* k written three times among other keys, then deleted: four messages newest first, the
 * tombstone's value null; limit 2 pages through them with next, the last page's next null. */
static void newest_first_with_tombstones_and_paging(void **state)
{
    json_decref(th_svc_call("PUT", "/topics/h", "{}", 201));
    for (int i = 1; i <= 3; i++) {
        char body[128];
        snprintf(body, sizeof(body),
                 "{\"messages\":[{\"key\":\"k\",\"value\":{\"v\":%d}},{\"key\":\"other\","
                 "\"value\":{\"v\":%d}}]}",
                 i, i);
        json_decref(th_svc_call("POST", "/topics/h/messages", body, 201));
    }
    json_decref(th_svc_call("DELETE", "/topics/h/keys/k/head", NULL, 200));
    json_t *all = th_svc_get("/topics/h/keys/k/messages");
    json_t *msgs = json_object_get(all, "messages");
    assert_int_equal(json_array_size(msgs), 4);
    assert_string_equal(json_string_value(json_object_get(all, "key")), "k");
    assert_true(json_is_null(json_object_get(all, "next")));
    assert_true(json_is_null(json_object_get(json_array_get(msgs, 0), "value")));
    for (size_t i = 1; i < 4; i++) {
        json_t *m = json_array_get(msgs, i);
        assert_string_equal(json_string_value(json_object_get(m, "key")), "k");
        assert_int_equal(json_integer_value(json_object_get(json_object_get(m, "value"), "v")),
                         (json_int_t)(4 - i));
        assert_true(offset_at(all, i) < offset_at(all, i - 1));
    }
    json_t *p1 = th_svc_get("/topics/h/keys/k/messages?limit=2");
    assert_int_equal(json_array_size(json_object_get(p1, "messages")), 2);
    assert_int_equal(json_integer_value(json_object_get(p1, "next")), offset_at(all, 1));
    char path[128];
    snprintf(path, sizeof(path), "/topics/h/keys/k/messages?limit=2&before=%lld",
             (long long)json_integer_value(json_object_get(p1, "next")));
    json_t *p2 = th_svc_get(path);
    assert_int_equal(json_array_size(json_object_get(p2, "messages")), 2);
    assert_int_equal(offset_at(p2, 0), offset_at(all, 2));
    assert_int_equal(offset_at(p2, 1), offset_at(all, 3));
    json_t *none = th_svc_get("/topics/h/keys/never/messages");
    assert_int_equal(json_array_size(json_object_get(none, "messages")), 0);
    assert_true(json_is_null(json_object_get(none, "next")));
    json_decref(none);
    json_decref(p2);
    json_decref(p1);
    json_decref(all);
}

/* old written once, then more than a window of other messages: the first page is empty with a
 * next a window below the log's end; following next reaches it, and then the start (null). */
static void a_request_examines_one_window_of_the_log(void **state)
{
    json_decref(th_svc_call("PUT", "/topics/w", "{}", 201));
    json_decref(th_svc_call("POST", "/topics/w/messages", "{\"key\":\"old\",\"value\":1}", 201));
    json_t *batch = json_array();
    for (int i = 0; i < 1000; i++)
        json_array_append_new(batch, json_pack("{s:s, s:i}", "key", "filler", "value", i));
    json_t *body = json_pack("{s:o}", "messages", batch);
    char *text = json_dumps(body, JSON_COMPACT);
    for (int i = 0; i < WINDOW / 1000 + 1; i++)
        json_decref(th_svc_call("POST", "/topics/w/messages", text, 201));
    free(text);
    json_decref(body);
    long long end = 1 + 1 + (WINDOW / 1000 + 1) * 1000LL; /* offsets 1 .. end - 1 */
    json_t *first = th_svc_get("/topics/w/keys/old/messages");
    assert_int_equal(json_array_size(json_object_get(first, "messages")), 0);
    assert_int_equal(json_integer_value(json_object_get(first, "next")), end - WINDOW);
    char path[128];
    snprintf(path, sizeof(path), "/topics/w/keys/old/messages?before=%lld", end - WINDOW);
    json_t *second = th_svc_get(path);
    assert_int_equal(json_array_size(json_object_get(second, "messages")), 1);
    assert_int_equal(offset_at(second, 0), 1);
    assert_true(json_is_null(json_object_get(second, "next")));
    json_decref(second);
    json_decref(first);
}

static void bad_input_and_unknown_topic(void **state)
{
    th_svc_get_problem("/topics/h/keys/k/messages?limit=0", 400, "invalid_parameter");
    th_svc_get_problem("/topics/h/keys/k/messages?limit=1001", 400, "invalid_parameter");
    th_svc_get_problem("/topics/h/keys/k/messages?before=0", 400, "invalid_parameter");
    th_svc_get_problem("/topics/h/keys/k/messages?before=x", 400, "invalid_parameter");
    th_svc_get_problem("/topics/nope/keys/k/messages", 404, "topic_not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(newest_first_with_tombstones_and_paging),
        cmocka_unit_test(a_request_examines_one_window_of_the_log),
        cmocka_unit_test(bad_input_and_unknown_topic),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
