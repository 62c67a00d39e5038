/* Numbers too large for a 64-bit integer survive a head's round trip: a head holding 1e19, -1e19
 * and 1.5e300 (written by PUT or by producing a message) reads back through GET
 * /topics/{t}/keys/{k}/head with those numbers, never as null, and a merge patch of that head
 * keeps every member it does not name. PostgreSQL's jsonb writes such numbers back as long runs
 * of digits (1e19 -> 10000000000000000000), which jansson refuses as an integer: a route that
 * re-parsed the stored text strictly answered "value":null, and PATCH merged onto null, storing
 * (and producing to the log) only the patch's members, silently losing acknowledged data.
 * Numbers are compared as doubles with the doubles the request was parsed into; a 64-bit integer
 * beside them (42, and 2^63 - 1, which a double cannot hold) stays that exact integer. */
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

#define BIG                                                                                        \
    "{\"n\":1e19,\"m\":-1e19,\"x\":1.5e300,\"keep\":\"me\",\"i\":42,"                              \
    "\"max\":9223372036854775807,\"deep\":[{\"n\":1e19}]}"

static int setup(void **state)
{
    (void)state;
    if (th_svc_start("topic_big_numbers", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    return 0;
}

static json_t *patch(const char *key, const char *header, const char *body, long want)
{
    char path[96];
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    return th_svc_call_flags("PATCH", path, "application/merge-patch+json", header, body, want, 0);
}

static json_t *get_head(const char *key)
{
    char path[96];
    snprintf(path, sizeof(path), "/topics/t/keys/%s/head", key);
    return th_svc_call_flags("GET", path, NULL, NULL, NULL, 200, 0);
}

static void assert_number(const json_t *v, const char *what, const char *name, double want)
{
    json_t *n = json_object_get(v, name);
    if (!json_is_number(n) || json_number_value(n) != want)
        fail_msg("%s: %s is %.17g, want %.17g", what, name,
                 json_is_number(n) ? json_number_value(n) : -1.0, want);
}

/* v (the value of a head, or of a message when loose: parsed with JSON_DECODE_INT_AS_REAL) holds
 * every member of BIG: the numbers equal as doubles, the integers exact unless loose. */
static void assert_big(const json_t *v, const char *what, int loose)
{
    if (!json_is_object(v))
        fail_msg("%s: the value is not the object written (type %d)", what,
                 v ? (int)json_typeof(v) : -1);
    assert_number(v, what, "n", 1e19);
    assert_number(v, what, "m", -1e19);
    assert_number(v, what, "x", 1.5e300);
    assert_number(v, what, "i", 42);
    assert_string_equal(json_string_value(json_object_get(v, "keep")), "me");
    json_t *deep = json_array_get(json_object_get(v, "deep"), 0);
    assert_number(deep, what, "n", 1e19);
    if (loose)
        return;
    json_t *i = json_object_get(v, "i"), *max = json_object_get(v, "max");
    if (!json_is_integer(i) || !json_is_integer(max) ||
        json_integer_value(max) != INT64_C(9223372036854775807))
        fail_msg("%s: i and max are no longer the integers written", what);
}

/* The value of the newest message of key in the log (read as PostgreSQL wrote it). */
static json_t *last_logged(const char *key)
{
    json_t *page = th_svc_call_flags("GET", "/topics/t/messages?after=0", NULL, NULL, NULL, 200,
                                     JSON_DECODE_INT_AS_REAL);
    json_t *msgs = json_object_get(page, "messages"), *value = NULL;
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        if (strcmp(json_string_value(json_object_get(m, "key")), key) == 0)
            value = json_object_get(m, "value");
    }
    json_incref(value);
    json_decref(page);
    return value;
}

/* A head written by PUT, and one produced through POST /topics/t/messages, read back whole. */
static void head_reads_back_its_numbers(void **state)
{
    (void)state;
    json_decref(th_svc_call_flags("PUT", "/topics/t/keys/put/head", NULL, NULL, BIG, 200, 0));
    json_decref(
        th_svc_call("POST", "/topics/t/messages", "{\"key\":\"posted\",\"value\":" BIG "}", 201));
    const char *keys[] = {"put", "posted"};
    for (size_t k = 0; k < 2; k++) {
        json_t *h = get_head(keys[k]);
        assert_big(json_object_get(h, "value"), keys[k], 0);
        json_decref(h);
        json_t *logged = last_logged(keys[k]);
        assert_big(logged, keys[k], 1);
        json_decref(logged);
    }
}

/* PATCH {"added":1} merges onto the stored head: every member stays, in the answer, in the head
 * and in the message it produced. */
static void patch_keeps_every_member(void **state)
{
    (void)state;
    json_decref(th_svc_call_flags("PUT", "/topics/t/keys/merge/head", NULL, NULL, BIG, 200, 0));
    json_t *p = patch("merge", NULL, "{\"added\":1}", 200);
    assert_true(json_is_true(json_object_get(p, "produced")));
    assert_big(json_object_get(p, "value"), "PATCH answer", 0);
    json_decref(p);
    const char *what[] = {"head after PATCH", "message of PATCH"};
    for (int i = 0; i < 2; i++) {
        json_t *h = i == 0 ? get_head("merge") : NULL;
        json_t *v = i == 0 ? json_incref(json_object_get(h, "value")) : last_logged("merge");
        assert_big(v, what[i], i == 1);
        assert_number(v, what[i], "added", 1);
        json_decref(v);
        json_decref(h);
    }
}

/* A patch that changes nothing produces nothing and answers the head as stored; a failed
 * If-Match answers 412 with the current head. Both read the stored value. */
static void unchanged_and_refused_patches_show_the_head(void **state)
{
    (void)state;
    json_decref(th_svc_call_flags("PUT", "/topics/t/keys/same/head", NULL, NULL, BIG, 200, 0));
    json_t *p = patch("same", NULL, "{\"keep\":\"me\"}", 200);
    assert_true(json_is_false(json_object_get(p, "produced")));
    assert_big(json_object_get(p, "value"), "unchanged PATCH", 0);
    json_decref(p);
    p = patch("same", "If-Match: \"999999\"", "{\"added\":1}", 412);
    assert_big(json_object_get(json_object_get(p, "current"), "value"), "412 current", 0);
    json_decref(p);
    json_t *h = get_head("same");
    assert_null(json_object_get(json_object_get(h, "value"), "added"));
    json_decref(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(head_reads_back_its_numbers),
        cmocka_unit_test(patch_keeps_every_member),
        cmocka_unit_test(unchanged_and_refused_patches_show_the_head),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
