/* Unit tests of db/cron.c: expressions read and refused (each message naming its field),
 * Vixie's day rule, macros, seconds, leap years, month ends and the horizon; and the next fire
 * across both daylight-saving changes (Berlin, New York, clocks that jump at midnight) for fixed
 * times in the gap and the overlap and for hourly and 15-minute expressions, without DST, and
 * past the zone file's last transition, against UTC instants worked out in the comments. Needs
 * the system's zone database (tzdata): without it these tests fail, saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "db/cron.h"
#include "tests/unit/db/zones.h"

static struct db_cron parse(const char *text)
{
    struct db_cron c;
    char err[DB_CRON_ERROR_SIZE];
    if (db_cron_parse(text, &c, err, sizeof(err)) != 0)
        fail_msg("\"%s\" refused: %s", text, err);
    return c;
}

/* text is refused with a message holding needle, whole (not cut to the buffer). */
static void refused(const char *text, const char *needle)
{
    struct db_cron c;
    char err[DB_CRON_ERROR_SIZE] = "";
    if (db_cron_parse(text, &c, err, sizeof(err)) != -1 || strstr(err, needle) == NULL)
        fail_msg("\"%s\": expected an error with \"%s\", got \"%s\"", text, needle, err);
    if (strlen(err) >= sizeof(err) - 1)
        fail_msg("\"%s\": the message fills the buffer (cut?): %s", text, err);
}

/* The next fire of text in zone name after instant after; -1 when there is none. */
static int64_t next_in(const char *text, const char *name, int64_t after)
{
    struct db_cron c = parse(text);
    struct db_tz *z = zone(name);
    int64_t at = -1;
    if (db_cron_next(&c, z, after, &at) != 1)
        at = -1;
    else if (at <= after)
        fail_msg("\"%s\" in %s: %lld is not after %lld", text, name, (long long)at,
                 (long long)after);
    db_tz_free(z);
    return at;
}

static void expect_next(const char *text, const char *name, int64_t after, int64_t want)
{
    int64_t got = next_in(text, name, after);
    if (got != want)
        fail_msg("\"%s\" in %s after %lld: %lld, expected %lld", text, name, (long long)after,
                 (long long)got, (long long)want);
}

/* The fires of text in zone name after from, one after another, into at[0..n). */
static void fires(const char *text, const char *name, int64_t from, int64_t *at, int n)
{
    struct db_cron c = parse(text);
    struct db_tz *z = zone(name);
    for (int i = 0; i < n; i++) {
        assert_int_equal(db_cron_next(&c, z, i ? at[i - 1] : from, &at[i]), 1);
        assert_true(at[i] > (i ? at[i - 1] : from));
    }
    db_tz_free(z);
}

static uint64_t bits(const int *v, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++)
        b |= UINT64_C(1) << v[i];
    return b;
}
#define BITS(...) bits((const int[]){__VA_ARGS__}, sizeof((const int[]){__VA_ARGS__}) / sizeof(int))

static void test_fields(void **state)
{
    struct db_cron c = parse("*/15 0-6/2 1,15 JAN-mar mon-FRI");
    assert_true(c.second == BITS(0));
    assert_true(c.minute == BITS(0, 15, 30, 45));
    assert_true(c.hour == BITS(0, 2, 4, 6));
    assert_true(c.dom == BITS(1, 15));
    assert_true(c.month == BITS(1, 2, 3));
    assert_true(c.dow == BITS(1, 2, 3, 4, 5));
    assert_int_equal(c.flags, DB_CRON_WILDCARD); /* the minute field begins with '*' */
    c = parse("  5/20\t*  *   *\t* ");           /* a/n runs to the field's end; blanks */
    assert_true(c.minute == BITS(5, 25, 45));
    assert_true(c.hour == 0xffffff && c.month == 0x1ffe && c.dom == 0xfffffffe && c.dow == 0x7f);
    assert_int_equal(c.flags, DB_CRON_WILDCARD | DB_CRON_DOM_STAR | DB_CRON_DOW_STAR);
    assert_true(parse("0 0 * * 7").dow == BITS(0)); /* 7 is Sunday */
    assert_true(parse("0 0 * * 0,7").dow == BITS(0));
    assert_true(parse("0 0 * * 5-7").dow == BITS(0, 5, 6));
    assert_true(parse("0 0 * * sun,Sat").dow == BITS(0, 6));
    assert_true(parse("0 0 * * */2").dow == BITS(0, 2, 4, 6));
    assert_true(parse("0 0 * DEC,jan *").month == BITS(1, 12));
    assert_true(parse("0 0 1-31/10 * *").dom == BITS(1, 11, 21, 31));
    assert_true(parse("007 0 * * *").minute == BITS(7));
    assert_int_equal(parse("30 2 * * *").flags, DB_CRON_DOM_STAR | DB_CRON_DOW_STAR);
    assert_int_equal(parse("0 0 1 * MON").flags, 0);
}

