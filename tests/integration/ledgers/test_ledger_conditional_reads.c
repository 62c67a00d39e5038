/* Conditional reads of ledger objects and displays: each answer carries a
 * strong ETag, its version, and a GET whose If-None-Match names the current one (alone, weak,
 * in a list, or "*") answers 304 without a body, still carrying the ETag. Another tag, an
 * outdated one after a newer version, or a malformed field answers 200 with the item. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    if (th_svc_start("ledger_conditional_reads", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/ledgers/c", "{}", 201));
    json_decref(th_svc_call(
        "POST", "/ledgers/c/transactions",
        "{\"digest\":\"t1\",\"writes\":[{\"object_id\":\"x\",\"version\":3,\"type\":\"T\","
        "\"data\":{\"v\":1}}],\"displays\":[{\"type\":\"T\",\"version\":5,\"data\":[1]}]}",
        201));
    return 0;
}

/* GET path with If-None-Match inm (NULL: none); asserts the status and the ETag sent. */
static void get(const char *path, const char *inm, long status, const char *etag)
{
    char h[256];
    snprintf(h, sizeof(h), "If-None-Match: %s", inm ? inm : "");
    const char *const headers[] = {h, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, inm ? headers : NULL, NULL, 0, &r), 0);
    if (r.status != status)
        fail_msg("GET %s If-None-Match %s: expected %ld, got %ld %s", path, inm ? inm : "-", status,
                 r.status, r.body);
    char got[64] = "";
    assert_int_equal(th_header(&r, "ETag", got, sizeof(got)), 0);
    assert_string_equal(got, etag);
    if (status == 304)
        assert_int_equal(r.len, 0);
    else
        assert_non_null(json_object_get(r.json, "data"));
    th_response_free(&r);
}

static void matching_tags_answer_304_without_a_body(void **state)
{
    static const char *const item[][2] = {{"/ledgers/c/objects/x", "\"3\""},
                                          {"/ledgers/c/displays/T", "\"5\""}};
    for (int i = 0; i < 2; i++) {
        const char *path = item[i][0], *tag = item[i][1];
        char weak[32], list[64];
        snprintf(weak, sizeof(weak), "W/%s", tag);
        snprintf(list, sizeof(list), "\"1\", W/\"2\" ,%s", tag);
        get(path, NULL, 200, tag);
        get(path, tag, 304, tag);
        get(path, weak, 304, tag);
        get(path, list, 304, tag);
        get(path, "*", 304, tag);
        get(path, "\"4\"", 200, tag);
        get(path, "\"33\", \"\"", 200, tag);
        get(path, "3", 200, tag); /* not an entity tag */
        get(path, "\"3", 200, tag);
    }
}

static void a_newer_version_answers_200_to_the_old_tag(void **state)
{
    json_decref(th_svc_call(
        "POST", "/ledgers/c/transactions",
        "{\"digest\":\"t2\",\"writes\":[{\"object_id\":\"x\",\"version\":4,\"type\":\"T\","
        "\"data\":{\"v\":2}}],\"displays\":[{\"type\":\"T\",\"version\":6,\"data\":[2]}]}",
        201));
    get("/ledgers/c/objects/x", "\"3\"", 200, "\"4\"");
    get("/ledgers/c/objects/x", "\"4\"", 304, "\"4\"");
    get("/ledgers/c/displays/T", "\"5\"", 200, "\"6\"");
    get("/ledgers/c/displays/T", "W/\"6\"", 304, "\"6\"");
}

/* What does not exist is not matched by "*": the 404s stay. */
static void missing_and_deleted_objects_are_not_matched(void **state)
{
    json_decref(th_svc_call("POST", "/ledgers/c/transactions",
                            "{\"digest\":\"t3\",\"deletes\":[{\"object_id\":\"x\",\"version\":5}]}",
                            201));
    const char *const headers[] = {"If-None-Match: *", NULL};
    const char *const paths[] = {"/ledgers/c/objects/x", "/ledgers/c/objects/nope",
                                 "/ledgers/c/displays/nope"};
    const char *const codes[] = {"object_deleted", "object_not_found", "display_not_found"};
    for (int i = 0; i < 3; i++) {
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, "GET", paths[i], headers, NULL, 0, &r), 0);
        th_assert_problem(&r, 404, codes[i]);
        th_response_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matching_tags_answer_304_without_a_body),
        cmocka_unit_test(a_newer_version_answers_200_to_the_old_tag),
        cmocka_unit_test(missing_and_deleted_objects_are_not_matched),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
