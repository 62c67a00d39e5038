/* The monotonic clock of db/: now in milliseconds, and the deadline of a timed wait on a
 * condition variable made for CLOCK_MONOTONIC. db/ knows nothing of service/'s clock (it is
 * above it), so it keeps this one of its own. */
#ifndef DB_CLOCK_H
#define DB_CLOCK_H

#include <time.h>

/* The monotonic clock in ms (with its fraction). */
static inline double db_clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* *ts becomes ms from now on CLOCK_MONOTONIC, for pthread_cond_timedwait on a condition variable
 * made for that clock. */
static inline void db_clock_after_ms(struct timespec *ts, long ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

#endif