static void test_seconds_field(void **state)
{
    struct db_cron c = parse("*/20 30 2 * * *");
    assert_true(c.second == BITS(0, 20, 40));
    assert_true(c.minute == BITS(30) && c.hour == BITS(2));
    assert_int_equal(c.flags & DB_CRON_WILDCARD, DB_CRON_WILDCARD);
    c = parse("15 30 2 * * *");
    assert_true(c.second == BITS(15));
    assert_int_equal(c.flags & DB_CRON_WILDCARD, 0);
    int64_t t = utc(2026, 5, 4, 12, 0, 5);
    expect_next("*/20 * * * * *", "UTC", t, utc(2026, 5, 4, 12, 0, 20));
    expect_next("30 59 23 31 12 *", "UTC", t, utc(2026, 12, 31, 23, 59, 30));
    expect_next("* * * * * *", "UTC", t, t + 1);
    expect_next("0 0 0 1 1 *", "UTC", t, utc(2027, 1, 1, 0, 0, 0));
}

static int same(const struct db_cron *a, const struct db_cron *b)
{
    return a->second == b->second && a->minute == b->minute && a->hour == b->hour &&
           a->dom == b->dom && a->month == b->month && a->dow == b->dow && a->flags == b->flags;
}

static void test_macros(void **state)
{
    static const char *const pairs[][2] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}, {" @Daily\t", "0 0 * * *"}, {"@HOURLY", "0 * * * *"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        struct db_cron a = parse(pairs[i][0]), b = parse(pairs[i][1]);
        if (!same(&a, &b))
            fail_msg("%s is not %s", pairs[i][0], pairs[i][1]);
    }
    assert_int_equal(parse("@hourly").flags & DB_CRON_WILDCARD, DB_CRON_WILDCARD);
    assert_int_equal(parse("@daily").flags & DB_CRON_WILDCARD, 0);
    refused("@reboot", "@reboot names no time");
    refused("@fortnightly", "'@fortnightly' is not a macro (@yearly,");
    refused("@daily 5", "stands alone");
    refused("@da\x01ly", "'@da...' is not a macro"); /* quoted only while printable */
    refused("@abcdefghijklmnopqrstuvwxyz", "'@abcdefghijklmnopqrstuvw...' is not a macro");
}

