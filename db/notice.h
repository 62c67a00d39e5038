/* Log lines of db/: the log function the pool and the listener write through, the plain line
 * on stderr when there is none, and libpq's notices (server notices, warnings, an error on an
 * idle connection) turned into such lines. db/ writes no other output. */
#ifndef DB_NOTICE_H
#define DB_NOTICE_H

#include <libpq-fe.h>

enum db_log_level { DB_LOG_DEBUG, DB_LOG_INFO, DB_LOG_WARN, DB_LOG_ERROR };

/* Receives the pool's log lines: msg and up to DB_LOG_FIELDS key/value pairs in fields (keys at
 * even indexes, ended by a NULL key). Called from any thread; everything is borrowed. */
#define DB_LOG_FIELDS 4
/* The key of a field whose value is a number ("#" + key, the logger's convention for writing it
 * as a JSON number). */
#define DB_LOG_NUM(key) "#" key
typedef void (*db_log_fn)(void *ctx, enum db_log_level level, const char *msg,
                          const char *const *fields);

/* Writes one line through log, or to stderr without one (debug lines are then dropped). fields
 * as for db_log_fn. */
void db_log_line(db_log_fn log, void *ctx, enum db_log_level level, const char *msg,
                 const char *const *fields);

/* Logs a notice or error libpq received (a PGresult of a notice receiver) through log (or
 * stderr without one): a "database notice" line with its severity, SQLSTATE and message. */
void db_log_notice(db_log_fn log, void *ctx, const PGresult *res);

#endif
