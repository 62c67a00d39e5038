/* Unit tests of service/utf8.c: validation of UTF-8, the length of one character, and the
 * cleaning of untrusted bytes into well-formed UTF-8 cut at a character boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "service/utf8.h"

static void test_utf8(void **state)
{
    assert_true(svc_utf8_valid("plain", 5));
    assert_true(svc_utf8_valid("\xc3\xa9", 2));          /* é */
    assert_true(svc_utf8_valid("\xf0\x9f\x94\x91", 4));  /* U+1F511 */
    assert_false(svc_utf8_valid("\xc3", 1));             /* truncated */
    assert_false(svc_utf8_valid("\xc0\xaf", 2));         /* overlong '/' */
    assert_false(svc_utf8_valid("\xed\xa0\x80", 3));     /* surrogate */
    assert_false(svc_utf8_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
    assert_false(svc_utf8_valid("a\0b", 3));             /* NUL */
    assert_false(svc_utf8_valid("\x80", 1));             /* stray continuation */
}

static void test_utf8_char_len(void **state)
{
    assert_int_equal(svc_utf8_char_len("a", 1), 1);
    assert_int_equal(svc_utf8_char_len("\xc3\xa9x", 3), 2);
    assert_int_equal(svc_utf8_char_len("\xe2\x82\xac", 3), 3);
    assert_int_equal(svc_utf8_char_len("\xf0\x9f\x94\x91", 4), 4);
    assert_int_equal(svc_utf8_char_len("\xf0\x9f\x94\x91", 3), 0); /* truncated by avail */
    assert_int_equal(svc_utf8_char_len("\xc3", 1), 0);
    assert_int_equal(svc_utf8_char_len("\x80", 1), 0);
    assert_int_equal(svc_utf8_char_len("", 1), 0); /* NUL */
    assert_int_equal(svc_utf8_char_len("a", 0), 0);
}

static void test_utf8_clean(void **state)
{
    char out[16];
    int cut;
    /* invalid bytes become U+FFFD; valid text is copied as it is */
    assert_int_equal(svc_utf8_clean("a\xff"
                                    "b",
                                    3, out, 15, &cut),
                     5);
    assert_string_equal(out, "a\xef\xbf\xbd"
                             "b");
    assert_false(cut);
    /* an embedded NUL is not copied as one */
    assert_int_equal(svc_utf8_clean("a\0b", 3, out, 15, &cut), 5);
    assert_true(svc_utf8_valid(out, 5));
    /* a character that does not fit whole is left out, and the cut is reported */
    assert_int_equal(svc_utf8_clean("ab\xe2\x82\xac", 5, out, 4, &cut), 2);
    assert_string_equal(out, "ab");
    assert_true(cut);
    assert_int_equal(svc_utf8_clean("\xc3\xa9\xc3\xa9", 4, out, 3, &cut), 2);
    assert_string_equal(out, "\xc3\xa9");
    assert_true(cut);
    assert_int_equal(svc_utf8_clean("", 0, out, 0, NULL), 0);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_utf8_char_len),
        cmocka_unit_test(test_utf8_clean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