static void test_errors_name_the_field(void **state)
{
    refused("61 * * * *", "field 1 (minute): 61 is out of range 0-59");
    refused("0 24 * * *", "field 2 (hour): 24 is out of range 0-23");
    refused("0 0 32 * *", "field 3 (day of month): 32 is out of range 1-31");
    refused("0 0 0 * *", "field 3 (day of month): 0 is out of range 1-31");
    refused("0 0 * 13 *", "field 4 (month): 13 is out of range 1-12");
    refused("0 0 * * 8", "field 5 (day of week): 8 is out of range 0-7");
    refused("60 0 0 * * *", "field 1 (second): 60 is out of range 0-59");
    refused("0 60 0 * * *", "field 2 (minute): 60 is out of range 0-59");
    refused("0 0 0 32 * *", "field 4 (day of month): 32 is out of range 1-31");
    refused("0 0 0 * * 9", "field 6 (day of week): 9 is out of range 0-7");
    refused("0 0 * FOO *", "field 4 (month): 'FOO' is not a month (1-12 or JAN-DEC)");
    refused("0 0 * JAN-MON *", "field 4 (month): 'MON' is not a month");
    refused("0 0 * * MONDAY", "field 5 (day of week): 'MONDAY' is not a day of the week");
    refused("0 0 * * JAN",
            "field 5 (day of week): 'JAN' is not a day of the week (0-7 or SUN-SAT)");
    refused("0 0 * MON *", "field 4 (month): 'MON' is not a month");
    refused("x * * * *", "field 1 (minute): 'x' is not a number");
    refused("0 5-3 * * *", "field 2 (hour): range 5-3 runs backwards");
    refused("0 0 * * SAT-SUN", "field 5 (day of week): range SAT-SUN runs backwards");
    refused("*/0 * * * *", "field 1 (minute): step 0 is out of range 1-59");
    refused("0 */24 * * *", "field 2 (hour): step 24 is out of range 1-23");
    refused("*/x * * * *", "field 1 (minute): step 'x' is not a number");
    refused("*/ * * * *", "field 1 (minute): step '' is not a number");
    refused("1,,2 * * * *", "field 1 (minute): an empty element in a list");
    refused("0 1, * * *", "field 2 (hour): an empty element in a list");
    refused("5- * * * *", "field 1 (minute): a value is missing");
    refused("-5 * * * *", "field 1 (minute): a value is missing");
    refused("*5 * * * *", "field 1 (minute): '*5' is not a number");
    refused("0 0\x01 * * *", "field 2 (hour): byte 2 (0x01) is not allowed");
    refused("0 0 * * L\xc3\xa4", "field 5 (day of week): byte 2 (0xc3) is not allowed");
    refused("0 0 * * *\n", "field 5 (day of week): byte 2 (0x0a) is not allowed");
    refused("1234567890123456789012345678901234567890 * * * *",
            "field 1 (minute): 123456789012345678901234... is out of range 0-59");
    refused("0 0 * *", "expected 5 fields (minute hour day-of-month month day-of-week)");
    refused("0 0 * *", "found 4");
    refused("0 0 * * * * *", "found 7");
    refused("", "found 0");
    refused(" \t ", "found 0");
    char longest[DB_CRON_TEXT_MAX + 2];
    memset(longest, ' ', sizeof(longest));
    memcpy(longest, "* * * * *", 9);
    longest[DB_CRON_TEXT_MAX] = '\0';
    parse(longest);
    longest[DB_CRON_TEXT_MAX] = ' ', longest[DB_CRON_TEXT_MAX + 1] = '\0';
    refused(longest, "at most 256 bytes");
}

/* Day-of-month and month fields that name no date are refused; those that name a rare one (29
 * February), or that Vixie's "either" rule completes with a day of the week, are not. */
static void test_never_fires(void **state)
{
    refused("0 0 30 2 *", "field 3 (day of month) and field 4 (month): the months named have at "
                          "most 29 days, so day 30 never comes");
    refused("0 0 31 4,6,9,11 *", "at most 30 days, so day 31 never comes");
    refused("0 0 0 30,31 FEB *", "field 4 (day of month) and field 5 (month)");
    refused("0 0 31 2 */2", "day 31 never comes"); /* a day of week "*"/2: both must match */
    parse("0 0 29 2 *");
    parse("0 0 30,31 2,4 *");
    parse("0 0 30 2 MON"); /* either: every Monday of February */
    expect_next("0 0 30 2 MON", "UTC", utc(2026, 1, 1, 0, 0, 0), utc(2026, 2, 2, 0, 0, 0));
}

/* 2026: 13 February and 13 March are Fridays; the Fridays of February are the 6th, 13th, 20th
 * and 27th; the odd-numbered Mondays of January to March are the 5th, 19th, 9th, 23rd, 9th
 * and 23rd. */
