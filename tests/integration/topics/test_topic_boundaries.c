/* Every numeric input of the topic routes at and past its documented range (th_bounds_check: 0,
 * -1, the maximum, the maximum + 1, 2^63, 1e400, 1.5, "1", true, null): each answer is a 2xx or a
 * 400 with the input's problem code, never a 5xx or no answer, and the topic still answers
 * afterwards. Then the extremes that are accepted are used: a head of rank 2^63-1 and of rank
 * -2^63, the largest producer sequence (and its retry), a read after the last offset there can
 * be. */
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

#define INT32_MAX_ 2147483647LL
#define I64_MAX    9223372036854775807LL

static const char alive[] = "/topics/b";

static const struct th_bound bounds[] = {
    {"PUT", "/topics/b", "{\"headless_ttl_seconds\":@V@}", NULL, INT32_MAX_, "invalid_config",
     alive},
    {"PUT", "/topics/b", "{\"retention_seconds\":@V@}", NULL, INT32_MAX_, "invalid_config", alive},
    {"PUT", "/topics/b", "{\"default_schema_version\":@V@}", NULL, INT32_MAX_, "invalid_config",
     alive},
    {"PUT", "/topics/b/producers/p", "{\"schema_version\":@V@}", NULL, INT32_MAX_, "invalid_config",
     alive},
    {"POST", "/topics/b/messages", "{\"key\":\"r\",\"value\":1,\"rank\":@V@}", NULL, I64_MAX,
     "invalid_message", alive},
    {"POST", "/topics/b/messages",
     "{\"producer\":\"p\",\"messages\":[{\"key\":\"s\",\"value\":1,\"sequence\":@V@}]}", NULL,
     I64_MAX, "invalid_message", alive},
    {"GET", "/topics?limit={V}", NULL, NULL, 1000, "invalid_parameter", alive},
    {"GET", "/topics/b/messages?after={V}", NULL, NULL, I64_MAX - 1, "invalid_parameter", alive},
    {"GET", "/topics/b/messages?limit={V}", NULL, NULL, 1000, "invalid_parameter", alive},
    {"GET", "/topics/b/messages?wait={V}", NULL, NULL, 1, "invalid_parameter", alive},
    {"GET", "/topics/b/keys?limit={V}", NULL, NULL, 1000, "invalid_parameter", alive},
};

static void every_numeric_input_is_bounded(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        int bad = th_bounds_check(th_svc.port, &bounds[i], 1);
        if (bad != 0)
            fail_msg("%s %s %s: %d violations", bounds[i].method, bounds[i].path,
                     bounds[i].body ? bounds[i].body : "", bad);
    }
}

/* Past the top of each range: refused with the input's code (th_bounds_check would also take a
 * 2xx). after = 2^63-1 would make the first offset read 2^63. */
static void past_the_maximum_is_refused(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "/topics/b/messages?after=9223372036854775807", "/topics/b/messages?limit=1001",
        "/topics/b/keys?limit=1001", "/topics?limit=1001", "/topics/b/messages?wait=2"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, "GET", paths[i], NULL, NULL, 0, &r), 0);
        th_assert_problem(&r, 400, "invalid_parameter");
        th_response_free(&r);
    }
}

static void the_extremes_work(void **state)
{
    (void)state;
    json_t *j = th_svc_call("POST", "/topics/b/messages",
                            "{\"key\":\"hi\",\"value\":1,\"rank\":9223372036854775807}", 201);
    json_decref(j);
    j = th_svc_call("POST", "/topics/b/messages", "{\"key\":\"hi\",\"value\":2}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "head")), "rank_rejected");
    json_decref(j);
    j = th_svc_call("POST", "/topics/b/messages",
                    "{\"key\":\"lo\",\"value\":1,\"rank\":-9223372036854775808}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "head")), "advanced");
    json_decref(j);
    j = th_svc_call(
        "POST", "/topics/b/messages",
        "{\"producer\":\"q\",\"key\":\"s\",\"value\":1,\"sequence\":9223372036854775807}", 201);
    json_decref(j);
    j = th_svc_call(
        "POST", "/topics/b/messages",
        "{\"producer\":\"q\",\"key\":\"s\",\"value\":1,\"sequence\":9223372036854775807}", 200);
    assert_string_equal(json_string_value(json_object_get(j, "head")), "duplicate");
    json_decref(j);
    j = th_svc_get("/topics/b/keys/hi/head");
    assert_int_equal(json_integer_value(json_object_get(j, "rank")), I64_MAX);
    json_decref(j);
    j = th_svc_get("/topics/b/messages?after=9223372036854775806&limit=1000");
    assert_int_equal(json_array_size(json_object_get(j, "messages")), 0);
    assert_int_equal(json_integer_value(json_object_get(j, "next")), I64_MAX - 1);
    json_decref(j);
}

static int setup(void **state)
{
    (void)state;
    const char *env[] = {"ROWLOCK_MAX_WAIT_S=1", NULL};
    if (th_svc_start("topic_boundaries", env) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/b", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/b/producers/p", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/b/producers/q", "{}", 201));
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_numeric_input_is_bounded),
        cmocka_unit_test(past_the_maximum_is_refused),
        cmocka_unit_test(the_extremes_work),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
