/* Unit tests of service/jpage.c: pages and single objects are valid JSON with the stored texts
 * spliced in byte for byte (numbers jansson would refuse too), NULL texts as null, the budget
 * stops a page after the item that reaches it and one oversized item still fits; a splice past
 * its buffer's maximum fails and leaves the buffer as it was, never cut. */
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
    const char *value = "{\"a\":[1,2]}";
    const struct svc_jpage_raw raw[] = {{"value", value, strlen(value)}, {"extra", NULL, 0}};
    assert_int_equal(
        svc_jpage_item(&p, json_pack("{s:I, s:s}", "offset", 7, "key", "k\xc3\xa9"), raw, 2), 0);
    assert_int_equal(svc_jpage_item(&p, json_object(), raw, 1), 0);
    assert_int_equal(svc_jpage_item(&p, json_pack("{s:i}", "n", 1), NULL, 0), 0);
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
    const struct svc_jpage_raw big = {"value", "\"0123456789abcdef\"", 18};
    /* the first item always fits, even over the budget */
    assert_false(svc_jpage_full(&p, big.len));
    assert_int_equal(svc_jpage_item(&p, json_object(), &big, 1), 0);
    assert_true(svc_jpage_full(&p, 1));
    svc_jpage_free(&p);

    svc_jpage_begin(&p, "v", 10);
    const struct svc_jpage_raw small = {"value", "12345", 5};
    assert_int_equal(svc_jpage_item(&p, json_object(), &small, 1), 0);
    assert_false(svc_jpage_full(&p, 5)); /* 10: at the budget, not past it */
    assert_int_equal(svc_jpage_item(&p, json_object(), &small, 1), 0);
    assert_true(svc_jpage_full(&p, 1));
    svc_jpage_free(&p);
}

static void test_not_an_object_fails(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "v", 10);
    assert_int_equal(svc_jpage_item(&p, json_integer(1), NULL, 0), -1);
    size_t len;
    assert_null(svc_jpage_finish(&p, NULL, &len));
    assert_null(svc_jpage_object(json_integer(1), NULL, 0, &len));
    assert_null(svc_jpage_object(NULL, NULL, 0, &len));
}

/* One object: the envelope's members, then each stored text exactly as given (a number jsonb
 * writes in plain notation, which jansson refuses, comes out as it went in), NULL as null. */
static void test_object_splices_texts(void **state)
{
    const char *big = "{\"n\":10000000000000000000}";
    const struct svc_jpage_raw raw[] = {
        {"data", big, strlen(big)}, {"result", NULL, 0}, {"history", "[]", 2}};
    size_t len = 0;
    char *text =
        svc_jpage_object(json_pack("{s:s, s:I}", "object_id", "x", "version", 3), raw, 3, &len);
    assert_string_equal(text,
                        "{\"object_id\":\"x\",\"version\":3,\"data\":{\"n\":10000000000000000000},"
                        "\"result\":null,\"history\":[]}");
    assert_int_equal(len, strlen(text));
    free(text);
    /* an empty envelope: the first spliced member opens the object */
    text = svc_jpage_object(json_object(), raw + 1, 1, &len);
    assert_string_equal(text, "{\"result\":null}");
    free(text);
    text = svc_jpage_object(json_object(), NULL, 0, &len);
    assert_string_equal(text, "{}");
    free(text);
    /* len bytes of the text, not up to its NUL */
    const struct svc_jpage_raw part = {"v", "[1][2]", 3};
    text = svc_jpage_object(json_pack("{s:b}", "ok", 1), &part, 1, &len);
    assert_string_equal(text, "{\"ok\":true,\"v\":[1]}");
    free(text);
    /* a member name is written as given or not at all: one that is not UTF-8 fails */
    const struct svc_jpage_raw bad = {"\xff", "1", 1};
    assert_null(svc_jpage_object(json_object(), &bad, 1, &len));
}

/* A splice that would pass the buffer's maximum fails and leaves what the buffer held: the text
 * is never cut short. The same splice fits a buffer one byte larger. */
static void test_splice_past_the_maximum_fails_whole(void **state)
{
    const char *want = "x{\"id\":1,\"payload\":[1,2,3]}";
    const struct svc_jpage_raw raw = {"payload", "[1,2,3]", 7};
    struct svc_buf b;
    svc_buf_init(&b, strlen(want) - 1);
    assert_int_equal(svc_buf_puts(&b, "x"), 0);
    assert_int_equal(svc_jpage_splice(&b, json_pack("{s:i}", "id", 1), &raw, 1), -1);
    assert_int_equal(b.len, 1);
    assert_string_equal(b.data, "x");
    /* failing on the envelope itself leaves it too */
    svc_buf_free(&b);
    svc_buf_init(&b, 4);
    assert_int_equal(svc_buf_puts(&b, "x"), 0);
    assert_int_equal(svc_jpage_splice(&b, json_pack("{s:s}", "k", "long"), NULL, 0), -1);
    assert_string_equal(b.data, "x");
    svc_buf_free(&b);

    svc_buf_init(&b, strlen(want));
    assert_int_equal(svc_buf_puts(&b, "x"), 0);
    assert_int_equal(svc_jpage_splice(&b, json_pack("{s:i}", "id", 1), &raw, 1), 0);
    assert_string_equal(b.data, want);
    svc_buf_free(&b);
}

/* A page whose item fails is a failed page: finish answers NULL, never the items before it. */
static void test_failed_item_fails_the_page(void **state)
{
    struct svc_jpage p;
    svc_jpage_begin(&p, "jobs", 100);
    const struct svc_jpage_raw raw = {"payload", "1", 1};
    assert_int_equal(svc_jpage_item(&p, json_object(), &raw, 1), 0);
    assert_int_equal(svc_jpage_item(&p, NULL, &raw, 1), -1);
    assert_true(p.failed);
    assert_int_equal(svc_jpage_item(&p, json_object(), &raw, 1), -1);
    size_t len;
    assert_null(svc_jpage_finish(&p, json_pack("{s:i}", "next", 1), &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_splices_values),
        cmocka_unit_test(test_empty_page),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_not_an_object_fails),
        cmocka_unit_test(test_object_splices_texts),
        cmocka_unit_test(test_splice_past_the_maximum_fails_whole),
        cmocka_unit_test(test_failed_item_fails_the_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