static void test_vixie_day_rule(void **state)
{
    int64_t at[6];
    fires("0 0 13 * FRI", "UTC", utc(2026, 2, 1, 0, 0, 0), at, 6); /* either */
    assert_true(at[0] == utc(2026, 2, 6, 0, 0, 0) && at[1] == utc(2026, 2, 13, 0, 0, 0));
    assert_true(at[2] == utc(2026, 2, 20, 0, 0, 0) && at[3] == utc(2026, 2, 27, 0, 0, 0));
    assert_true(at[4] == utc(2026, 3, 6, 0, 0, 0) && at[5] == utc(2026, 3, 13, 0, 0, 0));
    fires("0 0 */2 * MON", "UTC", utc(2026, 1, 1, 0, 0, 0), at, 6); /* '*'-led: both */
    assert_true(at[0] == utc(2026, 1, 5, 0, 0, 0) && at[1] == utc(2026, 1, 19, 0, 0, 0));
    assert_true(at[2] == utc(2026, 2, 9, 0, 0, 0) && at[3] == utc(2026, 2, 23, 0, 0, 0));
    assert_true(at[4] == utc(2026, 3, 9, 0, 0, 0) && at[5] == utc(2026, 3, 23, 0, 0, 0));
    fires("0 0 * * MON", "UTC", utc(2026, 1, 1, 0, 0, 0), at, 2); /* 5 January was a Monday */
    assert_true(at[0] == utc(2026, 1, 5, 0, 0, 0) && at[1] == utc(2026, 1, 12, 0, 0, 0));
    fires("0 0 1-31 * MON", "UTC", utc(2026, 1, 1, 0, 0, 0), at, 2); /* either: every day */
    assert_true(at[0] == utc(2026, 1, 2, 0, 0, 0) && at[1] == utc(2026, 1, 3, 0, 0, 0));
}

static void test_leap_years_and_month_ends(void **state)
{
    expect_next("0 0 29 2 *", "UTC", utc(2025, 1, 1, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0));
    expect_next("0 0 29 2 *", "UTC", utc(2028, 2, 29, 0, 0, 0), utc(2032, 2, 29, 0, 0, 0));
    expect_next("0 0 29 2 *", "UTC", utc(2096, 3, 1, 0, 0, 0), utc(2104, 2, 29, 0, 0, 0));
    expect_next("0 0 31 * *", "UTC", utc(2026, 1, 31, 0, 0, 0), utc(2026, 3, 31, 0, 0, 0));
    expect_next("0 0 31 * *", "UTC", utc(2026, 3, 31, 0, 0, 0), utc(2026, 5, 31, 0, 0, 0));
    expect_next("0 0 30 * *", "UTC", utc(2026, 1, 30, 0, 0, 0), utc(2026, 3, 30, 0, 0, 0));
    expect_next("0 0 29 * *", "UTC", utc(2027, 1, 29, 0, 0, 0), utc(2027, 3, 29, 0, 0, 0));
    expect_next("0 0 29 * *", "UTC", utc(2028, 1, 29, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0));
    expect_next("* * * * *", "UTC", utc(2026, 12, 31, 23, 59, 0), utc(2027, 1, 1, 0, 0, 0));
    expect_next("0 0 1 * *", "UTC", utc(2026, 12, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0));
    expect_next("0 12 * * *", "UTC", utc(2026, 2, 28, 12, 0, 0), utc(2026, 3, 1, 12, 0, 0));
}

/* Never early, and the horizon: a fire at exactly `after` is not the next one; 29 February on
 * a Sunday comes 40 years after 2088 (2128), within DB_CRON_HORIZON_YEARS; nothing after 9999. */
static void test_never_early_and_horizon(void **state)
{
    int64_t t = utc(2026, 5, 4, 12, 0, 0);
    expect_next("0 * * * *", "UTC", t, utc(2026, 5, 4, 13, 0, 0));
    expect_next("0 12 * * *", "UTC", t, utc(2026, 5, 5, 12, 0, 0));
    expect_next("0 12 * * *", "UTC", t - 1, t);
    expect_next("0 0 29 2 */7", "UTC", utc(2088, 3, 1, 0, 0, 0), utc(2128, 2, 29, 0, 0, 0));
    expect_next("0 0 1 1 *", "UTC", utc(9999, 6, 1, 0, 0, 0), -1);
    expect_next("* * * * * *", "UTC", utc(9999, 12, 31, 23, 59, 58), utc(9999, 12, 31, 23, 59, 59));
    expect_next("* * * * * *", "UTC", utc(9999, 12, 31, 23, 59, 59), -1);
    expect_next("* * * * *", "UTC", INT64_MAX, -1);
    expect_next("* * * * *", "UTC", INT64_MIN, -1);
    expect_next("0 0 1 1 *", "UTC", utc(1, 1, 1, 0, 0, 0), utc(2, 1, 1, 0, 0, 0));
}

