/* What the unit tests of db/tzfile.c and db/cron.c share: UTC instants from the C library's
 * timegm (not db/civil.h, the calendar under test), and zones loaded from the system's database
 * that fail the test, naming the Debian package tzdata, when it is missing. Include after
 * cmocka.h. */
#ifndef TESTS_UNIT_DB_ZONES_H
#define TESTS_UNIT_DB_ZONES_H

#include <stdint.h>
#include <time.h>

#include "db/tzfile.h"

/* The instant of a UTC date and time. */
static inline int64_t utc(int y, int mo, int d, int h, int mi, int s)
{
    struct tm tm = {.tm_year = y - 1900,
                    .tm_mon = mo - 1,
                    .tm_mday = d,
                    .tm_hour = h,
                    .tm_min = mi,
                    .tm_sec = s};
    return (int64_t)timegm(&tm);
}

/* The zone name, loaded (the caller frees it); fails the test when the database lacks it. */
static inline struct db_tz *zone(const char *name)
{
    char err[DB_TZ_ERROR_SIZE];
    struct db_tz *z = db_tz_load(name, err, sizeof(err));
    if (z == NULL)
        fail_msg("%s: the system's time-zone database is needed (install the Debian package "
                 "tzdata): %s",
                 name, err);
    return z;
}

#endif
