/* Structured logging: one JSON object per line on stderr, each line written whole (never
 * interleaved with another). The level is checked before anything is formatted. Owns no other
 * output. */
#ifndef SVC_LOG_H
#define SVC_LOG_H

#include "service/config.h"

/* Sets the least severe level written (atomically: at startup and on SIGHUP). */
void svc_log_set_level(enum svc_log_level level);
/* The least severe level written now. */
enum svc_log_level svc_log_get_level(void);
/* True when a line at this level would be written. */
int svc_log_enabled(enum svc_log_level level);
/* Writes {"ts":..,"level":..,"msg":msg, key:value...}. The variadic part is pairs of
 * const char * key and value, ended by NULL. Values are written as JSON strings, except under a
 * key made with SVC_NUM: such a value is written as a JSON number when it is one ("42", "-1.5",
 * "1e3"), and as a string otherwise (never as broken JSON). */
void svc_log(enum svc_log_level level, const char *msg, ...);
/* The same with the pairs in an array (fields[2i] the key, fields[2i+1] the value; npairs of
 * them), for a line whose fields vary; with always set it is written whatever the level set, for
 * lines a quieter level must not drop (the audit trail). */
void svc_log_fields(enum svc_log_level level, int always, const char *msg,
                    const char *const *fields, size_t npairs);
/* The key of a numeric value: svc_log(..., SVC_NUM("port"), "8080", NULL) writes "port":8080. */
#define SVC_NUM(key) "#" key
/* The line svc_log would write (whatever the level), as malloc'd text ending in a newline, for
 * tests. NULL when out of memory or when the line does not fit. */
char *svc_log_format(enum svc_log_level level, const char *msg, ...);

/* The access-log line of one request. */
struct svc_access {
    const char *request_id;
    const char *method;
    const char *route; /* route template, or "unmatched" */
    const char *path;  /* not NUL-terminated at path_len; at most 512 bytes are written */
    size_t path_len;
    int status;
    double duration_ms;
    const char *code; /* problem code, or NULL */
};
/* Writes the access line of a, unless the info level is off. Every string may hold any bytes
 * (they come from the request): the line is always well-formed UTF-8 JSON. */
void svc_log_access(const struct svc_access *a);
/* The same line as malloc'd text ending in a newline (its length in *len), written nowhere: for
 * tests and fuzzing. NULL when out of memory or when the line does not fit (never cut). */
char *svc_log_access_format(const struct svc_access *a, size_t *len);

/* Access lines buffered: from here until svc_log_buffer_stop, access lines are gathered in memory
 * and written by the batch (one write(2) for many lines), at the latest flush_ms after the first
 * of a batch entered the buffer, or as soon as 64 KiB are waiting. Every other line is written at
 * once, after the access lines buffered before it, so the order of lines is kept. A kill -9 loses
 * the access lines of the last flush_ms at most (when stderr takes lines slower than they come,
 * the batch being written and the next, 128 KiB at most: the callers then wait for stderr). Returns
 * 0, or -1 when the flushing thread cannot start (lines are then written one by one, as before). */
int svc_log_buffer_start(long flush_ms);
/* Writes what is buffered and ends buffering (lines are written one by one again). */
void svc_log_buffer_stop(void);
/* Writes what is buffered now. */
void svc_log_flush(void);

#endif