/* Europe/Berlin, spring forward on 29 March 2026 at 01:00 UTC: 02:00 CET becomes 03:00 CEST,
 * so 02:30 does not exist that day. A daily 02:30 fires once, at 03:00 CEST (01:00 UTC), the
 * first instant after the gap; the day before at 02:30 CET (01:30 UTC), the day after at
 * 02:30 CEST (00:30 UTC). Two times in the gap still make one fire. */
static void test_berlin_spring_fixed(void **state)
{
    const char *b = "Europe/Berlin";
    expect_next("30 2 * * *", b, utc(2026, 3, 27, 12, 0, 0), utc(2026, 3, 28, 1, 30, 0));
    expect_next("30 2 * * *", b, utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 29, 1, 0, 0));
    expect_next("30 2 * * *", b, utc(2026, 3, 29, 1, 0, 0), utc(2026, 3, 30, 0, 30, 0));
    expect_next("0,30 2 * * *", b, utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 1, 0, 0));
    expect_next("0,30 2 * * *", b, utc(2026, 3, 29, 1, 0, 0), utc(2026, 3, 30, 0, 0, 0));
    expect_next("0 30 2 * * *", b, utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 29, 1, 0, 0));
    expect_next("0 3 * * *", b, utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 1, 0, 0));
    /* asked from inside the day, after the gap: the gap's fire is behind */
    expect_next("30 2 * * *", b, utc(2026, 3, 29, 1, 0, 1), utc(2026, 3, 30, 0, 30, 0));
}

/* Europe/Berlin, fall back on 25 October 2026 at 01:00 UTC: 03:00 CEST becomes 02:00 CET, so
 * 02:30 happens at 00:30 UTC (CEST) and again at 01:30 UTC (CET). A daily 02:30 fires at the
 * first only; the next is 26 October 02:30 CET (01:30 UTC). */
static void test_berlin_fall_fixed(void **state)
{
    const char *b = "Europe/Berlin";
    expect_next("30 2 * * *", b, utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 25, 0, 30, 0));
    expect_next("30 2 * * *", b, utc(2026, 10, 25, 0, 30, 0), utc(2026, 10, 26, 1, 30, 0));
    expect_next("30 2 * * *", b, utc(2026, 10, 25, 0, 45, 0), utc(2026, 10, 26, 1, 30, 0));
    expect_next("30 2 * * *", b, utc(2026, 10, 25, 1, 15, 0), utc(2026, 10, 26, 1, 30, 0));
    expect_next("0 2 * * *", b, utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 25, 0, 0, 0));
    expect_next("0 3 * * *", b, utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 25, 2, 0, 0));
}

/* Checks that n fires of text from `from` come every `every` seconds of real time. */
static void expect_pace(const char *text, const char *name, int64_t from, int64_t first,
                        int64_t every, int n)
{
    int64_t at[64];
    assert_true(n <= 64);
    fires(text, name, from, at, n);
    for (int i = 0; i < n; i++)
        if (at[i] != first + i * every)
            fail_msg("\"%s\" in %s: fire %d at %lld, expected %lld", text, name, i,
                     (long long)at[i], (long long)(first + i * every));
}

/* Hourly and every 15 minutes in Berlin: by real time through both changes. Spring: 01:00 CET
 * (00:00 UTC), then 03:00 CEST (01:00 UTC), one hour later. Fall: 02:00 CEST (00:00 UTC),
 * 02:00 CET (01:00 UTC), 03:00 CET (02:00 UTC). Every 15 minutes: 00:00 to 02:00 UTC without a
 * hole or a double, on both days. */
