/* Cron expressions (db/cron.h): the parser, with messages naming the field at fault and the
 * check that the day-of-month and month fields name a date that exists; and the next fire,
 * found span by span of the zone's constant offset, and within a span field by field on wall
 * time. Time zone files are db/tzfile.c's; calendar arithmetic is db/civil.h's. */
#include "db/cron.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "db/civil.h"

#define INSTANT_MIN INT64_C(-62135596800) /* 0001-01-01T00:00:00Z */
#define INSTANT_MAX INT64_C(253402300799) /* 9999-12-31T23:59:59Z */
#define HORIZON     ((int64_t)DB_CRON_HORIZON_YEARS * 366 * DB_CIVIL_DAY)
#define QUOTE_MAX   24 /* longest piece of the text quoted in a message */

enum { F_SECOND, F_MINUTE, F_HOUR, F_DOM, F_MONTH, F_DOW, FIELDS };

static const struct field {
    const char *what;
    int lo, hi;        /* values accepted */
    int star_hi;       /* the last value of '*' (day of week: 6, Saturday; 7 is Sunday again) */
    const char *names; /* three-letter names of lo, lo + 1, ... (NULL: numbers only) */
    const char *hint;  /* what a value is, for "is not ..." */
} fields[FIELDS] = {
    {"second", 0, 59, 59, NULL, "a number"},
    {"minute", 0, 59, 59, NULL, "a number"},
    {"hour", 0, 23, 23, NULL, "a number"},
    {"day of month", 1, 31, 31, NULL, "a number"},
    {"month", 1, 12, 12, "JANFEBMARAPRMAYJUNJULAUGSEPOCTNOVDEC", "a month (1-12 or JAN-DEC)"},
    {"day of week", 0, 7, 6, "SUNMONTUEWEDTHUFRISAT", "a day of the week (0-7 or SUN-SAT)"},
};

