/* The checks of JSON numbers in service/http_check.c: the range is read from the digits and
 * the exponent as written (never through a double, so 1e-400 is not 0), zero is in range
 * whatever its exponent within PostgreSQL's, only numbers outside strings count, and a body's
 * numbers may grow, written out in full, by at most its length plus a slack. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "service/http_internal.h"

static enum svc_json_numbers check(const char *text, size_t *grow)
{
    size_t at = 0, n = 0, g = 0;
    enum svc_json_numbers v = svc_http_json_numbers(text, strlen(text), &at, &n, &g);
    if (grow != NULL)
        *grow = g;
    return v;
}

static void range_edges(void **state)
{
    (void)state;
    const char *in_range[] = {"0",
                              "-0",
                              "0.0e-999",
                              "0e1000",
                              "1e-307",
                              "-1E-307",
                              "9.99e307",
                              "1.5e300",
                              "1e-300",
                              "12.5",
                              "-9223372036854775808",
                              "[1e23, {\"a\": [-1e-24]}]"};
    for (size_t i = 0; i < sizeof(in_range) / sizeof(in_range[0]); i++)
        if (check(in_range[i], NULL) != SVC_JSON_NUMBERS_OK)
            fail_msg("refused in range: %s", in_range[i]);
    const char *outside[] = {"1e308",
                             "-1E+308",
                             "10e307",
                             "1e-308",
                             "0.01e-306",
                             "1e-400",
                             "1e400",
                             "5e-324",
                             "0e1001",
                             "0.0e-1001",
                             "1e99999999999999999999",
                             "1e-99999999999999999999"};
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
        if (check(outside[i], NULL) != SVC_JSON_NUMBER_RANGE)
            fail_msg("accepted out of range: %s", outside[i]);
}

/* How much longer a number is written out: 1.5e300 is 301 digits, 1e-300 is "0.", 299 zeros
 * and a 1; plain numbers do not grow. */
static void growth(void **state)
{
    (void)state;
    size_t grow;
    assert_int_equal(check("[1, -2.50, 123456789012345678901234567890.0]", &grow),
                     SVC_JSON_NUMBERS_OK);
    assert_int_equal(grow, 0);
    assert_int_equal(check("1.5e300", &grow), SVC_JSON_NUMBERS_OK);
    assert_int_equal(grow, 301 - 7);
    assert_int_equal(check("-1e-300", &grow), SVC_JSON_NUMBERS_OK);
    assert_int_equal(grow, 303 - 7);
    /* 20 of 1e300: 6,000 bytes more, past 4,096 and the body's own length */
    char body[256] = "[";
    for (int i = 0; i < 20; i++)
        strcat(body, i ? ",1e300" : "1e300");
    strcat(body, "]");
    assert_int_equal(check(body, &grow), SVC_JSON_NUMBERS_EXPAND);
    assert_int_equal(grow, 20 * (301 - 5));
}

static void position_and_strings(void **state)
{
    (void)state;
    const char *text = "{\"1e999\": \"x\\\" 1e999\", \"n\": [1, 2.5, -1e330]}";
    size_t at = 0, n = 0, grow = 0;
    assert_int_equal(svc_http_json_numbers(text, strlen(text), &at, &n, &grow),
                     SVC_JSON_NUMBER_RANGE);
    assert_int_equal(n, 6);
    assert_memory_equal(text + at, "-1e330", 6);
    const char *strings = "[\"1e999\", \"\\\\\", \"-1e-999\"]";
    assert_int_equal(svc_http_json_numbers(strings, strlen(strings), &at, &n, &grow),
                     SVC_JSON_NUMBERS_OK);
    assert_int_equal(grow, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(range_edges),
        cmocka_unit_test(growth),
        cmocka_unit_test(position_and_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
