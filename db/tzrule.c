/* The POSIX TZ rule of a TZif footer: "std offset [dst [offset] ,date[/time],date[/time]]" with
 * names alphabetic or <quoted>, dates Jn, n and Mm.w.d, and version 3's rule times of -167 to
 * 167 hours. Parsing, and the changes it makes in the years around an instant; the file itself
 * is db/tzfile.c's. */
#include "db/tzrule.h"

#include <stdio.h>
#include <string.h>

#include "db/civil.h"

struct cursor {
    const char *begin, *p, *end;
    char *err;
    size_t errsize;
};

static int fail(struct cursor *c, const char *what)
{
    snprintf(c->err, c->errsize, "footer TZ string: %s at byte %zu", what,
             (size_t)(c->p - c->begin));
    return -1;
}

static int at(const struct cursor *c, char ch)
{
    return c->p < c->end && *c->p == ch;
}

static int digit(const struct cursor *c)
{
    return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static int alpha(char ch)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
}

/* An unsigned decimal of at most 3 digits into *v; -1 when there is none. */
static int number(struct cursor *c, int *v)
{
    if (!digit(c))
        return -1;
    *v = 0;
    for (int n = 0; digit(c); n++, c->p++) {
        if (n == 3)
            return -1;
        *v = *v * 10 + (*c->p - '0');
    }
    return 0;
}

/* A zone abbreviation: 3 or more letters, or <3 or more of [A-Za-z0-9+-]>. */
static int name(struct cursor *c)
{
    const char *s = c->p;
    if (at(c, '<')) {
        for (s = ++c->p; c->p < c->end && *c->p != '>'; c->p++)
            if (!alpha(*c->p) && !(*c->p >= '0' && *c->p <= '9') && *c->p != '+' && *c->p != '-')
                return fail(c, "bad character in a <quoted> zone abbreviation");
        if (!at(c, '>') || c->p - s < 3)
            return fail(c, "a <quoted> zone abbreviation needs 3 or more characters and a '>'");
        c->p++;
        return 0;
    }
    while (c->p < c->end && alpha(*c->p))
        c->p++;
    return c->p - s >= 3 ? 0 : fail(c, "a zone abbreviation needs 3 or more letters");
}

/* [+-]hh[:mm[:ss]] with hours at most max_hours, into *secs (signed). */
static int hms(struct cursor *c, int max_hours, int32_t *secs)
{
    int sign = 1, h, m = 0, s = 0;
    if (at(c, '+') || at(c, '-'))
        sign = *c->p++ == '-' ? -1 : 1;
    if (number(c, &h) < 0 || h > max_hours)
        return fail(c, "expected hours");
    if (at(c, ':')) {
        c->p++;
        if (number(c, &m) < 0 || m > 59)
            return fail(c, "expected minutes (0-59)");
        if (at(c, ':')) {
            c->p++;
            if (number(c, &s) < 0 || s > 59)
                return fail(c, "expected seconds (0-59)");
        }
    }
    *secs = sign * (h * 3600 + m * 60 + s);
    return 0;
}

/* ",date[/time]" into *d; the time defaults to 02:00. */
static int date(struct cursor *c, struct db_tz_date *d)
{
    if (!at(c, ','))
        return fail(c, "expected ',' before a change date");
    c->p++;
    memset(d, 0, sizeof(*d));
    d->time = 2 * 3600;
    if (at(c, 'M')) {
        c->p++;
        d->form = 'M';
        if (number(c, &d->a) < 0 || d->a < 1 || d->a > 12 || !at(c, '.'))
            return fail(c, "expected Mm.w.d with month 1-12");
        c->p++;
        if (number(c, &d->b) < 0 || d->b < 1 || d->b > 5 || !at(c, '.'))
            return fail(c, "expected Mm.w.d with week 1-5");
        c->p++;
        if (number(c, &d->c) < 0 || d->c > 6)
            return fail(c, "expected Mm.w.d with weekday 0-6");
    } else if (at(c, 'J')) {
        c->p++;
        d->form = 'J';
        if (number(c, &d->a) < 0 || d->a < 1 || d->a > 365)
            return fail(c, "expected Jn with day 1-365");
    } else {
        d->form = 'N';
        if (number(c, &d->a) < 0 || d->a > 365)
            return fail(c, "expected a day of the year 0-365");
    }
    if (at(c, '/')) {
        c->p++;
        return hms(c, 167, &d->time);
    }
    return 0;
}

