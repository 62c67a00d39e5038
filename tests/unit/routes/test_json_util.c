/* Unit tests of routes/json_util.c: RFC 7396 merge patch (the examples of its appendix A),
 * reading back stored JSON, resource-name rules, key rules (with the caller's bound too) and
 * RFC 3339 times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "routes/json_util.h"

static void check_merge(const char *target, const char *patch, const char *want)
{
    json_t *t = json_loads(target, JSON_DECODE_ANY, NULL);
    json_t *p = json_loads(patch, JSON_DECODE_ANY, NULL);
    json_t *w = json_loads(want, JSON_DECODE_ANY, NULL);
    assert_non_null(t);
    assert_non_null(p);
    assert_non_null(w);
    json_t *got = route_merge_patch(t, p);
    if (!json_equal(got, w)) {
        char *g = json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT);
        fail_msg("merge(%s, %s) = %s, want %s", target, patch, g, want);
    }
    /* the target is not modified */
    json_t *t2 = json_loads(target, JSON_DECODE_ANY, NULL);
    assert_true(json_equal(t, t2));
    json_decref(t2);
    json_decref(got);
    json_decref(t);
    json_decref(p);
    json_decref(w);
}

static void test_rfc7396_appendix_a(void **state)
{
    check_merge("{\"a\":\"b\"}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    check_merge("{\"a\":\"b\"}", "{\"b\":\"c\"}", "{\"a\":\"b\",\"b\":\"c\"}");
    check_merge("{\"a\":\"b\"}", "{\"a\":null}", "{}");
    check_merge("{\"a\":\"b\",\"b\":\"c\"}", "{\"a\":null}", "{\"b\":\"c\"}");
    check_merge("{\"a\":[\"b\"]}", "{\"a\":\"c\"}", "{\"a\":\"c\"}");
    check_merge("{\"a\":\"c\"}", "{\"a\":[\"b\"]}", "{\"a\":[\"b\"]}");
    check_merge("{\"a\":{\"b\":\"c\"}}", "{\"a\":{\"b\":\"d\",\"c\":null}}",
                "{\"a\":{\"b\":\"d\"}}");
    check_merge("{\"a\":[{\"b\":\"c\"}]}", "{\"a\":[1]}", "{\"a\":[1]}");
    check_merge("[\"a\",\"b\"]", "[\"c\",\"d\"]", "[\"c\",\"d\"]");
    check_merge("{\"a\":\"b\"}", "[\"c\"]", "[\"c\"]");
    check_merge("{\"a\":\"foo\"}", "null", "null");
    check_merge("{\"a\":\"foo\"}", "\"bar\"", "\"bar\"");
    check_merge("{\"e\":null}", "{\"a\":1}", "{\"e\":null,\"a\":1}");
    check_merge("[1,2]", "{\"a\":\"b\",\"c\":null}", "{\"a\":\"b\"}");
    check_merge("{}", "{\"a\":{\"bb\":{\"ccc\":null}}}", "{\"a\":{\"bb\":{}}}");
}

static void test_merge_onto_absent_target(void **state)
{
    json_t *p = json_loads("{\"x\":{\"y\":1},\"z\":null}", 0, NULL);
    json_t *got = route_merge_patch(NULL, p);
    json_t *want = json_loads("{\"x\":{\"y\":1}}", 0, NULL);
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
    json_decref(p);
}

/* route_json_stored of text (its whole length) is a real equal to want. */
static void check_stored_real(const char *text, double want)
{
    json_t *j = route_json_stored(text, strlen(text));
    if (!json_is_real(j) || json_real_value(j) != want)
        fail_msg("%.40s... read as %s %.17g, want the real %.17g", text,
                 json_is_real(j) ? "real" : "not a real", json_number_value(j), want);
    json_decref(j);
}

/* The numbers jsonb writes back for doubles a client sent as 1e19, -1e19 and 1.5e300 (plain
 * notation: 1.5e300 is 15 and 299 zeros) read back as those doubles, as does 2^63. */
static void test_stored_big_numbers(void **state)
{
    check_stored_real("10000000000000000000", 1e19);
    check_stored_real("-10000000000000000000", -1e19);
    check_stored_real("9223372036854775808", 9223372036854775808.0);
    check_stored_real("-9223372036854775809", -9223372036854775808.0);
    char huge[320] = "15";
    memset(huge + 2, '0', 299);
    huge[301] = '\0';
    check_stored_real(huge, 1.5e300);
}

/* In a tree holding such a number, every other value is read as a strict parse reads it: the
 * int64 limits and 2^53 + 1 stay those exact integers, 3.0 a real, strings (digits and escaped
 * quotes in them) unchanged. */
static void test_stored_nested(void **state)
{
    const char *text = "{\"a\": [{\"b\": [10000000000000000000, 1]}], \"i\": 9007199254740993, "
                       "\"max\": 9223372036854775807, \"min\": -9223372036854775808, \"r\": 3.0, "
                       "\"s\": \"10000000000000000000 \\\"99999999999999999999\\\"\"}";
    json_t *j = route_json_stored(text, strlen(text));
    assert_non_null(j);
    json_t *b = json_object_get(json_array_get(json_object_get(j, "a"), 0), "b");
    assert_true(json_is_real(json_array_get(b, 0)));
    assert_true(json_real_value(json_array_get(b, 0)) == 1e19);
    assert_true(json_is_integer(json_array_get(b, 1)));
    assert_int_equal(json_integer_value(json_array_get(b, 1)), 1);
    assert_true(json_is_integer(json_object_get(j, "i")));
    assert_true(json_integer_value(json_object_get(j, "i")) == INT64_C(9007199254740993));
    assert_true(json_integer_value(json_object_get(j, "max")) == INT64_MAX);
    assert_true(json_integer_value(json_object_get(j, "min")) == INT64_MIN);
    assert_true(json_is_real(json_object_get(j, "r")));
    assert_string_equal(json_string_value(json_object_get(j, "s")),
                        "10000000000000000000 \"99999999999999999999\"");
    json_decref(j);
}

/* Text a strict parse reads comes back as it reads it (ints stay ints), within len bytes. */
static void test_stored_ordinary(void **state)
{
    const char *text = "{\"i\":42,\"r\":2.5,\"t\":[true,null,\"x\"]}trailing";
    json_t *j = route_json_stored(text, strlen(text) - strlen("trailing"));
    json_t *want = json_loads("{\"i\":42,\"r\":2.5,\"t\":[true,null,\"x\"]}", 0, NULL);
    assert_true(json_equal(j, want));
    assert_true(json_is_integer(json_object_get(j, "i")));
    json_decref(j);
    json_decref(want);
    j = route_json_stored("-9223372036854775808", 20);
    assert_true(json_is_integer(j) && json_integer_value(j) == INT64_MIN);
    json_decref(j);
}

/* Text that is not JSON, with or without a number to widen, gives NULL (never null), and a cut
 * string or escape is not read past its end. */
static void test_stored_garbage(void **state)
{
    const char *bad[] = {"",
                         "nope",
                         "{\"n\":",
                         "{\"n\":10000000000000000000",
                         "10000000000000000000 x",
                         "[10000000000000000000,]",
                         "--10000000000000000000",
                         "10000000000000000000e",
                         "\"abc\\",
                         "[10000000000000000000, \"abc\\",
                         NULL};
    for (size_t i = 0; bad[i]; i++) {
        json_t *j = route_json_stored(bad[i], strlen(bad[i]));
        if (j != NULL)
            fail_msg("%s read as JSON", bad[i]);
    }
}

static void test_names(void **state)
{
    char why[160];
    const char *good[] = {"a", "orders", "Orders.v2", "a_b-c.d", "0", NULL};
    for (size_t i = 0; good[i]; i++)
        if (!route_name_ok(good[i], why, sizeof(why)))
            fail_msg("%s rejected: %s", good[i], why);
    const char *bad[] = {"", ".a", "-a", "_a", "a b", "a/b", "a%b", "é", NULL};
    for (size_t i = 0; bad[i]; i++) {
        why[0] = '\0';
        if (route_name_ok(bad[i], why, sizeof(why)))
            fail_msg("\"%s\" accepted", bad[i]);
        assert_true(strlen(why) > 0);
    }
    char longest[130];
    memset(longest, 'a', 128);
    longest[128] = '\0';
    assert_true(route_name_ok(longest, why, sizeof(why)));
    longest[128] = 'a';
    longest[129] = '\0';
    assert_false(route_name_ok(longest, why, sizeof(why)));
    assert_non_null(strstr(why, "129"));
}

static void test_keys(void **state)
{
    char why[160];
    assert_true(route_key_ok("user/42 with spaces", why, sizeof(why)));
    assert_true(route_key_ok("ключ-🔑", why, sizeof(why)));
    assert_false(route_key_ok("", why, sizeof(why)));
    char big[1026];
    memset(big, 'k', 1024);
    big[1024] = '\0';
    assert_true(route_key_ok(big, why, sizeof(why)));
    big[1024] = 'k';
    big[1025] = '\0';
    assert_false(route_key_ok(big, why, sizeof(why)));
    assert_string_equal(why, "a key has at most 1024 bytes; this one has 1025");
    assert_false(route_key_ok("\xff", why, sizeof(why)));
    assert_string_equal(why, "a key is valid UTF-8");
}

/* The key rule with the caller's bound and length: a NUL inside the length is refused. */
static void test_text(void **state)
{
    char why[160];
    assert_true(route_text_ok("ab", 2, 2, "ref", why, sizeof(why)));
    assert_false(route_text_ok("abc", 3, 2, "ref", why, sizeof(why)));
    assert_string_equal(why, "a ref has at most 2 bytes; this one has 3");
    assert_false(route_text_ok("a\0b", 3, 8, "ref", why, sizeof(why)));
    assert_string_equal(why, "a ref is valid UTF-8");
    assert_false(route_text_ok("", 0, 8, "ref", why, sizeof(why)));
    assert_string_equal(why, "a ref is not empty");
}

static void test_rfc3339(void **state)
{
    const char *good[] = {"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456+01:00",
                          "2026-12-31t23:59:60z", "2026-01-02 03:04:05-05:30", NULL};
    for (size_t i = 0; good[i]; i++)
        if (!route_rfc3339_ok(good[i]))
            fail_msg("%s rejected", good[i]);
    const char *bad[] = {"infinity",
                         "-infinity",
                         "now",
                         "tomorrow",
                         "2025-01-01",
                         "2025-01-01T00:00:00",
                         "2025-13-01T00:00:00Z",
                         "2025-01-01T24:00:00Z",
                         "2025-01-01T00:00:00.Z",
                         "2025-01-01T00:00:00+1:00",
                         "Jan 5 2025",
                         "2025-01-01T00:00:00Zjunk",
                         NULL};
    for (size_t i = 0; bad[i]; i++)
        if (route_rfc3339_ok(bad[i]))
            fail_msg("%s accepted", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rfc7396_appendix_a),
        cmocka_unit_test(test_merge_onto_absent_target),
        cmocka_unit_test(test_stored_big_numbers),
        cmocka_unit_test(test_stored_nested),
        cmocka_unit_test(test_stored_ordinary),
        cmocka_unit_test(test_stored_garbage),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_rfc3339),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
