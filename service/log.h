/* Structured logging: one JSON object per line on stderr, written with a single write(2).
 * The level is checked before anything is formatted. Owns no other output. */
#ifndef SVC_LOG_H
#define SVC_LOG_H

#include "service/config.h"

/* Sets the least severe level written. Call once at startup, before threads start. */
void svc_log_set_level(enum svc_log_level level);
/* True when a line at this level would be written. */
int svc_log_enabled(enum svc_log_level level);
/* Writes {"ts":..,"level":..,"msg":msg, key:value...}. The variadic part is pairs of
 * const char * key and value, ended by NULL. Values are written as JSON strings. */
void svc_log(enum svc_log_level level, const char *msg, ...);

/* The access-log line of one request. */
struct svc_access {
    const char *request_id;
    const char *method;
    const char *route; /* route template, or "unmatched" */
    const char *path;  /* not NUL-terminated at path_len */
    size_t path_len;
    int status;
    double duration_ms;
    const char *code; /* problem code, or NULL */
};
void svc_log_access(const struct svc_access *a);

#endif