static void test_berlin_wildcards(void **state)
{
    const char *b = "Europe/Berlin";
    expect_pace("0 * * * *", b, utc(2026, 3, 28, 22, 30, 0), utc(2026, 3, 28, 23, 0, 0), 3600, 6);
    expect_pace("@hourly", b, utc(2026, 10, 24, 22, 30, 0), utc(2026, 10, 24, 23, 0, 0), 3600, 6);
    expect_pace("*/15 * * * *", b, utc(2026, 3, 28, 23, 50, 0), utc(2026, 3, 29, 0, 0, 0), 900, 12);
    expect_pace("*/15 * * * *", b, utc(2026, 10, 24, 23, 50, 0), utc(2026, 10, 25, 0, 0, 0), 900,
                12);
    expect_pace("*/20 * * * * *", b, utc(2026, 3, 29, 0, 59, 0), utc(2026, 3, 29, 0, 59, 20), 20,
                6);
    /* a wildcard minute in a fixed hour: Vixie's "wildcard" job, by real time: in the skipped
     * hour it does not fire at all; in the repeated hour it fires in both (8 times) */
    expect_next("*/15 2 * * *", b, utc(2026, 3, 28, 12, 0, 0), utc(2026, 3, 30, 0, 0, 0));
    expect_pace("*/15 2 * * *", b, utc(2026, 10, 24, 12, 0, 0), utc(2026, 10, 25, 0, 0, 0), 900, 8);
    expect_next("*/15 2 * * *", b, utc(2026, 10, 25, 1, 45, 0), utc(2026, 10, 26, 1, 0, 0));
}

/* America/New_York 2026: spring forward on 8 March at 07:00 UTC (02:00 EST becomes 03:00
 * EDT; 02:30 does not exist), fall back on 1 November at 06:00 UTC (02:00 EDT becomes 01:00
 * EST; 01:30 happens at 05:30 and 06:30 UTC). */
static void test_new_york(void **state)
{
    const char *ny = "America/New_York";
    expect_next("30 2 * * *", ny, utc(2026, 3, 7, 12, 0, 0), utc(2026, 3, 8, 7, 0, 0));
    expect_next("30 2 * * *", ny, utc(2026, 3, 8, 7, 0, 0), utc(2026, 3, 9, 6, 30, 0));
    expect_next("30 1 * * *", ny, utc(2026, 3, 7, 12, 0, 0), utc(2026, 3, 8, 6, 30, 0));
    expect_next("30 1 * * *", ny, utc(2026, 10, 31, 12, 0, 0), utc(2026, 11, 1, 5, 30, 0));
    expect_next("30 1 * * *", ny, utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0));
    expect_next("30 2 * * *", ny, utc(2026, 10, 31, 12, 0, 0), utc(2026, 11, 1, 7, 30, 0));
    expect_pace("0 * * * *", ny, utc(2026, 3, 8, 4, 30, 0), utc(2026, 3, 8, 5, 0, 0), 3600, 5);
    expect_pace("0 * * * *", ny, utc(2026, 11, 1, 3, 30, 0), utc(2026, 11, 1, 4, 0, 0), 3600, 5);
    expect_pace("*/15 * * * *", ny, utc(2026, 3, 8, 6, 0, 0), utc(2026, 3, 8, 6, 15, 0), 900, 12);
    expect_pace("*/15 * * * *", ny, utc(2026, 11, 1, 4, 50, 0), utc(2026, 11, 1, 5, 0, 0), 900, 12);
}

/* Counted over a year holding both of 2026's changes (from noon UTC on 31 December 2025 to the
 * same a year later): a daily fixed time fires once on each of the 365 days, in the gap and the
 * overlap alike; hourly and every 15 minutes once per real hour and quarter, 8760 and 35040
 * times. */
static void test_year_counts(void **state)
{
    static const struct {
        const char *text, *zone;
        int count;
    } cases[] = {
        {"30 2 * * *", "Europe/Berlin", 365},        {"30 2 * * *", "America/New_York", 365},
        {"30 1 * * *", "America/New_York", 365},     {"0 * * * *", "Europe/Berlin", 8760},
        {"*/15 * * * *", "America/New_York", 35040},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct db_cron c = parse(cases[i].text);
        struct db_tz *z = zone(cases[i].zone);
        int64_t t = utc(2025, 12, 31, 12, 0, 0) - 1, end = utc(2026, 12, 31, 12, 0, 0);
        int n = 0;
        while (db_cron_next(&c, z, t, &t) == 1 && t < end)
            n++;
        if (n != cases[i].count)
            fail_msg("\"%s\" in %s: %d fires in 2026, expected %d", cases[i].text, cases[i].zone, n,
                     cases[i].count);
        db_tz_free(z);
    }
}

