/* Conditional reads of a head (RFC 9110 13.1.2): GET /topics/{t}/keys/{k}/head with an
 * If-None-Match naming the head's current ETag (itself, its weak form W/"n", a list holding it,
 * or *) answers 304 with the ETag and no body; a tag of an older head, or garbage, answers 200
 * with the head. A key without a head still answers 404. A head write whose If-None-Match names
 * the current ETag fails its precondition (412), as the same header does on any other method. */
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

/* Produces value on key k of topic t; returns the new head's offset. */
static int64_t produce(const char *value)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"key\":\"k\",\"value\":%s}", value);
    json_t *j = th_svc_call("POST", "/topics/t/messages", body, 201);
    int64_t offset = json_integer_value(json_object_get(j, "head_offset"));
    json_decref(j);
    return offset;
}

/* GET the head of k with If-None-Match: inm; checks the status and, for 304, the empty body and
 * the ETag of offset. */
static void get_with(const char *key, const char *inm, long status, int64_t offset)
{
    char header[256], path[64], etag[32] = "", want[32];
    snprintf(header, sizeof(header), "If-None-Match: %s", inm);
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    const char *headers[] = {header, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, headers, NULL, 0, &r), 0);
    if (r.status != status)
        fail_msg("If-None-Match: %s -> %ld (want %ld) %s", inm, r.status, status,
                 r.body ? r.body : "");
    if (status == 304 || status == 200) {
        snprintf(want, sizeof(want), "\"%" PRId64 "\"", offset);
        assert_int_equal(th_header(&r, "ETag", etag, sizeof(etag)), 0);
        assert_string_equal(etag, want);
    }
    if (status == 304)
        assert_int_equal(r.len, 0);
    if (status == 200)
        assert_int_equal(json_integer_value(json_object_get(r.json, "offset")), offset);
    th_response_free(&r);
}

static void if_none_match_with_the_current_etag_answers_304(void **state)
{
    (void)state;
    int64_t first = produce("{\"n\":1}");
    char cur[64], weak[64], list[96], old[64];
    snprintf(cur, sizeof(cur), "\"%" PRId64 "\"", first);
    snprintf(weak, sizeof(weak), "W/\"%" PRId64 "\"", first);
    snprintf(list, sizeof(list), "\"77\", W/\"78\",\"%" PRId64 "\"", first);
    get_with("k", cur, 304, first);
    get_with("k", weak, 304, first);
    get_with("k", list, 304, first);
    get_with("k", "*", 304, first);
    get_with("k", "\"77\"", 200, first);
    get_with("k", "nonsense", 200, first);
    get_with("k", "\"", 200, first);

    int64_t second = produce("{\"n\":2}");
    snprintf(old, sizeof(old), "\"%" PRId64 "\"", first);
    get_with("k", old, 200, second);
    snprintf(cur, sizeof(cur), "\"%" PRId64 "\"", second);
    get_with("k", cur, 304, second);

    get_with("nokey", "*", 404, 0);
    get_with("nokey", cur, 404, 0);
}

static void a_write_with_if_none_match_of_the_current_etag_fails(void **state)
{
    (void)state;
    int64_t head = produce("{\"n\":3}");
    char inm[96];
    snprintf(inm, sizeof(inm), "If-None-Match: \"1\", \"%" PRId64 "\"", head);
    const char *headers[] = {"Content-Type: application/json", inm, NULL};
    struct th_response r;
    assert_int_equal(
        th_http(th_svc.port, "PUT", "/topics/t/keys/k/head", headers, "{\"n\":4}", 7, &r), 0);
    th_assert_problem(&r, 412, "precondition_failed");
    th_response_free(&r);
    const char *other[] = {"Content-Type: application/json", "If-None-Match: \"1\"", NULL};
    assert_int_equal(
        th_http(th_svc.port, "PUT", "/topics/t/keys/k/head", other, "{\"n\":4}", 7, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
}

static int setup(void **state)
{
    (void)state;
    if (th_svc_start("topic_conditional_read", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(if_none_match_with_the_current_etag_answers_304),
        cmocka_unit_test(a_write_with_if_none_match_of_the_current_etag_fails),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
