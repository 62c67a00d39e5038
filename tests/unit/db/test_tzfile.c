/* Unit tests of db/tzfile.c and db/tzrule.c: zone names, files refused, offsets and spans at
 * hand-checked instants (both transitions of Europe/Berlin and America/New_York, zones without
 * DST, years past the files' last transitions, where the footer's rule answers), footers in
 * every form (M, J and zero-based days, version 3 hours) read from TZif files built here, and
 * every zone of the system's database against the C library's localtime_r. Needs the system's
 * zone database (Debian package tzdata): without it these tests fail, saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/tzfile.h"
#include "tests/unit/db/zones.h"

static void expect_load_error(const char *name, const char *needle)
{
    char err[DB_TZ_ERROR_SIZE] = "";
    struct db_tz *z = db_tz_load(name, err, sizeof(err));
    if (z != NULL || strstr(err, needle) == NULL)
        fail_msg("load(\"%s\"): expected an error with \"%s\", got %s \"%s\"", name, needle,
                 z ? "a zone and" : "", err);
}

static void test_tzdata_installed(void **state)
{
    FILE *f = fopen(DB_TZ_DIR "/Europe/Berlin", "rb");
    if (f == NULL)
        fail_msg("%s/Europe/Berlin is missing: install the Debian package tzdata", DB_TZ_DIR);
    fclose(f);
}

static void test_names(void **state)
{
    char err[DB_TZ_ERROR_SIZE];
    static const char *const good[] = {
        "UTC",       "Europe/Berlin", "America/Argentina/Buenos_Aires",
        "Etc/GMT+5", "Etc/GMT-14",    "America/Port-au-Prince"};
    static const char *const bad[] = {"",
                                      "/etc/passwd",
                                      "../etc/passwd",
                                      "Europe/../../etc/passwd",
                                      "Europe/",
                                      "Europe//Berlin",
                                      "Europe/Berlin\n",
                                      "Europe/Berlin ",
                                      "Europe\\Berlin",
                                      "-rf",
                                      "Etc/+5",
                                      "localtime",
                                      "Europe/Berl\xc3\xadn",
                                      "zone.tab"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        assert_int_equal(db_tz_name_check(good[i], err, sizeof(err)), 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (db_tz_name_check(bad[i], err, sizeof(err)) != -1 || strlen(err) == 0)
            fail_msg("name \"%s\" accepted", bad[i]);
    }
    char longest[DB_TZ_NAME_MAX + 2];
    memset(longest, 'a', DB_TZ_NAME_MAX + 1);
    longest[DB_TZ_NAME_MAX + 1] = '\0';
    assert_int_equal(db_tz_name_check(longest, err, sizeof(err)), -1);
    longest[DB_TZ_NAME_MAX] = '\0';
    assert_int_equal(db_tz_name_check(longest, err, sizeof(err)), 0);
}

static void test_load_errors(void **state)
{
    test_tzdata_installed(state);
    expect_load_error("Europe/Berln", "unknown time zone \"Europe/Berln\"");
    expect_load_error("Mars/Olympus_Mons", "unknown time zone");
    expect_load_error("Europe/Berlin/x", "unknown time zone"); /* a file is not a directory */
    expect_load_error("Europe", "a directory of zones");
    expect_load_error("leapseconds", "not a TZif file"); /* a text file of the database */
    expect_load_error("../../etc/passwd", "a time zone name holds only");
    expect_load_error("/etc/passwd", "starts with a letter");
    expect_load_error("localtime", "not a time zone name");
    char longest[DB_TZ_NAME_MAX + 1]; /* the longest name's message is whole, not cut */
    memset(longest, 'a', DB_TZ_NAME_MAX);
    longest[DB_TZ_NAME_MAX] = '\0';
    expect_load_error(longest, "\" (no such zone in " DB_TZ_DIR ")");
}

