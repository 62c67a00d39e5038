/* Unit tests of service/jpage.c: pages are valid JSON with the raw values spliced in, the
 * budget stops a page after the item that reaches it, and one oversized item still fits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "service/jpage.h"

static void test_page_splices_values(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "messages", 1 << 20);
    const char *names[] = {"value", "extra"};
    const char *raw[] = {"{\"a\":[1,2]}", NULL};
    size_t lens[] = {strlen(raw[0]), 0};
    assert_int_equal(svc_jpage_item(&p, json_pack("{s:I, s:s}", "offset", 7, "key", "k\xc3\xa9"), 2,
                                    names, raw, lens),
                     0);
    assert_int_equal(svc_jpage_item(&p, json_object(), 1, names, raw, lens), 0);
    assert_int_equal(svc_jpage_item(&p, json_pack("{s:i}", "n", 1), 0, NULL, NULL, NULL), 0);
    size_t len = 0;
    char *text = svc_jpage_finish(&p, json_pack("{s:I, s:n}", "next", 9, "more"), &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    json_t *doc = json_loads(text, 0, NULL);
    assert_non_null(doc);
    json_t *arr = json_object_get(doc, "messages");
    assert_int_equal(json_array_size(arr), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 0), "offset")), 7);
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "key")),
                        "k\xc3\xa9");
    assert_int_equal(
        json_integer_value(json_array_get(
            json_object_get(json_object_get(json_array_get(arr, 1), "value"), "a"), 1)),
        2);
    assert_true(json_is_null(json_object_get(json_array_get(arr, 0), "extra")));
    assert_int_equal(json_integer_value(json_object_get(doc, "next")), 9);
    assert_true(json_is_null(json_object_get(doc, "more")));
    json_decref(doc);
    free(text);
}

static void test_empty_page(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "keys", 10);
    size_t len = 0;
    char *text = svc_jpage_finish(&p, NULL, &len);
    assert_string_equal(text, "{\"keys\":[]}");
    free(text);
}

static void test_budget(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "v", 10);
    const char *names[] = {"value"};
    const char *big[] = {"\"0123456789abcdef\""};
    size_t lens[] = {strlen(big[0])};
    /* the first item always fits, even over the budget */
    assert_false(svc_jpage_full(&p, lens[0]));
    assert_int_equal(svc_jpage_item(&p, json_object(), 1, names, big, lens), 0);
    assert_true(svc_jpage_full(&p, 1));
    svc_jpage_free(&p);

    svc_jpage_begin(&p, "v", 10);
    const char *small[] = {"12345"};
    size_t slen[] = {5};
    assert_int_equal(svc_jpage_item(&p, json_object(), 1, names, small, slen), 0);
    assert_false(svc_jpage_full(&p, 5)); /* 10: at the budget, not past it */
    assert_int_equal(svc_jpage_item(&p, json_object(), 1, names, small, slen), 0);
    assert_true(svc_jpage_full(&p, 1));
    svc_jpage_free(&p);
}

static void test_not_an_object_fails(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "v", 10);
    assert_int_equal(svc_jpage_item(&p, json_integer(1), 0, NULL, NULL, NULL), -1);
    size_t len;
    assert_null(svc_jpage_finish(&p, NULL, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_splices_values),
        cmocka_unit_test(test_empty_page),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_not_an_object_fails),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
