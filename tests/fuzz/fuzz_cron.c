/* Fuzz target: the cron parser and the next fire (db/cron.h). Input: an expression. A refusal
 * writes a message of printable ASCII that fits its buffer; an accepted expression has every
 * field within its range and none empty, and its fires in a zone with daylight saving (Berlin's
 * rule, built here from a TZif image: no file needed) come later each time, each one a fire by
 * db/cron.h's rules as a brute-force reference written here reads them (gmtime_r for the wall
 * time), with none between one and the next when they are at most two hours apart. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/cron.h"
#include "tests/fuzz/fuzz.h"

#define DENSE 7200 /* fires at most this far apart are checked second by second between */

/* A version 2 TZif image without transitions: type +01:00 and the footer of Europe/Berlin. */
static struct db_tz *berlin(void)
{
    static struct db_tz *z;
    static const char footer[] = "\nCET-1CEST,M3.5.0,M10.5.0/3\n";
    unsigned char b[2 * (44 + 10) + sizeof(footer)] = {0};
    char err[DB_TZ_ERROR_SIZE];
    size_t n = 0;
    if (z != NULL)
        return z;
    for (int block = 0; block < 2; block++) { /* the 32-bit block, then the 64-bit one */
        memcpy(b + n, "TZif2", 5);
        b[n + 39] = 1, b[n + 43] = 4; /* one type, four bytes of names */
        n += 44;
        b[n + 2] = 0x0e, b[n + 3] = 0x10; /* utoff 3600, not DST, name 0 */
        n += 6 + 4;
    }
    memcpy(b + n, footer, sizeof(footer) - 1);
    z = db_tz_parse(b, n + sizeof(footer) - 1, err, sizeof(err));
    FUZZ_ASSERT(z != NULL);
    return z;
}

/* Does c name the wall time w (seconds of a clock in no zone)? */
static int names(const struct db_cron *c, int64_t w)
{
    time_t t = (time_t)w;
    struct tm tm;
    FUZZ_ASSERT(gmtime_r(&t, &tm) != NULL);
    int dom = c->dom >> tm.tm_mday & 1, dow = c->dow >> tm.tm_wday & 1;
    int day = c->flags & (DB_CRON_DOM_STAR | DB_CRON_DOW_STAR) ? dom && dow : dom || dow;
    return day && (c->second >> tm.tm_sec & 1) && (c->minute >> tm.tm_min & 1) &&
           (c->hour >> tm.tm_hour & 1) && (c->month >> (tm.tm_mon + 1) & 1);
}

/* Is instant t a fire of c in z, by db/cron.h's rules read the slow way? */
static int fires_at(const struct db_cron *c, const struct db_tz *z, int64_t t)
{
    struct db_tz_span s;
    int fixed = !(c->flags & DB_CRON_WILDCARD);
    db_tz_span(z, t, &s);
    int64_t w = t + s.utoff;
    int repeat = s.utoff < s.prev_utoff && w < s.start + s.prev_utoff;
    if (names(c, w) && !(fixed && repeat))
        return 1;
    if (fixed && t == s.start && s.utoff > s.prev_utoff)
        for (int64_t g = s.start + s.prev_utoff; g < s.start + s.utoff; g++)
            if (names(c, g))
                return 1;
    return 0;
}

static void check_fields(const struct db_cron *c)
{
    FUZZ_ASSERT(c->second != 0 && c->second >> 60 == 0);
    FUZZ_ASSERT(c->minute != 0 && c->minute >> 60 == 0);
    FUZZ_ASSERT(c->hour != 0 && c->hour >> 24 == 0);
    FUZZ_ASSERT(c->dom != 0 && (c->dom & 1) == 0);
    FUZZ_ASSERT(c->month != 0 && (c->month & 1) == 0 && c->month >> 13 == 0);
    FUZZ_ASSERT(c->dow != 0 && c->dow >> 7 == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size), err[DB_CRON_ERROR_SIZE];
    struct db_cron c;
    memset(err, 'x', sizeof(err));
    int rc = db_cron_parse(text, &c, err, sizeof(err));
    FUZZ_ASSERT(rc == 0 || rc == -1);
    if (rc < 0) {
        size_t len = strnlen(err, sizeof(err));
        FUZZ_ASSERT(len > 0 && len < sizeof(err));
        for (size_t i = 0; i < len; i++)
            FUZZ_ASSERT(err[i] >= 0x20 && err[i] <= 0x7e);
        free(text);
        return 0;
    }
    check_fields(&c);
    /* around Berlin's changes of 2026 (29 March and 25 October, 01:00 UTC), and a plain day */
    static const int64_t from[] = {1774744200, 1792886400, 1767225600};
    for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
        int64_t t = from[i], next;
        for (int k = 0; k < 3 && db_cron_next(&c, berlin(), t, &next) == 1; k++) {
            FUZZ_ASSERT(next > t);
            FUZZ_ASSERT(fires_at(&c, berlin(), next));
            for (int64_t u = t + 1; next - t <= DENSE && u < next; u++)
                FUZZ_ASSERT(!fires_at(&c, berlin(), u));
            t = next;
        }
    }
    free(text);
    return 0;
}
