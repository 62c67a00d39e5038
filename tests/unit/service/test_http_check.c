/* The range check of JSON numbers in service/http_check.c: the magnitude is read from the
 * digits and the exponent as written (never through a double, so 1e-400 is not 0), zero is
 * always in range, and only numbers outside strings count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "service/http_internal.h"

static int out(const char *text)
{
    size_t at = 0, n = 0;
    return svc_http_json_number_out_of_range(text, strlen(text), &at, &n);
}

static void range_edges(void **state)
{
    const char *in_range[] = {"0",
                              "-0",
                              "0.0e-999999",
                              "0e99999999999999999999",
                              "1e-24",
                              "-1E-24",
                              "0.1e-23",
                              "9.999e23",
                              "1e23",
                              "12.5",
                              "-9223372036854775808",
                              "999999999999999999999999",
                              "[1e23, {\"a\": [-1e-24]}]"};
    for (size_t i = 0; i < sizeof(in_range) / sizeof(in_range[0]); i++)
        if (out(in_range[i]))
            fail_msg("refused in range: %s", in_range[i]);
    const char *outside[] = {"1e24",
                             "-1E+24",
                             "10e23",
                             "1000000000000000000000000",
                             "1e-25",
                             "0.01e-23",
                             "1e308",
                             "1e-400",
                             "1e400",
                             "5e-324",
                             "1e99999999999999999999",
                             "1e-99999999999999999999",
                             "0.0000000000000000000000001"};
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++)
        if (!out(outside[i]))
            fail_msg("accepted out of range: %s", outside[i]);
}

static void position_and_strings(void **state)
{
    const char *text = "{\"1e999\": \"x\\\" 1e999\", \"n\": [1, 2.5, -1e30]}";
    size_t at = 0, n = 0;
    assert_int_equal(svc_http_json_number_out_of_range(text, strlen(text), &at, &n), 1);
    assert_int_equal(n, 5);
    assert_memory_equal(text + at, "-1e30", 5);
    const char *strings = "[\"1e999\", \"\\\\\", \"-1e-999\"]";
    assert_int_equal(svc_http_json_number_out_of_range(strings, strlen(strings), &at, &n), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(range_edges),
        cmocka_unit_test(position_and_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
