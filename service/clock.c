/* The service's clock (see clock.h): one place that turns clock_gettime into seconds and
 * milliseconds into a struct timespec. */
#include "service/clock.h"

#define NS_PER_S  1000000000L
#define NS_PER_MS 1000000L

static double seconds_on(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

double svc_now(void)
{
    return seconds_on(CLOCK_MONOTONIC);
}

double svc_wall_now(void)
{
    return seconds_on(CLOCK_REALTIME);
}

struct timespec svc_clock_span_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * NS_PER_MS};
    return t;
}

struct timespec svc_clock_after_ms(clockid_t clock, long ms)
{
    struct timespec t, span = svc_clock_span_ms(ms);
    clock_gettime(clock, &t);
    t.tv_sec += span.tv_sec;
    t.tv_nsec += span.tv_nsec;
    if (t.tv_nsec >= NS_PER_S) {
        t.tv_sec++;
        t.tv_nsec -= NS_PER_S;
    }
    return t;
}

void svc_clock_sleep_ms(long ms)
{
    struct timespec t = svc_clock_span_ms(ms);
    nanosleep(&t, NULL);
}
