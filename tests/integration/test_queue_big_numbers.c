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

#include "harness_svc.h"

#define BIG                                                                                        \
    "{\"pos\":1e19,\"neg\":-1e19,\"huge\":1.5e300,\"digits\":123456789012345678901234567890.0,"    \
    "\"tiny\":1e-300,\"deep\":[{\"n\":[1e19]}]}"
#define PLAIN                                                                                      \
    "{\"i\":9223372036854775807,\"m\":-9223372036854775808,\"r\":2.5,\"t\":[1,{\"u\":[null,"       \
    "true,\"s\"]}],\"e\":{}}"

static int64_t done_id, failed_id, plain_id;

/* An answer of status want to method path (body: JSON text, NULL for none), parsed with flags
 * (the caller's): the claim splices the payload as stored, which flags 0 cannot read. */
static json_t *call(const char *method, const char *path, const char *body, long want, size_t flags)
{
    static const char *const json_ct[] = {"Content-Type: application/json", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, method, path, body ? json_ct : NULL, body,
                             body ? strlen(body) : 0, &r),
                     0);
    if (r.status != want)
        fail_msg("%s %s: expected %ld, got %ld %s", method, path, want, r.status,
                 r.body ? r.body : "");
    json_error_t jerr;
    json_t *j = json_loadb(r.body, r.len, flags, &jerr);
    if (j == NULL)
        fail_msg("%s %s: not JSON (%s): %.300s", method, path, jerr.text, r.body);
    th_response_free(&r);
    return j;
}

/* Claims the next job as w1 and writes verb ("": the heartbeat) with member "name": value. */
static int64_t claim_and(const char *verb, const char *member, const char *value, int64_t *fence)
{
    json_t *c =
        call("POST", "/queues/q/leases", "{\"owner\":\"w1\"}", 200, JSON_DECODE_INT_AS_REAL);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    int64_t id = (int64_t)json_number_value(json_object_get(l, "job_id"));
    *fence = (int64_t)json_number_value(json_object_get(l, "fence"));
    json_decref(c);
    char path[96], body[512];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64 "%s", id, verb);
    snprintf(body, sizeof(body), "{\"owner\":\"w1\",\"fence\":%" PRId64 ",\"%s\":%s%s}", *fence,
             member, value, strcmp(verb, "/fail") == 0 ? ",\"retry\":false" : "");
    json_decref(call(verb[0] == '\0' ? "PATCH" : "POST", path, body, 200, 0));
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
    return call("GET", path, NULL, 200, flags);
}

/* Member name of a job holds the numbers of BIG, equal as doubles. */
static void assert_big(const json_t *job, const char *name)
{
    static const char *const keys[] = {"pos", "neg", "huge", "digits", "tiny"};
    const double want[] = {1e19, -1e19, 1.5e300, 123456789012345678901234567890.0, 1e-300};
    json_t *v = json_object_get(job, name);
    if (!json_is_object(v))
        fail_msg("%s is not the object written (type %d)", name, v ? (int)json_typeof(v) : -1);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        json_t *n = json_object_get(v, keys[i]);
        if (!json_is_number(n) || json_number_value(n) != want[i])
            fail_msg("%s.%s is %.17g, want %.17g", name, keys[i],
                     json_is_number(n) ? json_number_value(n) : -1.0, want[i]);
    }
    json_t *deep =
        json_array_get(json_object_get(json_array_get(json_object_get(v, "deep"), 0), "n"), 0);
    if (!json_is_number(deep) || json_number_value(deep) != 1e19)
        fail_msg("%s.deep[0].n[0] is not 1e19", name);
}

static void payload_progress_and_result_keep_their_numbers(void **state)
{
    (void)state;
    json_t *j = job(done_id, JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "succeeded");
    assert_big(j, "payload");
    assert_big(j, "progress");
    assert_big(j, "result");
    assert_int_equal(json_array_size(json_object_get(j, "history")), 1);
    json_decref(j);
}

static void last_error_keeps_its_numbers(void **state)
{
    (void)state;
    json_t *j = job(failed_id, JSON_DECODE_INT_AS_REAL);
    assert_string_equal(json_string_value(json_object_get(j, "state")), "failed");
    assert_big(j, "last_error");
    json_decref(j);
}

static void ordinary_values_come_back_equal(void **state)
{
    (void)state;
    json_t *j = job(plain_id, 0), *want = json_loads(PLAIN, 0, NULL);
    assert_true(json_equal(json_object_get(j, "payload"), want));
    assert_true(json_is_null(json_object_get(j, "progress")));
    assert_true(json_is_null(json_object_get(j, "result")));
    assert_true(json_is_null(json_object_get(j, "last_error")));
    json_decref(want);
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
