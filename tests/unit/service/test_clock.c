/* Unit tests of service/clock.c: monotonic seconds advance across a sleep, spans and deadlines
 * carry milliseconds into seconds, and a deadline lies ahead of the clock it was read on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "service/clock.h"

static void test_clock_span(void **state)
{
    struct timespec t = svc_clock_span_ms(2500);
    assert_int_equal(t.tv_sec, 2);
    assert_int_equal(t.tv_nsec, 500000000L);
    t = svc_clock_span_ms(999);
    assert_int_equal(t.tv_sec, 0);
    assert_int_equal(t.tv_nsec, 999000000L);
}

static long long ns_of(const struct timespec *t)
{
    return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static void test_clock_after(void **state)
{
    for (int i = 0; i < 200; i++) { /* some of these cross a second boundary */
        struct timespec before, after;
        clock_gettime(CLOCK_MONOTONIC, &before);
        struct timespec due = svc_clock_after_ms(CLOCK_MONOTONIC, 999);
        clock_gettime(CLOCK_MONOTONIC, &after);
        assert_true(due.tv_nsec >= 0 && due.tv_nsec < 1000000000L);
        /* 999 ms after a time between the two reads */
        assert_true(ns_of(&due) - ns_of(&before) >= 999000000LL);
        assert_true(ns_of(&due) - ns_of(&after) <= 999000000LL);
    }
}

static void test_clock_now(void **state)
{
    double t0 = svc_now();
    svc_clock_sleep_ms(20);
    double t1 = svc_now();
    assert_true(t1 - t0 >= 0.019);
    assert_true(t1 - t0 < 5.0);
    assert_true(svc_wall_now() > 1.6e9); /* after 2020: the epoch's clock, not the boot's */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clock_span),
        cmocka_unit_test(test_clock_after),
        cmocka_unit_test(test_clock_now),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
