/* Unit tests of service/limits.c with the clock passed in: a bucket that starts full, refills at
 * its rate and tells how long to wait; a lower burst applying at once; names kept apart; the
 * long-poll places taken and given back; the refusals rendered per name and reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "service/limits.h"

static void test_bucket_starts_full_and_refills(void **state)
{
    struct svc_limits *l = svc_limits_new();
    struct svc_limit lim = {.rate = 2, .burst = 2};
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.0), 0);
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.0), 0);
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.0), 1); /* half a second, rounded up */
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.4), 1);
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.5), 0); /* one refilled */
    assert_int_equal(svc_limits_take(l, "a", &lim, 100.5), 1);
    /* a long pause refills up to the burst, no more */
    for (int i = 0; i < 2; i++)
        assert_int_equal(svc_limits_take(l, "a", &lim, 200.0), 0);
    assert_int_equal(svc_limits_take(l, "a", &lim, 200.0), 1);
    /* another name has a bucket of its own */
    assert_int_equal(svc_limits_take(l, "b", &lim, 200.0), 0);
    svc_limits_free(l);
}

static void test_lower_burst_applies_at_once(void **state)
{
    struct svc_limits *l = svc_limits_new();
    struct svc_limit wide = {.rate = 1, .burst = 50}, narrow = {.rate = 1, .burst = 1};
    assert_int_equal(svc_limits_take(l, "a", &wide, 10.0), 0);
    assert_int_equal(svc_limits_take(l, "a", &narrow, 10.0), 0);
    assert_int_equal(svc_limits_take(l, "a", &narrow, 10.0), 1);
    svc_limits_free(l);
}

static void test_long_poll_places(void **state)
{
    struct svc_limits *l = svc_limits_new();
    struct svc_limit lim = {.burst = 1, .long_polls = 1};
    struct svc_limit_entry *first = NULL, *second = NULL;
    assert_int_equal(svc_limits_poll_take(l, "w", &lim, &first), 0);
    assert_non_null(first);
    assert_int_equal(svc_limits_poll_take(l, "w", &lim, &second), 1);
    assert_null(second);
    assert_int_equal(svc_limits_poll_take(l, "v", &lim, &second), 0); /* another name */
    svc_limits_poll_give_back(second);
    svc_limits_poll_give_back(first);
    svc_limits_poll_give_back(NULL);
    assert_int_equal(svc_limits_poll_take(l, "w", &lim, &first), 0);
    svc_limits_poll_give_back(first);
    svc_limits_free(l);
}

static void test_render(void **state)
{
    struct svc_limits *l = svc_limits_new();
    struct svc_limit lim = {.rate = 1, .burst = 1, .long_polls = 1};
    struct svc_limit_entry *held = NULL, *refused = NULL;
    svc_limits_take(l, "deployer", &lim, 1.0);
    svc_limits_take(l, "deployer", &lim, 1.0);
    svc_limits_take(l, "deployer", &lim, 1.0);
    svc_limits_poll_take(l, "deployer", &lim, &held);
    svc_limits_poll_take(l, "deployer", &lim, &refused);
    struct svc_buf b;
    svc_buf_init(&b, 4096);
    assert_int_equal(svc_limits_render(l, &b), 0);
    assert_non_null(strstr(b.data, "# TYPE rowlock_http_limited_total counter\n"));
    assert_non_null(
        strstr(b.data, "rowlock_http_limited_total{token=\"deployer\",reason=\"rate\"} 2\n"));
    assert_non_null(
        strstr(b.data, "rowlock_http_limited_total{token=\"deployer\",reason=\"long_polls\"} 1\n"));
    svc_buf_free(&b);
    svc_limits_poll_give_back(held);
    svc_limits_free(l);
    svc_limits_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_starts_full_and_refills),
        cmocka_unit_test(test_lower_burst_applies_at_once),
        cmocka_unit_test(test_long_poll_places),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