static void expect_span(const struct db_tz *z, int64_t t, int64_t start, int64_t end, int32_t prev,
                        int32_t utoff, int isdst)
{
    struct db_tz_span s;
    db_tz_span(z, t, &s);
    if (s.start != start || s.end != end || s.prev_utoff != prev || s.utoff != utoff ||
        s.isdst != isdst)
        fail_msg("span at %lld: [%lld, %lld) prev %d utoff %d dst %d; expected [%lld, %lld) "
                 "prev %d utoff %d dst %d",
                 (long long)t, (long long)s.start, (long long)s.end, s.prev_utoff, s.utoff, s.isdst,
                 (long long)start, (long long)end, prev, utoff, isdst);
    int dst = -1;
    assert_int_equal(db_tz_offset(z, t, &dst), utoff);
    assert_int_equal(dst, isdst);
}

/* Berlin, 2026: CET (+1) until 29 March 01:00 UTC (02:00 CET becomes 03:00 CEST), CEST (+2)
 * until 25 October 01:00 UTC (03:00 CEST becomes 02:00 CET). */
static void test_berlin_2026(void **state)
{
    struct db_tz *z = zone("Europe/Berlin");
    int64_t spring = utc(2026, 3, 29, 1, 0, 0), fall = utc(2026, 10, 25, 1, 0, 0);
    assert_int_equal(spring, 1774746000); /* and timegm agrees with the hand count */
    int64_t before = utc(2025, 10, 26, 1, 0, 0), after = utc(2027, 3, 28, 1, 0, 0);
    expect_span(z, spring - 1, before, spring, 7200, 3600, 0);
    expect_span(z, spring, spring, fall, 3600, 7200, 1);
    expect_span(z, fall - 1, spring, fall, 3600, 7200, 1);
    expect_span(z, fall, fall, after, 7200, 3600, 0);
    expect_span(z, utc(2026, 7, 1, 12, 0, 0), spring, fall, 3600, 7200, 1);
    db_tz_free(z);
}

/* New York, 2026: EST (-5) until 8 March 07:00 UTC (02:00 EST becomes 03:00 EDT), EDT (-4)
 * until 1 November 06:00 UTC (02:00 EDT becomes 01:00 EST). */
static void test_new_york_2026(void **state)
{
    struct db_tz *z = zone("America/New_York");
    int64_t spring = utc(2026, 3, 8, 7, 0, 0), fall = utc(2026, 11, 1, 6, 0, 0);
    int64_t before = utc(2025, 11, 2, 6, 0, 0), after = utc(2027, 3, 14, 7, 0, 0);
    expect_span(z, spring - 1, before, spring, -14400, -18000, 0);
    expect_span(z, spring, spring, fall, -18000, -14400, 1);
    expect_span(z, fall - 1, spring, fall, -18000, -14400, 1);
    expect_span(z, fall, fall, after, -14400, -18000, 0);
    db_tz_free(z);
}

/* Past 2037 (the last transition of a fat file; slim files stop earlier) the footer's rule
 * answers: Berlin 2100, last Sundays of March (28th) and October (31st) at 01:00 UTC; New York
 * 2100, second Sunday of March (14th) 07:00 UTC, first of November (7th) 06:00 UTC; and
 * Sydney, southern (AEST+10, AEDT+11 from the first Sunday of October at 02:00 AEST to the
 * first of April at 03:00 AEDT): 2100-04-03 16:00 UTC and 2100-10-02 16:00 UTC; and the last
 * year the module answers for, 9999 (last Sunday of October: the 31st). */