int db_tz_rule_parse(const char *s, size_t len, struct db_tz_rule *r, char *err, size_t errsize)
{
    char text[DB_TZ_RULE_MAX + 1];
    struct cursor c = {text, text, text, err, errsize}; /* end: once len is known to fit */
    int32_t off;
    memset(r, 0, sizeof(*r));
    if (len == 0)
        return 0; /* DB_TZ_RULE_NONE */
    if (len > DB_TZ_RULE_MAX || memchr(s, '\0', len) != NULL) {
        snprintf(err, errsize, "footer TZ string: longer than %d bytes or holding a NUL",
                 DB_TZ_RULE_MAX);
        return -1;
    }
    memcpy(text, s, len);
    text[len] = '\0';
    c.end = text + len;
    if (name(&c) < 0 || hms(&c, 24, &off) < 0)
        return -1;
    r->kind = DB_TZ_RULE_FIXED;
    r->std_utoff = -off; /* POSIX offsets count hours west */
    if (c.p == c.end)
        return 0;
    if (name(&c) < 0)
        return -1;
    r->kind = DB_TZ_RULE_DST;
    r->dst_utoff = r->std_utoff + 3600;
    if (at(&c, '+') || at(&c, '-') || digit(&c)) {
        if (hms(&c, 24, &off) < 0)
            return -1;
        r->dst_utoff = -off;
    }
    if (c.p == c.end)
        return fail(&c, "daylight-saving time without its change dates");
    if (date(&c, &r->start) < 0 || date(&c, &r->end) < 0)
        return -1;
    return c.p == c.end ? 0 : fail(&c, "unexpected text after the rule");
}

/* The UTC instant at which date d of year y happens, given in local time of offset utoff. */
static int64_t change_at(const struct db_tz_date *d, int64_t y, int32_t utoff)
{
    int64_t day;
    if (d->form == 'J') {
        day = db_civil_days(y, 1, 1) + d->a - 1 + (db_civil_leap(y) && d->a >= 60);
    } else if (d->form == 'N') {
        day = db_civil_days(y, 1, 1) + d->a;
    } else {
        int64_t first = db_civil_days(y, d->a, 1);
        int k = (d->c - db_civil_weekday(first) + 7) % 7 + 7 * (d->b - 1);
        if (k >= db_civil_month_days(y, d->a))
            k -= 7; /* week 5: the last such weekday of the month */
        day = first + k;
    }
    return day * DB_CIVIL_DAY + d->time - utoff;
}

struct change {
    int64_t at;
    int dst; /* the state it changes to */
};

#define CHANGE_YEARS                                                                               \
    5 /* the year of t and two on each side: changes lie within a week of their                    \
         year (rule times of at most 167 hours), so t has one before and after */

void db_tz_rule_span(const struct db_tz_rule *r, int64_t t, struct db_tz_span *out)
{
    struct change ch[2 * CHANGE_YEARS], x;
    int64_t y;
    int m, d, n = 0, k = 0;
    db_civil_from_days(db_civil_floor_div(t + r->std_utoff, DB_CIVIL_DAY), &y, &m, &d);
    for (int64_t yy = y - CHANGE_YEARS / 2; yy <= y + CHANGE_YEARS / 2; yy++) {
        ch[n++] = (struct change){change_at(&r->start, yy, r->std_utoff), 1};
        ch[n++] = (struct change){change_at(&r->end, yy, r->dst_utoff), 0};
    }
    for (int i = 1; i < n; i++) /* insertion sort, stable: a later year's change wins a tie */
        for (int j = i; j > 0 && ch[j - 1].at > ch[j].at; j--)
            x = ch[j], ch[j] = ch[j - 1], ch[j - 1] = x;
    for (int i = 1; i < n; i++) /* changes at one instant: the last one stands */
        ch[ch[k].at == ch[i].at ? k : ++k] = ch[i];
    n = k + 1;
    for (k = 0; k + 1 < n && ch[k + 1].at <= t; k++)
        ;
    out->start = ch[k].at;
    out->end = k + 1 < n ? ch[k + 1].at : INT64_MAX;
    out->isdst = ch[k].dst;
    out->utoff = ch[k].dst ? r->dst_utoff : r->std_utoff;
    out->prev_utoff = k == 0 ? out->utoff : ch[k - 1].dst ? r->dst_utoff : r->std_utoff;
}
