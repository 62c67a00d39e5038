/* Cron expressions and their fire times: an expression parsed once into an immutable value
 * (five fields, or six with a leading seconds field, or a macro), and the next fire strictly
 * after an instant in a time zone (db/tzfile.h), daylight saving included. Pure computation:
 * storing schedules, firing them and the HTTP resource are elsewhere. */
#ifndef DB_CRON_H
#define DB_CRON_H

#include <stddef.h>
#include <stdint.h>

#include "db/tzfile.h"

/* Grammar (Vixie cron's, as cronie reads it, plus a seconds field and Quartz's a/n):
 *   [second] minute hour day-of-month month day-of-week, separated by spaces or tabs;
 *   each field a list a,b,... of `*`, a, a-b, `*`/n, a-b/n or a/n (a to the field's end, by n);
 *   seconds and minutes 0-59, hours 0-23, days of the month 1-31, months 1-12 or JAN-DEC,
 *   days of the week 0-7 or SUN-SAT (0 and 7 are Sunday); names case-insensitive, also in
 *   ranges (MON-FRI); a step is 1 up to the field's largest value; a range runs upwards.
 *   Macros: @yearly = @annually (0 0 1 1 *), @monthly (0 0 1 * *), @weekly (0 0 * * 0),
 *   @daily = @midnight (0 0 * * *), @hourly (0 * * * *); with the seconds field at 0.
 * Days (Vixie's rule): when both the day of the month and the day of the week are restricted,
 * a day matches if either does ("0 0 1 * MON": the 1st, and every Monday); when either field
 * begins with '*' (so `*` and also `*`/n, as Vixie reads it), a day matches if both do.
 *
 * Fire times are wall-clock times of the schedule's zone. Where the zone's clock jumps, this
 * is Vixie cron's rule (cronie keeps it), with the expressions it calls "wildcard": those whose
 * second, minute or hour field begins with '*' (every minute, every 15 minutes, hourly, ...);
 * the others are "fixed-time" (02:30 daily, 0 9-17 on weekdays, @daily, ...):
 *  - Spring forward (Europe/Berlin 2026-03-29 02:00 -> 03:00; 02:30 never happens): a fixed-
 *    time expression whose time falls in the skipped hour fires once, at the first instant
 *    after the gap (03:00 local; still once when several of its times fall in the gap), as
 *    cron runs such jobs right after the change: a daily job is not lost for the day. A
 *    wildcard expression skips the times that do not exist: it keeps its pace by real time.
 *  - Fall back (2026-10-25 03:00 -> 02:00; 02:30 happens twice): a fixed-time expression fires
 *    at the first occurrence only. A wildcard expression fires at both occurrences, so every
 *    15 minutes and hourly keep firing by real elapsed time through the repeated hour.
 * So a wall time fires at most once per occurrence, a fixed time at most once per day it
 * names (times that fall on one instant, as 02:00 in the gap and 03:00 after it, are one
 * fire), and a fire is never early: the next fire is always later than the instant asked. */

#define DB_CRON_TEXT_MAX   256 /* longest expression accepted, in bytes */
#define DB_CRON_ERROR_SIZE 160 /* enough for every message db_cron_parse writes */
/* How far db_cron_next looks: longer than the longest wait of any expression db_cron_parse
 * accepts (40 years: 29 February on a Sunday, with the day of week `*`/7, from 2088 to 2128
 * across the non-leap 2100), so "no next fire" comes only from a zone that skips every such
 * time, or the end of year 9999. */
#define DB_CRON_HORIZON_YEARS 50

#define DB_CRON_DOM_STAR 1u /* the day-of-month field begins with '*' */
#define DB_CRON_DOW_STAR 2u /* the day-of-week field begins with '*' */
#define DB_CRON_WILDCARD 4u /* the second, minute or hour field begins with '*' */

/* A parsed expression: one bit per value that fires. A plain value: copy it, share it. */
struct db_cron {
    uint64_t second; /* bits 0-59 */
    uint64_t minute; /* bits 0-59 */
    uint32_t hour;   /* bits 0-23 */
    uint32_t dom;    /* bits 1-31 */
    uint16_t month;  /* bits 1-12 */
    uint8_t dow;     /* bits 0-6, Sunday 0 */
    unsigned flags;  /* DB_CRON_* */
};

/* Parses text into *out. 0; or -1 with a message in err (errsize bytes, NUL-terminated) that
 * names the field by its place in the text and says what is wrong ("field 3 (day of month): 32
 * is out of range 1-31"), also for an expression that can never fire ("0 0 30 2 *": the
 * day-of-month and month fields together name no date). err quotes only printable ASCII. */
int db_cron_parse(const char *text, struct db_cron *out, char *err, size_t errsize);

/* The first fire of c in zone z strictly after instant after (UTC seconds), by the rules
 * above: 1 with it in *next; 0 when there is none within DB_CRON_HORIZON_YEARS or before the
 * end of year 9999 (or after is outside years 1 to 9999). Pure and thread-safe: reads c and z
 * only. Jumps field by field (a month, a day, an hour at a time), never second by second. */
int db_cron_next(const struct db_cron *c, const struct db_tz *z, int64_t after, int64_t *next);

#endif
