/* The POSIX TZ rule of a TZif file's footer (RFC 8536 section 3.3, with its version 3
 * extensions): parsed once into a value, then the span of constant offset it gives any instant.
 * Internal to db/tzfile.c, which reads the file and asks this rule only past the file's last
 * transition; nothing else includes it. */
#ifndef DB_TZRULE_H
#define DB_TZRULE_H

#include <stddef.h>
#include <stdint.h>

#include "db/tzfile.h"

#define DB_TZ_RULE_MAX 256 /* longest footer string read */

enum db_tz_rule_kind {
    DB_TZ_RULE_NONE,  /* empty footer: the file's last type holds after its last transition */
    DB_TZ_RULE_FIXED, /* one offset, no daylight-saving time ("IST-5:30") */
    DB_TZ_RULE_DST,   /* standard and daylight-saving time, changing by the two dates */
};

/* A day of the year a change happens on, and the local time of day it happens at. */
struct db_tz_date {
    char form; /* 'J': day a (1-365, 29 February never counted); 'N': day a (0-365, counted);
                  'M': weekday c (0 Sunday) of week b (1-4, 5 the last) of month a */
    int a, b, c;
    int32_t time; /* seconds after local midnight, -167 h to 167 h (version 3) */
};

struct db_tz_rule {
    enum db_tz_rule_kind kind;
    int32_t std_utoff, dst_utoff; /* seconds east of UTC */
    struct db_tz_date start, end; /* start: into DST, in standard local time; end: out, in DST
                                     local time (either order in the year: the southern
                                     hemisphere's DST spans the new year) */
};

/* Parses the footer text s (len bytes, no newlines) into *r. 0, or -1 with the reason in err
 * (errsize bytes, NUL-terminated). A DST zone without its two dates is refused (POSIX leaves
 * its rule to the implementation; zic always writes them). */
int db_tz_rule_parse(const char *s, size_t len, struct db_tz_rule *r, char *err, size_t errsize);

/* The span of the DST rule r (kind DB_TZ_RULE_DST) holding instant t: bounded by the rule's
 * changes before and after t, for any t within years 1 to 9999 (prev_utoff: the offset before
 * start). */
void db_tz_rule_span(const struct db_tz_rule *r, int64_t t, struct db_tz_span *out);

#endif
