/* Helpers every workflow file of db/ needs for its SQL: how a timestamp column is shown, how a
 * number goes out as a text parameter, how a result's text is kept. */
#ifndef DB_SQL_H
#define DB_SQL_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A timestamp column as the API shows it: UTC, microseconds, "Z" (DB_TIME_TEXT bytes hold it). */
#define DB_TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* Writes v in decimal into buf (DB_INT_TEXT bytes hold any), a statement's text parameter. */
static inline void db_i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
}

/* Copies src into dst of size bytes, cut to fit, always terminated. */
static inline void db_copy(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

#endif
