/* Unit tests of db/db.c's array literals, the one way db/ passes a batch as a parameter: every
 * text double-quoted with " and \ escaped (so { } , spaces and the word NULL need nothing more),
 * NULL entries as SQL NULL, the empty array, column arrays of a batch, and a literal that would
 * pass DB_PARAM_MAX refused whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"

static void expect_array(const char *const *vals, size_t n, const char *want)
{
    char *got = db_text_array(vals, n);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_empty_array(void **state)
{
    (void)state;
    expect_array(NULL, 0, "{}");
    const char *const one_empty[] = {""};
    expect_array(one_empty, 1, "{\"\"}");
}

static void test_null_and_the_word_null(void **state)
{
    (void)state;
    const char *const vals[] = {NULL, "NULL", "null", NULL};
    expect_array(vals, 4, "{NULL,\"NULL\",\"null\",NULL}");
}

static void test_quoting(void **state)
{
    (void)state;
    const char *const vals[] = {"a\"b", "back\\slash", "{brace}", "a,b", " sp ace ", "\\\"", "\n"};
    expect_array(vals, 7,
                 "{\"a\\\"b\",\"back\\\\slash\",\"{brace}\",\"a,b\",\" sp ace \",\"\\\\\\\"\","
                 "\"\n\"}");
    const char *const utf8[] = {"k\xc3\xa9", "\xe2\x82\xac"};
    expect_array(utf8, 2, "{\"k\xc3\xa9\",\"\xe2\x82\xac\"}");
}

struct row {
    const char *name;
    long long n;
    int has_n;
};

static const char *row_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct row *r = (const struct row *)items + i;
    if (col == 0)
        return r->name;
    if (!r->has_n)
        return NULL;
    snprintf(buf, size, "%lld", r->n);
    return buf;
}

static void test_column_arrays(void **state)
{
    (void)state;
    const struct row rows[] = {{"x,y", -9223372036854775807LL - 1, 1}, {NULL, 0, 0}, {"\"", 7, 1}};
    struct db_arrays a = {0, 0, NULL};
    assert_int_equal(db_arrays_build(&a, rows, 3, 2, row_column), 0);
    assert_string_equal(a.arr[0], "{\"x,y\",NULL,\"\\\"\"}");
    assert_string_equal(a.arr[1], "{\"-9223372036854775808\",NULL,\"7\"}");
    db_arrays_free(&a);
    assert_int_equal(db_arrays_build(&a, rows, 0, 2, row_column), 0);
    assert_string_equal(a.arr[0], "{}");
    assert_string_equal(a.arr[1], "{}");
    db_arrays_free(&a);
}

/* Nine texts of 64 MiB of quotes: each doubles when escaped, 1.1 GiB in all. Refused (before
 * any of it is allocated), never cut to fit. */
static void test_past_the_maximum_is_refused(void **state)
{
    (void)state;
    size_t n = (size_t)64 << 20;
    char *quotes = malloc(n + 1);
    assert_non_null(quotes);
    memset(quotes, '"', n);
    quotes[n] = '\0';
    const char *vals[9];
    for (int i = 0; i < 9; i++)
        vals[i] = quotes;
    assert_null(db_text_array(vals, 9));
    /* one of them is well within it */
    char *one = db_text_array(vals, 1);
    assert_non_null(one);
    assert_int_equal(strlen(one), 2 * n + 4);
    free(one);
    free(quotes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_array),
        cmocka_unit_test(test_null_and_the_word_null),
        cmocka_unit_test(test_quoting),
        cmocka_unit_test(test_column_arrays),
        cmocka_unit_test(test_past_the_maximum_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
