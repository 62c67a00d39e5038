/* Unit tests of service/listen.c's reach: which listen addresses only loopback clients reach
 * (127.0.0.0/8, ::1, IPv4-mapped loopback), which reach every interface (0.0.0.0, ::), and
 * which one interface (any other address), and their words in the "listening" log line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "service/listen.h"

static void test_loopback(void **state)
{
    static const char *const loopback[] = {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"};
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        assert_int_equal(svc_listen_reach(loopback[i]), SVC_REACH_LOOPBACK);
}

static void test_all_interfaces(void **state)
{
    assert_int_equal(svc_listen_reach("0.0.0.0"), SVC_REACH_ALL);
    assert_int_equal(svc_listen_reach("::"), SVC_REACH_ALL);
}

static void test_one_interface(void **state)
{
    static const char *const one[] = {"10.1.2.3", "128.0.0.1",   "192.168.0.1",
                                      "fe80::1",  "2001:db8::1", "::ffff:10.0.0.1"};
    for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
        assert_int_equal(svc_listen_reach(one[i]), SVC_REACH_INTERFACE);
}

static void test_names(void **state)
{
    assert_string_equal(svc_listen_reach_name(SVC_REACH_LOOPBACK), "loopback only");
    assert_string_equal(svc_listen_reach_name(SVC_REACH_ALL), "all interfaces");
    assert_string_equal(svc_listen_reach_name(SVC_REACH_INTERFACE), "one interface");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_all_interfaces),
        cmocka_unit_test(test_one_interface),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