static void test_footer_far_future(void **state)
{
    struct db_tz *berlin = zone("Europe/Berlin"), *ny = zone("America/New_York");
    struct db_tz *sydney = zone("Australia/Sydney");
    int64_t b1 = utc(2100, 3, 28, 1, 0, 0), b2 = utc(2100, 10, 31, 1, 0, 0);
    expect_span(berlin, utc(2100, 6, 1, 0, 0, 0), b1, b2, 3600, 7200, 1);
    expect_span(berlin, b1 - 1, utc(2099, 10, 25, 1, 0, 0), b1, 7200, 3600, 0);
    int64_t n1 = utc(2100, 3, 14, 7, 0, 0), n2 = utc(2100, 11, 7, 6, 0, 0);
    expect_span(ny, n1, n1, n2, -18000, -14400, 1);
    int64_t s1 = utc(2100, 4, 3, 16, 0, 0), s2 = utc(2100, 10, 2, 16, 0, 0);
    expect_span(sydney, utc(2100, 7, 1, 0, 0, 0), s1, s2, 39600, 36000, 0);
    expect_span(sydney, s2, s2, utc(2101, 4, 2, 16, 0, 0), 36000, 39600, 1);
    struct db_tz_span s;
    db_tz_span(berlin, utc(9999, 12, 31, 23, 59, 59), &s);
    assert_true(s.start == utc(9999, 10, 31, 1, 0, 0) && s.utoff == 3600 && s.prev_utoff == 7200);
    db_tz_free(berlin);
    db_tz_free(ny);
    db_tz_free(sydney);
}

static void test_no_dst(void **state)
{
    struct db_tz *u = zone("UTC"), *kolkata = zone("Asia/Kolkata");
    expect_span(u, 0, INT64_MIN, INT64_MAX, 0, 0, 0);
    expect_span(u, utc(2300, 1, 1, 0, 0, 0), INT64_MIN, INT64_MAX, 0, 0, 0);
    struct db_tz_span s;
    db_tz_span(kolkata, utc(2026, 3, 29, 1, 0, 0), &s);
    assert_int_equal(s.utoff, 19800); /* +05:30, since 1945 */
    assert_int_equal(s.isdst, 0);
    assert_true(s.start < utc(1946, 1, 1, 0, 0, 0));
    assert_true(s.end == INT64_MAX);
    assert_int_equal(db_tz_offset(kolkata, utc(2100, 1, 1, 0, 0, 0), NULL), 19800);
    db_tz_free(u);
    db_tz_free(kolkata);
}

/* ---- TZif files built here -------------------------------------------------------------- */

struct file {
    unsigned char b[1024];
    size_t len;
};

static void put(struct file *f, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        f->b[f->len++] = (unsigned char)(v >> (8 * i));
}

static void header(struct file *f, char version, uint32_t leap, uint32_t n, uint32_t types)
{
    memcpy(f->b + f->len, "TZif", 4);
    f->len += 4;
    f->b[f->len++] = (unsigned char)version;
    memset(f->b + f->len, 0, 15);
    f->len += 15;
    put(f, 0, 4), put(f, 0, 4), put(f, leap, 4), put(f, n, 4), put(f, types, 4), put(f, 4, 4);
}

/* A TZif file: n transitions (times, to type idx), types of utoff and isdst; version '\0'
 * (32-bit data, no footer) or '2'/'3' (an empty version 1 block as zic -b slim writes it, the
 * 64-bit block, the footer). */
static void tzif(struct file *f, char version, const int64_t *times, const uint8_t *idx, size_t n,
                 const int32_t *utoff, const uint8_t *isdst, size_t types, const char *footer)
{
    int w = version == '\0' ? 4 : 8;
    f->len = 0;
    if (w == 8) {
        header(f, version, 0, 0, 1);
        put(f, 0, 4), put(f, 0, 1), put(f, 0, 1), put(f, 0, 4); /* one type, 4 chars */
    }
    header(f, version, 0, (uint32_t)n, (uint32_t)types);
    for (size_t i = 0; i < n; i++)
        put(f, (uint64_t)times[i], w);
    for (size_t i = 0; i < n; i++)
        put(f, idx[i], 1);
    for (size_t i = 0; i < types; i++)
        put(f, (uint32_t)utoff[i], 4), put(f, isdst[i], 1), put(f, 0, 1);
    put(f, 0x41424300, 4); /* "ABC" */
    if (w == 8) {
        f->b[f->len++] = '\n';
        memcpy(f->b + f->len, footer, strlen(footer));
        f->len += strlen(footer);
        f->b[f->len++] = '\n';
    }
}

