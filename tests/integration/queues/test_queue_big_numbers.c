/* Numbers too large for a 64-bit integer survive a job's round trip: a payload, a heartbeat's
 * progress, a complete's result and a fail's error holding 1e19, -1e19, 1.5e300, 1.2345...e29 or
 * 1e-300 read back through GET /queues/{queue}/jobs/{id} with those numbers, never as null (the
 * listing and the claim already showed them). PostgreSQL's jsonb writes them back as long runs of
 * digits (1e19 -> 10000000000000000000), which jansson refuses as an integer, so an answer that
 * re-parses the stored text loses them. The answers are parsed with JSON_DECODE_INT_AS_REAL and
 * each number compared as a double with the double the request was parsed into. Ordinary values
 * (64-bit integers, a deep tree) come back equal as JSON, integers still integers. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_numbers.h"

#define BIG   TH_BIG_NUMBERS
#define PLAIN TH_PLAIN_VALUES

static int64_t done_id, failed_id, plain_id;

/* Claims the next job as w1 and writes verb ("": the heartbeat) with member "name": value. */
static int64_t claim_and(const char *verb, const char *member, const char *value, int64_t *fence)
{
    json_t *c = th_svc_call_flags("POST", "/queues/q/leases", NULL, NULL, "{\"owner\":\"w1\"}", 200,
                                  JSON_DECODE_INT_AS_REAL);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    int64_t id = (int64_t)json_number_value(json_object_get(l, "job_id"));
    *fence = (int64_t)json_number_value(json_object_get(l, "fence"));
    json_decref(c);
    char path[96], body[512];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64 "%s", id, verb);
    snprintf(body, sizeof(body), "{\"owner\":\"w1\",\"fence\":%" PRId64 ",\"%s\":%s%s}", *fence,
             member, value, strcmp(verb, "/fail") == 0 ? ",\"retry\":false" : "");
    json_decref(
        th_svc_call_flags(verb[0] == '\0' ? "PATCH" : "POST", path, NULL, NULL, body, 200, 0));
    return id;
}

static int setup(void **state)
{
    (void)state;
    if (th_svc_start("queue_big_numbers", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/queues/q", "{}", 201));
    for (int i = 0; i < 2; i++)
        json_decref(th_svc_call("POST", "/queues/q/jobs", "{\"payload\":" BIG "}", 201));
    int64_t fence;
    done_id = claim_and("", "progress", BIG, &fence);
    char path[96], body[512];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64 "/complete", done_id);
    snprintf(body, sizeof(body), "{\"owner\":\"w1\",\"fence\":%" PRId64 ",\"result\":" BIG "}",
             fence);
    json_decref(th_svc_call("POST", path, body, 200));
    failed_id = claim_and("/fail", "error", BIG, &fence);
    json_t *p = th_svc_call("POST", "/queues/q/jobs", "{\"payload\":" PLAIN "}", 201);
    plain_id = json_integer_value(json_object_get(p, "id"));
    json_decref(p);
    return done_id > 0 && failed_id > 0 && plain_id > 0 ? 0 : -1;
}

/* GET /queues/q/jobs/{id} (200 asserted); its body parsed with flags (the caller's). */
static json_t *job(int64_t id, size_t flags)
{
    char path[64];
    snprintf(path, sizeof(path), "/queues/q/jobs/%" PRId64, id);
    return th_svc_call_flags("GET", path, NULL, NULL, NULL, 200, flags);
}

static void payload_progress_and_result_keep_their_numbers(void **state)
{
    (void)state;
    json_t *j = job(done_id, JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "succeeded");
    th_assert_big_numbers(json_object_get(j, "payload"), "payload");
    th_assert_big_numbers(json_object_get(j, "progress"), "progress");
    th_assert_big_numbers(json_object_get(j, "result"), "result");
    assert_int_equal(json_array_size(json_object_get(j, "history")), 1);
    json_decref(j);
}

static void last_error_keeps_its_numbers(void **state)
{
    (void)state;
    json_t *j = job(failed_id, JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "failed");
    th_assert_big_numbers(json_object_get(j, "last_error"), "last_error");
    json_decref(j);
}

static void ordinary_values_come_back_equal(void **state)
{
    (void)state;
    json_t *j = job(plain_id, 0);
    th_assert_plain_values(json_object_get(j, "payload"), "payload");
    assert_true(json_is_null(json_object_get(j, "progress")));
    assert_true(json_is_null(json_object_get(j, "result")));
    assert_true(json_is_null(json_object_get(j, "last_error")));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(payload_progress_and_result_keep_their_numbers),
        cmocka_unit_test(last_error_keeps_its_numbers),
        cmocka_unit_test(ordinary_values_come_back_equal),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
