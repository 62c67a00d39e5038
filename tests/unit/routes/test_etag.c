/* Unit tests of routes/etag.c, the one parser of If-Match / If-None-Match field values: "*",
 * lists with spaces and empty elements, the strong comparison (a weak tag never matches) and
 * the weak one (it does), malformed values (nothing after the malformed part is read: a bare
 * number is malformed) and empty ones, and the tag of a version at the ends of
 * int64. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "routes/etag.h"

static int strong(const char *field)
{
    return route_etag_listed(field, "\"3\"", ROUTE_ETAG_STRONG);
}

static int weak(const char *field)
{
    return route_etag_listed(field, "\"3\"", ROUTE_ETAG_WEAK);
}

static void test_star_names_any(void **state)
{
    (void)state;
    assert_true(route_etag_any("*"));
    assert_true(route_etag_any(" \t* "));
    assert_false(route_etag_any("**"));
    assert_false(route_etag_any("\"*\""));
    assert_false(route_etag_any(NULL));
    assert_true(strong("*"));
    assert_true(weak(" * "));
    /* a "*" element names any, wherever it stands in the list (as rowlock always read it) */
    assert_true(strong("\"1\", *"));
    assert_true(weak("*, \"4\""));
    assert_false(weak("*x"));                 /* a token, not "*" */
    assert_false(route_etag_any("\"1\", *")); /* the value is not "*" alone */
}

static void test_lists_with_spaces(void **state)
{
    (void)state;
    assert_true(strong("\"3\""));
    assert_true(strong("  \"3\"\t"));
    assert_true(strong("\"1\", \"2\" ,\"3\""));
    assert_true(strong("\"3\",\"1\""));
    assert_true(weak("\"1\" ,\t\"3\" , \"5\""));
    /* empty elements are accepted (RFC 9110 5.6.1.2) */
    assert_true(strong(",, \"3\" ,"));
    assert_false(strong("\"33\", \"\""));
    assert_false(strong("\"1\", \"2\""));
    /* the whole opaque-tag, not a prefix or a part of it */
    assert_false(route_etag_listed("\"33\"", "\"3\"", ROUTE_ETAG_WEAK));
    assert_false(route_etag_listed("\"3\"", "\"33\"", ROUTE_ETAG_WEAK));
    assert_true(route_etag_listed("\"\xc3\xa9\"", "\"\xc3\xa9\"", ROUTE_ETAG_STRONG));
}

static void test_weak_tags(void **state)
{
    (void)state;
    /* If-Match compares strongly: a weak tag never matches, a strong one beside it still does */
    assert_false(strong("W/\"3\""));
    assert_false(strong("\"1\", W/\"3\""));
    assert_true(strong("W/\"3\", \"3\""));
    /* If-None-Match compares weakly */
    assert_true(weak("W/\"3\""));
    assert_true(weak("\"77\", W/\"78\",W/\"3\""));
    assert_false(weak("W/\"4\""));
}

static void test_nothing_after_a_malformed_part_is_read(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\"3",              /* unterminated */
        "\"",               /* a lone quote */
        "\"4\"\"3\"",       /* no comma between the tags */
        "\"4\" \"3\"",      /* nor here */
        "\"3\"x",           /* something after a tag */
        "\"a b\", \"3\"",   /* no space inside an opaque-tag */
        "\"a\x01\", \"3\"", /* nor a control character */
        "\"4\" ; \"3\"",    /* the separator is a comma */
        "W/ \"3\"",         /* a space inside a weak tag */
        "\"4\" x\"3\"",     /* a token ended by a quote */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (strong(bad[i]) || weak(bad[i]))
            fail_msg("malformed %s matched", bad[i]);
    }
    /* what came before it is read */
    assert_true(strong("\"3\", \"a b\""));
    assert_true(weak("W/\"3\", \"unterminated"));
    const char *p = "\"1\", \"x";
    struct route_etag t;
    assert_int_equal(route_etag_next(&p, &t), 1);
    assert_int_equal(route_etag_next(&p, &t), -1);
}

static void test_empty_values_name_nothing(void **state)
{
    (void)state;
    static const char *const empty[] = {"", "   ", ",", " , ,\t"};
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        assert_false(strong(empty[i]));
        assert_false(weak(empty[i]));
        const char *p = empty[i];
        struct route_etag t;
        assert_int_equal(route_etag_next(&p, &t), 0);
    }
    assert_false(strong(NULL));
    assert_false(weak(NULL));
    /* what the caller holds must itself be a strong tag */
    assert_false(route_etag_listed("\"3\"", "3", ROUTE_ETAG_WEAK));
    assert_false(route_etag_listed("*", "", ROUTE_ETAG_WEAK));
}

static void test_next_reads_each_tag(void **state)
{
    (void)state;
    const char *p = " W/\"a\" ,, \"\" , \"x\xc3\xa9\" ";
    struct route_etag t;
    assert_int_equal(route_etag_next(&p, &t), 1);
    assert_true(t.weak);
    assert_int_equal(t.len, 1);
    assert_memory_equal(t.opaque, "a", 1);
    assert_int_equal(route_etag_next(&p, &t), 1);
    assert_false(t.weak);
    assert_int_equal(t.len, 0);
    assert_int_equal(route_etag_next(&p, &t), 1);
    assert_int_equal(t.len, 3);
    assert_memory_equal(t.opaque, "x\xc3\xa9", 3);
    assert_int_equal(route_etag_next(&p, &t), 0);
    assert_int_equal(route_etag_next(&p, &t), 0);
}

static void test_tag_of_a_version(void **state)
{
    (void)state;
    char b[ROUTE_ETAG_SIZE];
    assert_string_equal(route_etag_of(42, b), "\"42\"");
    assert_string_equal(route_etag_of(INT64_MAX, b), "\"9223372036854775807\"");
    assert_string_equal(route_etag_of(INT64_MIN, b), "\"-9223372036854775808\"");
    assert_true(route_etag_names("\"1\", \"9223372036854775807\"", INT64_MAX, ROUTE_ETAG_STRONG));
    assert_true(route_etag_names("W/\"7\"", 7, ROUTE_ETAG_WEAK));
    assert_false(route_etag_names("W/\"7\"", 7, ROUTE_ETAG_STRONG));
    assert_false(route_etag_names("\"7\"", 70, ROUTE_ETAG_WEAK));
    assert_false(route_etag_names("7", 7, ROUTE_ETAG_WEAK));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_star_names_any),
        cmocka_unit_test(test_lists_with_spaces),
        cmocka_unit_test(test_weak_tags),
        cmocka_unit_test(test_nothing_after_a_malformed_part_is_read),
        cmocka_unit_test(test_empty_values_name_nothing),
        cmocka_unit_test(test_next_reads_each_tag),
        cmocka_unit_test(test_tag_of_a_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