/* Clocks that jump at midnight. America/Santiago, 6 September 2026 at 04:00 UTC: 24:00 -04
 * becomes 01:00 -03, so midnight does not exist: @daily fires at 01:00 -03 (04:00 UTC), then
 * 7 September 00:00 -03 (03:00 UTC). America/Nuuk, 29 March 2026 at 01:00 UTC: Saturday
 * 23:00 -02 becomes Sunday 00:00 -01: Saturday's 23:30 fires at Sunday 00:00 (01:00 UTC). */
static void test_midnight_changes(void **state)
{
    expect_next("@daily", "America/Santiago", utc(2026, 9, 5, 12, 0, 0), utc(2026, 9, 6, 4, 0, 0));
    expect_next("@daily", "America/Santiago", utc(2026, 9, 6, 4, 0, 0), utc(2026, 9, 7, 3, 0, 0));
    expect_next("30 23 * * *", "America/Nuuk", utc(2026, 3, 28, 12, 0, 0),
                utc(2026, 3, 29, 1, 0, 0));
    expect_next("30 23 * * *", "America/Nuuk", utc(2026, 3, 29, 1, 0, 0),
                utc(2026, 3, 30, 0, 30, 0));
}

/* Zones without DST: UTC, and Asia/Kolkata at +05:30 (09:00 IST is 03:30 UTC; every hour at
 * :30 IST is on the hour in UTC). */
static void test_no_dst(void **state)
{
    expect_next("0 9 * * *", "UTC", utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 9, 0, 0));
    expect_next("0 9 * * *", "Asia/Kolkata", utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 3, 30, 0));
    expect_next("0 9 * * *", "Asia/Kolkata", utc(2026, 3, 29, 3, 30, 0),
                utc(2026, 3, 30, 3, 30, 0));
    expect_pace("30 * * * *", "Asia/Kolkata", utc(2026, 3, 29, 0, 0, 0), utc(2026, 3, 29, 1, 0, 0),
                3600, 4);
    expect_next("0 0 1 1 *", "Asia/Kolkata", utc(2026, 3, 29, 0, 0, 0),
                utc(2026, 12, 31, 18, 30, 0));
}

/* 2100, past the last transition of any of Debian's Berlin files (the footer's rule): spring
 * forward on 28 March at 01:00 UTC, fall back on 31 October at 01:00 UTC. */
static void test_far_future(void **state)
{
    const char *b = "Europe/Berlin";
    expect_next("30 2 * * *", b, utc(2100, 3, 27, 12, 0, 0), utc(2100, 3, 28, 1, 0, 0));
    expect_next("30 2 * * *", b, utc(2100, 3, 28, 1, 0, 0), utc(2100, 3, 29, 0, 30, 0));
    expect_next("30 2 * * *", b, utc(2100, 10, 30, 12, 0, 0), utc(2100, 10, 31, 0, 30, 0));
    expect_next("30 2 * * *", b, utc(2100, 10, 31, 0, 30, 0), utc(2100, 11, 1, 1, 30, 0));
    expect_pace("0 * * * *", b, utc(2100, 10, 30, 23, 30, 0), utc(2100, 10, 31, 0, 0, 0), 3600, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_seconds_field),
        cmocka_unit_test(test_macros),
        cmocka_unit_test(test_errors_name_the_field),
        cmocka_unit_test(test_never_fires),
        cmocka_unit_test(test_vixie_day_rule),
        cmocka_unit_test(test_leap_years_and_month_ends),
        cmocka_unit_test(test_never_early_and_horizon),
        cmocka_unit_test(test_berlin_spring_fixed),
        cmocka_unit_test(test_berlin_fall_fixed),
        cmocka_unit_test(test_berlin_wildcards),
        cmocka_unit_test(test_new_york),
        cmocka_unit_test(test_year_counts),
        cmocka_unit_test(test_midnight_changes),
        cmocka_unit_test(test_no_dst),
        cmocka_unit_test(test_far_future),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
