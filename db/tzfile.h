/* Time zones from the system's time-zone database: a zone is loaded by its IANA name from its
 * TZif file (RFC 8536, versions 1 to 4) under DB_TZ_DIR (Debian package tzdata), and maps a UTC
 * instant to its UTC offset, with the POSIX TZ rule of the file's footer for instants past the
 * file's last transition (slim and fat files alike). rowlock ships no zone data of its own. A
 * loaded zone is immutable: any number of threads may read it at once. What a schedule fires at
 * is db/cron.h's. */
#ifndef DB_TZFILE_H
#define DB_TZFILE_H

#include <stddef.h>
#include <stdint.h>

#define DB_TZ_DIR        "/usr/share/zoneinfo"
#define DB_TZ_NAME_MAX   128          /* longest zone name accepted (the longest IANA name: 32) */
#define DB_TZ_FILE_MAX   (256 * 1024) /* largest TZif file read (the largest in tzdata: ~4 KiB) */
#define DB_TZ_ERROR_SIZE 320          /* enough for every message written into err */

struct db_tz;

/* The stretch of time around an instant over which a zone's offset is constant. */
struct db_tz_span {
    int64_t start;      /* first instant of the span (UTC seconds), INT64_MIN when unbounded */
    int64_t end;        /* first instant after it, INT64_MAX when unbounded */
    int32_t utoff;      /* seconds east of UTC inside the span */
    int32_t prev_utoff; /* the offset just before start (utoff when start is INT64_MIN) */
    int isdst;          /* 1 when the span is daylight-saving time (the file's isdst) */
};

/* Checks that name is a plain zone name: 1 to DB_TZ_NAME_MAX bytes of [A-Za-z0-9_+-] in
 * components separated by single '/', each starting with a letter (so no "..", no leading or
 * trailing '/', nothing outside the database), and not "localtime" (the host's own zone, which
 * can differ between the processes serving one database). 0 when it is; -1 with the reason in
 * err (errsize bytes, always NUL-terminated) when not. */
int db_tz_name_check(const char *name, char *err, size_t errsize);

/* Loads the zone name from DB_TZ_DIR/name. The caller owns the result (db_tz_free). NULL with
 * the reason in err when the name is not plain (db_tz_name_check), when no such zone exists,
 * or when the file is not a TZif file this module reads (truncated, inconsistent, with leap
 * seconds, or with a footer it cannot parse), or when out of memory. */
struct db_tz *db_tz_load(const char *name, char *err, size_t errsize);

/* Reads a zone from the len bytes of a TZif file at data (not kept: the zone owns copies of what
 * it needs). The caller owns the result (db_tz_free); NULL with the reason in err. For tests and
 * fuzzing; db_tz_load is this on the file's bytes. */
struct db_tz *db_tz_parse(const unsigned char *data, size_t len, char *err, size_t errsize);

void db_tz_free(struct db_tz *z); /* NULL is a no-op */

/* A zone by name, loaded once per process and kept (zones are immutable; a tzdata upgrade takes
 * effect at restart): NULL with the reason in err when the name is not a zone of the system's
 * database. Thread-safe. */
const struct db_tz *db_tz_get(const char *name, char *err, size_t errsize);

/* The span of z that holds instant t (UTC seconds): the offset at t, whether it is
 * daylight-saving time, and the transitions before and after. For t in years 1 to 9999 (an
 * instant outside is answered as the nearest one inside). Pure: reads z only. */
void db_tz_span(const struct db_tz *z, int64_t t, struct db_tz_span *out);

/* The UTC offset of z at instant t in seconds east of UTC; *isdst (when not NULL) becomes 1
 * for daylight-saving time, else 0. */
int32_t db_tz_offset(const struct db_tz *z, int64_t t, int *isdst);

#endif