static struct db_tz *parse_ok(const struct file *f)
{
    char err[DB_TZ_ERROR_SIZE];
    struct db_tz *z = db_tz_parse(f->b, f->len, err, sizeof(err));
    if (z == NULL)
        fail_msg("parse: %s", err);
    return z;
}

static void expect_parse_error(const struct file *f, const char *needle)
{
    char err[DB_TZ_ERROR_SIZE] = "";
    struct db_tz *z = db_tz_parse(f->b, f->len, err, sizeof(err));
    if (z != NULL || strstr(err, needle) == NULL)
        fail_msg("expected an error with \"%s\", got \"%s\"", needle, err);
}

/* Version 1: 32-bit instants, no footer: the last type holds for ever after. */
static void test_version1(void **state)
{
    int64_t times[] = {-100000, 1000000};
    uint8_t idx[] = {1, 2};
    int32_t utoff[] = {1234, 3600, 7200};
    uint8_t isdst[] = {0, 0, 1};
    struct file f;
    tzif(&f, '\0', times, idx, 2, utoff, isdst, 3, "");
    struct db_tz *z = parse_ok(&f);
    expect_span(z, -200000, INT64_MIN, -100000, 1234, 1234, 0); /* before: type 0 */
    expect_span(z, 0, -100000, 1000000, 1234, 3600, 0);
    expect_span(z, 1000000, 1000000, INT64_MAX, 3600, 7200, 1);
    expect_span(z, utc(2500, 1, 1, 0, 0, 0), 1000000, INT64_MAX, 3600, 7200, 1);
    db_tz_free(z);
}

/* A version 2 file with no transitions, all in its footer, reads as New York's own file. */
static void test_footer_only(void **state)
{
    int32_t utoff[] = {-18000};
    uint8_t isdst[] = {0};
    struct file f;
    tzif(&f, '2', NULL, NULL, 0, utoff, isdst, 1, "EST5EDT,M3.2.0,M11.1.0");
    struct db_tz *z = parse_ok(&f), *ny = zone("America/New_York");
    for (int64_t t = utc(2020, 1, 1, 0, 0, 0); t < utc(2040, 1, 1, 0, 0, 0); t += 3 * 3600 + 7) {
        struct db_tz_span a, b;
        db_tz_span(z, t, &a);
        db_tz_span(ny, t, &b);
        if (a.start != b.start || a.end != b.end || a.utoff != b.utoff || a.isdst != b.isdst ||
            a.prev_utoff != b.prev_utoff)
            fail_msg("at %lld the footer and the file differ", (long long)t);
    }
    db_tz_free(z);
    db_tz_free(ny);
}

/* A file's transitions, then its footer: the footer's first change after the last transition
 * ends the span that transition began, and prev_utoff at that transition is the file's. */
static void test_transitions_then_footer(void **state)
{
    int64_t times[] = {utc(2030, 3, 31, 1, 0, 0)};
    uint8_t idx[] = {1};
    int32_t utoff[] = {3600, 7200};
    uint8_t isdst[] = {0, 1};
    struct file f;
    tzif(&f, '2', times, idx, 1, utoff, isdst, 2, "CET-1CEST,M3.5.0,M10.5.0/3");
    struct db_tz *z = parse_ok(&f);
    int64_t end = utc(2030, 10, 27, 1, 0, 0);
    expect_span(z, times[0], times[0], end, 3600, 7200, 1);
    expect_span(z, end, end, utc(2031, 3, 30, 1, 0, 0), 7200, 3600, 0);
    expect_span(z, times[0] - 1, INT64_MIN, times[0], 3600, 3600, 0);
    db_tz_free(z);
}

/* A date and hour in UTC, for the table below. */
struct hour {
    int y, mo, d, h;
};

#define AT(x) utc((x).y, (x).mo, (x).d, (x).h, 0, 0)

/* J and zero-based day forms, version 3 hours, the default DST offset (+1 h) and time (02:00):
 * for each footer (standard time +0), the DST span holding `at`. */
