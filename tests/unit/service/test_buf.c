/* Unit tests of service/buf.c: the maximum is enforced (a failing append leaves the buffer as it
 * was), growth past the first allocation, printf appends, JSON string escaping of quotes,
 * backslashes and control characters, and steal handing over the storage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "service/buf.h"

static void test_init_empty(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 100);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.max, 100);
    svc_buf_free(&b);
    svc_buf_free(NULL);
}

static void test_append_and_puts(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 100);
    assert_int_equal(svc_buf_append(&b, "abc", 3), 0);
    assert_int_equal(svc_buf_puts(&b, "def"), 0);
    assert_int_equal(svc_buf_append(&b, "xyz", 0), 0);
    assert_int_equal(b.len, 6);
    assert_string_equal(b.data, "abcdef");
    /* Bytes after an embedded NUL are kept. */
    assert_int_equal(svc_buf_append(&b, "g\0h", 3), 0);
    assert_int_equal(b.len, 9);
    assert_memory_equal(b.data, "abcdefg\0h", 10);
    svc_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
}

static void test_max_enforced(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 8);
    assert_int_equal(svc_buf_puts(&b, "12345"), 0);
    char *before = b.data;
    assert_false(svc_buf_failed(&b));
    /* 5 + 4 > 8: fails, nothing written, nothing truncated, and the failure is remembered (a
     * text built by appends that ignore their results, like /metrics, is not sent) */
    assert_int_equal(svc_buf_puts(&b, "6789"), -1);
    assert_true(svc_buf_failed(&b));
    assert_int_equal(svc_buf_printf(&b, "%s", "123456789"), -1);
    assert_int_equal(b.len, 5);
    assert_string_equal(b.data, "12345");
    assert_ptr_equal(b.data, before);
    /* Exactly reaching the maximum is allowed; one more byte is not. */
    assert_int_equal(svc_buf_puts(&b, "678"), 0);
    assert_int_equal(b.len, 8);
    assert_int_equal(svc_buf_append(&b, "9", 1), -1);
    assert_int_equal(svc_buf_append(&b, "", 0), 0);
    assert_string_equal(b.data, "12345678");
    /* Sizes that would overflow len + n are refused too. */
    assert_int_equal(svc_buf_append(&b, "x", SIZE_MAX), -1);
    assert_int_equal(b.len, 8);
    svc_buf_free(&b);

    svc_buf_init(&b, 0);
    assert_false(svc_buf_failed(&b));
    assert_int_equal(svc_buf_puts(&b, "a"), -1);
    assert_true(svc_buf_failed(&b));
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    svc_buf_free(&b);
}

static void test_growth(void **state)
{
    struct svc_buf b;
    char chunk[100];
    memset(chunk, 'x', sizeof(chunk));
    svc_buf_init(&b, 10000);
    for (int i = 0; i < 100; i++)
        assert_int_equal(svc_buf_append(&b, chunk, sizeof(chunk)), 0);
    assert_int_equal(b.len, 10000);
    assert_true(b.cap > b.len);
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(b.data[9999], 'x');
    assert_int_equal(svc_buf_append(&b, chunk, 1), -1);
    assert_int_equal(b.len, 10000);
    svc_buf_free(&b);
}

static void test_printf(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 32);
    assert_int_equal(svc_buf_printf(&b, "%s=%d", "n", 42), 0);
    assert_int_equal(svc_buf_printf(&b, "%s", ""), 0);
    assert_int_equal(svc_buf_printf(&b, ";%04x", 255u), 0);
    assert_string_equal(b.data, "n=42;00ff");
    assert_int_equal(b.len, 9);
    /* Over the maximum: fails whole, no partial output. */
    assert_int_equal(svc_buf_printf(&b, "%030d", 7), -1);
    assert_string_equal(b.data, "n=42;00ff");
    assert_int_equal(b.len, 9);
    /* Up to the maximum exactly. */
    assert_int_equal(svc_buf_printf(&b, "%023d", 7), 0);
    assert_int_equal(b.len, 32);
    assert_int_equal(b.data[32], '\0');
    svc_buf_free(&b);

    /* printf into an untouched buffer. */
    svc_buf_init(&b, 1000);
    assert_int_equal(svc_buf_printf(&b, "%s", ""), 0);
    assert_non_null(b.data);
    assert_string_equal(b.data, "");
    assert_int_equal(svc_buf_printf(&b, "%300s|", "r"), 0);
    assert_int_equal(b.len, 301);
    assert_int_equal(b.data[299], 'r');
    svc_buf_free(&b);
}