static const struct macro {
    const char *name, *fields;
} macros[] = {
    {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
};

/* One field being parsed: where its messages go and how they name it. */
struct parse {
    char *err;
    size_t errsize;
    int place; /* the field's number in the text, from 1 */
    const struct field *f;
};

/* Writes "field N (what): <message>" into err; returns -1. */
static int field_error(const struct parse *ps, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int field_error(const struct parse *ps, const char *fmt, ...)
{
    int n = snprintf(ps->err, ps->errsize, "field %d (%s): ", ps->place, ps->f->what);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->errsize)
        vsnprintf(ps->err + n, ps->errsize - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The length to quote of s (len bytes), and whether it was cut ("..." follows). */
#define QUOTED(s, len)                                                                             \
    (int)((len) > QUOTE_MAX ? QUOTE_MAX : (len)), (s), (len) > QUOTE_MAX ? "..." : ""

/* A value of the field: digits, or one of its names. */
static int value(const struct parse *ps, const char *s, size_t len, int *v)
{
    const struct field *f = ps->f;
    if (len == 0)
        return field_error(ps, "a value is missing (on a side of '-', or before '/')");
    if (strspn(s, "0123456789") >= len) {
        *v = 0;
        for (size_t i = 0; i < len && *v <= f->hi; i++)
            *v = *v * 10 + (s[i] - '0');
        if (*v < f->lo || *v > f->hi)
            return field_error(ps, "%.*s%s is out of range %d-%d", QUOTED(s, len), f->lo, f->hi);
        return 0;
    }
    for (size_t i = 0; f->names != NULL && len == 3 && f->names[3 * i] != '\0'; i++)
        if (strncasecmp(s, f->names + 3 * i, 3) == 0) {
            *v = f->lo + (int)i;
            return 0;
        }
    return field_error(ps, "'%.*s%s' is not %s", QUOTED(s, len), f->hint);
}

/* One element of a list: *, a, a-b, with /step or not; its values set in *bits. */
static int element(const struct parse *ps, const char *s, size_t len, uint64_t *bits)
{
    const struct field *f = ps->f;
    const char *slash = memchr(s, '/', len), *dash;
    size_t base = slash ? (size_t)(slash - s) : len;
    int a, b, step = 1;
    if (len == 0)
        return field_error(ps, "an empty element in a list (two commas, or one at an end)");
    if (base == 1 && s[0] == '*') {
        a = f->lo, b = f->star_hi;
    } else if ((dash = memchr(s, '-', base)) != NULL) {
        if (value(ps, s, (size_t)(dash - s), &a) < 0 ||
            value(ps, dash + 1, base - (size_t)(dash - s) - 1, &b) < 0)
            return -1;
        if (a > b)
            return field_error(ps, "range %.*s%s runs backwards (write it upwards, or as a list)",
                               QUOTED(s, base));
    } else {
        if (value(ps, s, base, &a) < 0)
            return -1;
        b = slash ? f->star_hi : a; /* a/n: from a to the field's end */
        if (b < a)
            b = a;
    }
    if (slash) {
        size_t n = len - base - 1;
        const char *t = slash + 1;
        step = 0;
        if (n == 0 || strspn(t, "0123456789") < n)
            return field_error(ps, "step '%.*s%s' is not a number", QUOTED(t, n));
        for (size_t i = 0; i < n && step <= f->hi; i++)
            step = step * 10 + (t[i] - '0');
        if (step < 1 || step > f->hi)
            return field_error(ps, "step %.*s%s is out of range 1-%d", QUOTED(t, n), f->hi);
    }
    for (int v = a; v <= b; v += step)
        *bits |= UINT64_C(1) << v;
    return 0;
}

/* The field s (len bytes, no blanks) into *bits. */
static int field(const struct parse *ps, const char *s, size_t len, uint64_t *bits)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return field_error(ps, "byte %zu (0x%02x) is not allowed here", i + 1,
                               (unsigned char)s[i]);
    *bits = 0;
    for (const char *p = s, *end = s + len;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (element(ps, p, n, bits) < 0)
            return -1;
        if (comma == NULL)
            return 0;
        p = comma + 1;
    }
}

/* Refuses day-of-month and month fields that name no date (30 February): in Vixie's "both"
 * mode the day must be one of the days of the month named. An exact check, no search: every
 * month comes every year, 29 February every leap year, and each date on every weekday. */
static int check_dates(const struct db_cron *c, int dom_place, char *err, size_t errsize)
{
    int longest = 0, first = __builtin_ctz(c->dom); /* dom has bits 1-31 only, at least one */
    if (!(c->flags & (DB_CRON_DOM_STAR | DB_CRON_DOW_STAR)))
        return 0; /* either matches: every week has its day of the week */
    for (int m = 1; m <= 12; m++) {
        int days = db_civil_month_days(2000, m); /* a leap year: February has 29 */
        if (c->month >> m & 1 && days > longest)
            longest = days;
    }
    if (first <= longest)
        return 0;
    snprintf(err, errsize,
             "field %d (day of month) and field %d (month): the months named have at most %d "
             "days, so day %d never comes and the expression can never fire",
             dom_place, dom_place + 1, longest, first);
    return -1;
}

/* The n (5 or 6) fields at tok/len into *out. */
static int fields_parse(const char *const *tok, const size_t *len, int n, struct db_cron *out,
                        char *err, size_t errsize)
{
    uint64_t bits[FIELDS] = {1, 0, 0, 0, 0, 0}; /* five fields: second 0 */
    int first = n == 6 ? F_SECOND : F_MINUTE;
    memset(out, 0, sizeof(*out));
    for (int i = first; i < FIELDS; i++) {
        struct parse ps = {err, errsize, i - first + 1, &fields[i]};
        if (field(&ps, tok[i - first], len[i - first], &bits[i]) < 0)
            return -1;
        char star = tok[i - first][0] == '*';
        if (star && i <= F_HOUR)
            out->flags |= DB_CRON_WILDCARD;
        out->flags |= star && i == F_DOM ? DB_CRON_DOM_STAR : 0;
        out->flags |= star && i == F_DOW ? DB_CRON_DOW_STAR : 0;
    }
    out->second = bits[F_SECOND];
    out->minute = bits[F_MINUTE];
    out->hour = (uint32_t)bits[F_HOUR];
    out->dom = (uint32_t)bits[F_DOM];
    out->month = (uint16_t)bits[F_MONTH];
    out->dow = (uint8_t)((bits[F_DOW] | bits[F_DOW] >> 7) & 0x7f); /* 7 is Sunday, 0 */
    return check_dates(out, F_DOM - first + 1, err, errsize);
}

/* A macro, alone in the text (s, len bytes): its fields into *out. */
static int macro(const char *s, size_t len, struct db_cron *out, char *err, size_t errsize)
{
    for (size_t i = 0; i < sizeof(macros) / sizeof(macros[0]); i++)
        if (strlen(macros[i].name) == len && strncasecmp(s, macros[i].name, len) == 0)
            return db_cron_parse(macros[i].fields, out, err, errsize);
    int shown = 0; /* quoted while printable, at most QUOTE_MAX bytes */
    while ((size_t)shown < len && shown < QUOTE_MAX && (unsigned char)s[shown] >= 0x21 &&
           (unsigned char)s[shown] <= 0x7e)
        shown++;
    if (len == 7 && strncasecmp(s, "@reboot", 7) == 0)
        snprintf(err, errsize, "@reboot names no time: a schedule fires at times");
    else
        snprintf(err, errsize,
                 "'%.*s%s' is not a macro (@yearly, @annually, @monthly, @weekly, @daily, "
                 "@midnight or @hourly)",
                 shown, s, (size_t)shown < len ? "..." : "");
    return -1;
}

int db_cron_parse(const char *text, struct db_cron *out, char *err, size_t errsize)
{
    const char *tok[FIELDS + 1];
    size_t len[FIELDS + 1], total = strlen(text);
    int n = 0;
    if (total > DB_CRON_TEXT_MAX) {
        snprintf(err, errsize, "a cron expression has at most %d bytes", DB_CRON_TEXT_MAX);
        return -1;
    }
    for (const char *p = text; *p != '\0';) {
        size_t blank = strspn(p, " \t"), word;
        p += blank;
        if ((word = strcspn(p, " \t")) == 0)
            break;
        if (n < FIELDS + 1)
            tok[n] = p, len[n] = word;
        n++;
        p += word;
    }
    if (n >= 1 && tok[0][0] == '@') {
        if (n == 1)
            return macro(tok[0], len[0], out, err, errsize);
        snprintf(err, errsize, "a macro such as @daily stands alone, without fields");
        return -1;
    }
    if (n != 5 && n != 6) {
        snprintf(err, errsize,
                 "expected 5 fields (minute hour day-of-month month day-of-week), 6 with a "
                 "leading seconds field, or a macro such as @daily; found %d",
                 n);
        return -1;
    }
    return fields_parse(tok, len, n, out, err, errsize);
}

/* ---- The next fire ---------------------------------------------------------------------- */

/* A wall-clock time: a date and a time of day, in no zone. */
struct wall {
    int64_t y;
    int mon, day, hour, min, sec;
};

static void wall_of(int64_t s, struct wall *w)
{
    int64_t days = db_civil_floor_div(s, DB_CIVIL_DAY), r = s - days * DB_CIVIL_DAY;
    db_civil_from_days(days, &w->y, &w->mon, &w->day);
    w->hour = (int)(r / 3600);
    w->min = (int)(r / 60 % 60);
    w->sec = (int)(r % 60);
}

static int64_t wall_seconds(const struct wall *w)
{
    return db_civil_days(w->y, w->mon, w->day) * DB_CIVIL_DAY + w->hour * 3600 + w->min * 60 +
           w->sec;
}

/* The smallest value at or above from whose bit is set in mask; -1 when none. */
static int next_bit(uint64_t mask, int from)
{
    uint64_t m = from < 64 ? mask >> from : 0;
    return m ? from + __builtin_ctzll(m) : -1;
}

static void next_month(struct wall *w)
{
    w->day = 1;
    w->hour = w->min = w->sec = 0;
    if (++w->mon > 12) {
        w->mon = 1;
        w->y++;
    }
}

static void next_day(struct wall *w)
{
    w->hour = w->min = w->sec = 0;
    if (++w->day > db_civil_month_days(w->y, w->mon))
        next_month(w);
}

static void next_hour(struct wall *w)
{
    w->min = w->sec = 0;
    if (++w->hour > 23)
        next_day(w);
}

static void next_minute(struct wall *w)
{
    w->sec = 0;
    if (++w->min > 59)
        next_hour(w);
}

/* Does the day of w match (Vixie's rule, db/cron.h)? */
static int day_matches(const struct db_cron *c, const struct wall *w)
{
    int dom = c->dom >> w->day & 1;
    int dow = c->dow >> db_civil_weekday(db_civil_days(w->y, w->mon, w->day)) & 1;
    return c->flags & (DB_CRON_DOM_STAR | DB_CRON_DOW_STAR) ? dom && dow : dom || dow;
}

/* Moves *w to the first time at or after it that c may name, one field at a time: 0 when w
 * matches c; 1 when a field had to carry into a larger one (check again). */
static int settle(const struct db_cron *c, struct wall *w)
{
    int v = next_bit(c->month, w->mon);
    if (v < 0) {
        w->mon = 12; /* next_month: to January of the next year */
        next_month(w);
        return 1;
    }
    if (v != w->mon) {
        w->mon = v;
        w->day = 1;
        w->hour = w->min = w->sec = 0;
    }
    if (c->flags & (DB_CRON_DOM_STAR | DB_CRON_DOW_STAR)) { /* the day of the month must match */
        if ((v = next_bit(c->dom, w->day)) < 0 || v > db_civil_month_days(w->y, w->mon)) {
            next_month(w);
            return 1;
        }
        if (v != w->day) {
            w->day = v;
            w->hour = w->min = w->sec = 0;
        }
    }
    if (!day_matches(c, w) || (v = next_bit(c->hour, w->hour)) < 0) {
        next_day(w);
        return 1;
    }
    if (v != w->hour) {
        w->hour = v;
        w->min = w->sec = 0;
    }
    if ((v = next_bit(c->minute, w->min)) < 0) {
        next_hour(w);
        return 1;
    }
    if (v != w->min) {
        w->min = v;
        w->sec = 0;
    }
    if ((v = next_bit(c->second, w->sec)) < 0) {
        next_minute(w);
        return 1;
    }
    w->sec = v;
    return 0;
}

/* The first wall time in [lo, hi) that c names, into *out: 1, or 0 when there is none. */
static int wall_next(const struct db_cron *c, int64_t lo, int64_t hi, int64_t *out)
{
    struct wall w;
    if (lo >= hi)
        return 0;
    wall_of(lo, &w);
    for (;;) {
        int moved = settle(c, &w);
        int64_t at = wall_seconds(&w);
        if (at >= hi)
            return 0;
        if (!moved) {
            *out = at;
            return 1;
        }
    }
}

/* Span by span of constant offset: a span's wall times are its instants plus its offset. At a
 * span that starts with a gap (the clock jumped forward), a fixed-time expression that names a
 * skipped wall time fires at the span's first instant; in a span that starts with an overlap
 * (the clock went back), a fixed-time expression skips the wall times it already had. */
int db_cron_next(const struct db_cron *c, const struct db_tz *z, int64_t after, int64_t *next)
{
    int fixed = !(c->flags & DB_CRON_WILDCARD);
    int64_t limit, w;
    if (after < INSTANT_MIN || after > INSTANT_MAX)
        return 0;
    limit = after > INSTANT_MAX - HORIZON ? INSTANT_MAX + 1 : after + HORIZON;
    for (int64_t t = after + 1; t < limit;) {
        struct db_tz_span s;
        db_tz_span(z, t, &s);
        int64_t end = s.end < limit ? s.end : limit, lo = t + s.utoff;
        if (end <= t)
            return 0; /* a span that does not hold t: never from db_tz_span in years 1-9999 */
        if (fixed && s.start == t && s.utoff > s.prev_utoff &&
            wall_next(c, t + s.prev_utoff, t + s.utoff, &w)) {
            *next = t;
            return 1;
        }
        if (fixed && s.utoff < s.prev_utoff && lo < s.start + s.prev_utoff)
            lo = s.start + s.prev_utoff;
        if (wall_next(c, lo, end + s.utoff, &w)) {
            *next = w - s.utoff;
            return 1;
        }
        t = end;
    }
    return 0;
}