static const struct form {
    const char *footer;
    char version;
    struct hour at, start, end;
    int32_t dst_utoff;
} forms[] = {
    /* J60 is 1 March in every year; J300 is 27 October (29 February never counted); the end
     * is given in DST (+1): 26 October 23:00 UTC */
    {"AAA0BBB,J60/0,J300/0", '2', {2028, 6, 1, 0}, {2028, 3, 1, 0}, {2028, 10, 26, 23}, 3600},
    /* zero-based days count 29 February: in 2028 day 59 is 29 February, day 299 26 October;
     * in 2027 they are 1 March and 27 October */
    {"AAA0BBB,59/0,299/0", '2', {2028, 6, 1, 0}, {2028, 2, 29, 0}, {2028, 10, 25, 23}, 3600},
    {"AAA0BBB,59/0,299/0", '2', {2027, 6, 1, 0}, {2027, 3, 1, 0}, {2027, 10, 26, 23}, 3600},
    /* version 3: -1 h on the last Sunday of March 2030 (the 31st) is 30 March 23:00; 25 h on
     * the last Sunday of October (the 27th), in DST, is 28 October 01:00 local, 00:00 UTC */
    {"<+00>0<+01>,M3.5.0/-1,M10.5.0/25",
     '3',
     {2030, 6, 1, 0},
     {2030, 3, 30, 23},
     {2030, 10, 28, 0},
     3600},
    /* default times (02:00), an explicit DST offset of +2: the end at 02:00 DST is 00:00 UTC */
    {"XXX0YYY-2,M3.5.0,M10.5.0", '2', {2030, 6, 1, 0}, {2030, 3, 31, 2}, {2030, 10, 27, 0}, 7200},
};

static void test_footer_forms(void **state)
{
    int32_t utoff[] = {0};
    uint8_t isdst[] = {0};
    struct file f;
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        const struct form *x = &forms[i];
        tzif(&f, x->version, NULL, NULL, 0, utoff, isdst, 1, x->footer);
        struct db_tz *z = parse_ok(&f);
        expect_span(z, AT(x->at), AT(x->start), AT(x->end), 0, x->dst_utoff, 1);
        db_tz_free(z);
    }
    /* DST all year (zic's form "EST5EDT,0/0,J365/25"): always +1 h from -5. */
    tzif(&f, '2', NULL, NULL, 0, utoff, isdst, 1, "EST5EDT,0/0,J365/25");
    struct db_tz *z = parse_ok(&f);
    for (int64_t t = utc(2030, 1, 1, 0, 0, 0); t < utc(2034, 1, 1, 0, 0, 0); t += 86399)
        assert_int_equal(db_tz_offset(z, t, NULL), -14400);
    db_tz_free(z);
}

static void test_bad_files(void **state)
{
    int64_t times[] = {10, 20};
    uint8_t idx[] = {0, 1};
    int32_t utoff[] = {0, 3600};
    uint8_t isdst[] = {0, 1};
    struct file f, good;
    memcpy(f.b, "hello, world\n", 13), f.len = 13;
    expect_parse_error(&f, "no TZif header");
    tzif(&good, '2', times, idx, 2, utoff, isdst, 2, "CET-1CEST,M3.5.0,M10.5.0/3");
    for (f = good; f.len-- > 0;) /* every cut of a good file is refused, none crashes */
        expect_parse_error(&f, "not a TZif file");
    f = good, f.b[4] = 'x';
    expect_parse_error(&f, "unknown version");
    idx[1] = 2;
    tzif(&f, '2', times, idx, 2, utoff, isdst, 2, "");
    expect_parse_error(&f, "bad transition 1");
    idx[1] = 1, times[1] = 10;
    tzif(&f, '2', times, idx, 2, utoff, isdst, 2, "");
    expect_parse_error(&f, "bad transition 1"); /* not ascending */
    times[1] = 20, utoff[1] = 100000;
    tzif(&f, '2', times, idx, 2, utoff, isdst, 2, "");
    expect_parse_error(&f, "bad local time type 1");
    utoff[1] = 3600;
    static const char *const footers[] = {"EST5EDT",
                                          "E5",
                                          "EST",
                                          "EST5EDT,M13.1.0,M11.1.0",
                                          "EST5EDT,M3.2.0",
                                          "EST5EDT,M3.2.0,M11.1.0/168",
                                          "EST25",
                                          "<E>5",
                                          "EST5EDT,J0,J365",
                                          "EST5 "};
    for (size_t i = 0; i < sizeof(footers) / sizeof(footers[0]); i++) {
        tzif(&f, '2', times, idx, 2, utoff, isdst, 2, footers[i]);
        expect_parse_error(&f, "footer TZ string");
    }
    f = good;
    f.b[44 + 10 + 31] = 1; /* the 64-bit header's leap count (after 10 bytes of version 1): 1 */
    expect_parse_error(&f, "leap seconds");
}