static void assert_json(const char *in, const char *want)
{
    struct svc_buf b;
    svc_buf_init(&b, 1000);
    assert_int_equal(svc_buf_puts(&b, "x:"), 0);
    assert_int_equal(svc_buf_json_string(&b, in), 0);
    if (strncmp(b.data, "x:", 2) != 0 || strcmp(b.data + 2, want) != 0)
        fail_msg("escaping gave %s, expected %s", b.data + 2, want);
    assert_int_equal(b.len, 2 + strlen(want));
    svc_buf_free(&b);
}

static void test_json_escaping(void **state)
{
    assert_json("", "\"\"");
    assert_json("plain text", "\"plain text\"");
    assert_json("say \"hi\"", "\"say \\\"hi\\\"\"");
    assert_json("C:\\dir\\", "\"C:\\\\dir\\\\\"");
    assert_json("a\nb\rc\td", "\"a\\nb\\rc\\td\"");
    assert_json("\x01\x1f", "\"\\u0001\\u001f\"");
    assert_json("\b\f", "\"\\u0008\\u000c\"");
    assert_json("\x1b[0m", "\"\\u001b[0m\"");
    /* DEL and non-ASCII bytes (UTF-8) pass through; '/' needs no escape. */
    assert_json("\x7f/caf\xc3\xa9", "\"\x7f/caf\xc3\xa9\"");
    /* bytes that are not UTF-8 (stray, truncated, overlong) become U+FFFD */
    assert_json("/nope\xff", "\"/nope\xef\xbf\xbd\"");
    assert_json("\xc3", "\"\xef\xbf\xbd\"");
    assert_json("\xc0\xaf\xf0\x9f\x94\x91", "\"\xef\xbf\xbd\xef\xbf\xbd\xf0\x9f\x94\x91\"");
}

static void test_json_escaping_over_max(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 10);
    assert_int_equal(svc_buf_puts(&b, "ab"), 0);
    /* "\"\\u0001\\u0001\"" is 14 bytes: does not fit; the buffer is left as it was. */
    assert_int_equal(svc_buf_json_string(&b, "\x01\x01"), -1);
    assert_int_equal(b.len, 2);
    assert_string_equal(b.data, "ab");
    assert_int_equal(svc_buf_json_string(&b, "123456"), 0);
    assert_string_equal(b.data, "ab\"123456\"");
    assert_int_equal(svc_buf_json_string(&b, ""), -1);
    assert_string_equal(b.data, "ab\"123456\"");
    svc_buf_free(&b);
}

static void test_steal(void **state)
{
    struct svc_buf b;
    size_t len = 99;
    svc_buf_init(&b, 100);
    assert_int_equal(svc_buf_puts(&b, "hello"), 0);
    char *s = svc_buf_steal(&b, &len);
    assert_non_null(s);
    assert_string_equal(s, "hello");
    assert_int_equal(len, 5);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 100);
    /* The buffer is reusable and independent of the stolen storage. */
    assert_int_equal(svc_buf_puts(&b, "again"), 0);
    assert_string_equal(s, "hello");
    free(s);
    s = svc_buf_steal(&b, NULL);
    assert_string_equal(s, "again");
    free(s);

    /* An empty buffer yields an allocated "". */
    len = 99;
    s = svc_buf_steal(&b, &len);
    assert_non_null(s);
    assert_string_equal(s, "");
    assert_int_equal(len, 0);
    free(s);
    svc_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_empty),
        cmocka_unit_test(test_append_and_puts),
        cmocka_unit_test(test_max_enforced),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_printf),
        cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_json_escaping_over_max),
        cmocka_unit_test(test_steal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
