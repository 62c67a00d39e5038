/* Unit tests of routes/json_util.c: RFC 7396 merge patch (the examples of its appendix A),
 * resource-name rules, key rules and RFC 3339 times. */
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
    assert_false(route_key_ok("\xff", why, sizeof(why)));
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
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_rfc3339),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
