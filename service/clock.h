/* The service's clock: monotonic seconds as a double (the clock of deadlines, ages and
 * durations), wall-clock seconds, and the struct timespec forms that timed waits and sleeps
 * take. Time arithmetic belongs here; formatting a timestamp belongs to its writer (log.c). */
#ifndef SVC_CLOCK_H
#define SVC_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC: what deadlines, request ages and durations are measured in. */
double svc_now(void);
/* Seconds since the epoch (CLOCK_REALTIME), for what is shown as a date. */
double svc_wall_now(void);
/* The time ms milliseconds from now on clock (as pthread_cond_timedwait takes it: on the clock
 * its condition variable was made with). */
struct timespec svc_clock_after_ms(clockid_t clock, long ms);
/* A span of ms milliseconds (as nanosleep and sigtimedwait take it). */
struct timespec svc_clock_span_ms(long ms);
/* Sleeps ms milliseconds (a signal may cut it short). */
void svc_clock_sleep_ms(long ms);

#endif