/* ---- Every zone against the C library --------------------------------------------------- */

#define STEP (23 * 86400 + 1020)

static int zones_checked;

/* Checks zone name against localtime_r: at every span boundary from 1900 to 2200 (the offset
 * on each side) and at instants every 23 days and 17 minutes between. */
static void compare_with_libc(const char *name)
{
    char err[DB_TZ_ERROR_SIZE], tz[DB_TZ_NAME_MAX + 2];
    struct db_tz *z = db_tz_load(name, err, sizeof(err));
    if (z == NULL)
        fail_msg("%s: %s", name, err);
    snprintf(tz, sizeof(tz), ":%s", name);
    setenv("TZ", tz, 1);
    tzset();
    for (int64_t t = utc(1900, 1, 1, 0, 0, 0), end = utc(2200, 1, 1, 0, 0, 0); t < end;) {
        struct db_tz_span s;
        struct tm tm;
        time_t tt = (time_t)t;
        db_tz_span(z, t, &s);
        localtime_r(&tt, &tm);
        if (tm.tm_gmtoff != s.utoff || (tm.tm_isdst > 0) != s.isdst)
            fail_msg("%s at %lld: libc %ld dst %d, here %d dst %d", name, (long long)t,
                     tm.tm_gmtoff, tm.tm_isdst, s.utoff, s.isdst);
        assert_true(s.start <= t && t < s.end);
        t = s.end < t + STEP ? s.end : t + STEP;
        if (t == s.end && t < end) { /* the offset just before a boundary is prev_utoff */
            struct db_tz_span next;
            db_tz_span(z, t, &next);
            assert_int_equal(next.prev_utoff, s.utoff);
        }
    }
    db_tz_free(z);
    zones_checked++;
}

static int visit(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    const char *name = path + strlen(DB_TZ_DIR) + 1;
    char head[5] = "";
    FILE *f;
    if (flag != FTW_F || strncmp(name, "posix/", 6) == 0 || strncmp(name, "right/", 6) == 0 ||
        strchr(name, '.') != NULL || strcmp(name, "localtime") == 0)
        return 0;
    if ((f = fopen(path, "rb")) == NULL)
        return 0;
    size_t got = fread(head, 1, 4, f);
    fclose(f);
    if (got == 4 && memcmp(head, "TZif", 4) == 0)
        compare_with_libc(name);
    return 0;
}

static void test_every_zone_matches_libc(void **state)
{
    test_tzdata_installed(state);
    nftw(DB_TZ_DIR, visit, 16, FTW_PHYS);
    if (zones_checked < 300)
        fail_msg("only %d zones under %s: is tzdata installed whole?", zones_checked, DB_TZ_DIR);
    unsetenv("TZ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tzdata_installed),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_berlin_2026),
        cmocka_unit_test(test_new_york_2026),
        cmocka_unit_test(test_footer_far_future),
        cmocka_unit_test(test_no_dst),
        cmocka_unit_test(test_version1),
        cmocka_unit_test(test_footer_only),
        cmocka_unit_test(test_transitions_then_footer),
        cmocka_unit_test(test_footer_forms),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_every_zone_matches_libc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
