/* Unit tests of service/request_id.c: which client ids are echoed as given, the shape of a
 * generated id, and that taking an id keeps a valid one and replaces any other. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "service/request_id.h"

static void test_request_id_valid(void **state)
{
    char longest[SVC_REQUEST_ID_MAX + 2];
    memset(longest, 'a', SVC_REQUEST_ID_MAX);
    longest[SVC_REQUEST_ID_MAX] = '\0';
    assert_true(svc_request_id_valid("abc-123_X.y:z"));
    assert_true(svc_request_id_valid(longest));
    longest[SVC_REQUEST_ID_MAX] = 'a';
    longest[SVC_REQUEST_ID_MAX + 1] = '\0';
    assert_false(svc_request_id_valid(longest)); /* one byte too long */
    assert_false(svc_request_id_valid(""));
    assert_false(svc_request_id_valid("a b"));
    assert_false(svc_request_id_valid("a\"b"));
    assert_false(svc_request_id_valid("a\\b"));
    assert_false(svc_request_id_valid("a\tb"));
    assert_false(svc_request_id_valid("a\x7f"));
    assert_false(svc_request_id_valid("\xc3\xa9"));
}

static void test_request_id_generate(void **state)
{
    char a[SVC_REQUEST_ID_GENERATED + 1], b[SVC_REQUEST_ID_GENERATED + 1];
    svc_request_id_generate(a);
    svc_request_id_generate(b);
    assert_int_equal(strlen(a), SVC_REQUEST_ID_GENERATED);
    assert_int_equal(strspn(a, "0123456789abcdef"), SVC_REQUEST_ID_GENERATED);
    assert_true(svc_request_id_valid(a));
    assert_string_not_equal(a, b);
}

static void test_request_id_take(void **state)
{
    char out[SVC_REQUEST_ID_MAX + 1];
    svc_request_id_take(out, "client-id-7");
    assert_string_equal(out, "client-id-7");
    svc_request_id_take(out, "not valid");
    assert_int_equal(strlen(out), SVC_REQUEST_ID_GENERATED);
    svc_request_id_take(out, NULL);
    assert_int_equal(strlen(out), SVC_REQUEST_ID_GENERATED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_id_valid),
        cmocka_unit_test(test_request_id_generate),
        cmocka_unit_test(test_request_id_take),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
