/* Proleptic Gregorian calendar arithmetic on day numbers (days since 1970-01-01), for any year
 * an int64_t of seconds can hold: the one place db/ turns days into dates and back (after Howard
 * Hinnant's days_from_civil and civil_from_days). No time zones here: db/tzfile.h maps instants
 * to offsets, and db/cron.h fires on the wall times this calendar names. */
#ifndef DB_CIVIL_H
#define DB_CIVIL_H

#include <stdint.h>

#define DB_CIVIL_DAY 86400 /* seconds in a civil day (no leap seconds: POSIX time) */

/* a / b rounded toward minus infinity (b > 0). */
static inline int64_t db_civil_floor_div(int64_t a, int64_t b)
{
    return a / b - (a % b < 0);
}

static inline int db_civil_leap(int64_t y)
{
    return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
}

/* Days in month m (1-12) of year y. */
static inline int db_civil_month_days(int64_t y, int m)
{
    static const unsigned char days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && db_civil_leap(y) ? 29 : days[m - 1];
}

/* The day number of y-m-d (m 1-12, d 1-31). */
static inline int64_t db_civil_days(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = db_civil_floor_div(y, 400);
    int64_t yoe = y - era * 400;                                   /* [0, 399] */
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1; /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;           /* [0, 146096] */
    return era * 146097 + doe - 719468;
}

/* The date of day number z. */
static inline void db_civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = db_civil_floor_div(z, 146097);
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* The weekday of day number z: 0 Sunday to 6 Saturday (1970-01-01 was a Thursday). */
static inline int db_civil_weekday(int64_t z)
{
    return (int)(z + 4 - db_civil_floor_div(z + 4, 7) * 7);
}

#endif
