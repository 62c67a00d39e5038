/* JSON log lines on stderr (see log.h). Lines are built in a stack buffer and written with one
 * write(2), so concurrent threads never interleave within a line. */
#include "service/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/buf.h"

static atomic_int log_level = SVC_LOG_INFO;

void svc_log_set_level(enum svc_log_level level)
{
    atomic_store(&log_level, (int)level);
}

int svc_log_enabled(enum svc_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_level, memory_order_relaxed);
}

static void log_begin(struct svc_buf *b, enum svc_log_level level, const char *msg)
{
    struct timespec ts;
    struct tm tm;
    char when[40];
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    svc_buf_printf(b, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":", when, ts.tv_nsec / 1000000,
                   svc_log_level_name(level));
    svc_buf_json_string(b, msg);
}

static void log_end(struct svc_buf *b)
{
    if (svc_buf_puts(b, "}\n") != 0)
        return; /* a line that does not fit is dropped whole, never cut */
    size_t off = 0;
    while (off < b->len) {
        ssize_t n = write(STDERR_FILENO, b->data + off, b->len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
}

void svc_log(enum svc_log_level level, const char *msg, ...)
{
    if (!svc_log_enabled(level))
        return;
    struct svc_buf b;
    svc_buf_init(&b, 16384);
    log_begin(&b, level, msg);
    va_list ap;
    va_start(ap, msg);
    for (const char *key = va_arg(ap, const char *); key != NULL; key = va_arg(ap, const char *)) {
        const char *value = va_arg(ap, const char *);
        svc_buf_puts(&b, ",");
        svc_buf_json_string(&b, key);
        svc_buf_puts(&b, ":");
        svc_buf_json_string(&b, value ? value : "");
    }
    va_end(ap);
    log_end(&b);
    svc_buf_free(&b);
}

void svc_log_access(const struct svc_access *a)
{
    if (!svc_log_enabled(SVC_LOG_INFO))
        return;
    struct svc_buf b;
    svc_buf_init(&b, 16384);
    log_begin(&b, SVC_LOG_INFO, "request");
    svc_buf_puts(&b, ",\"request_id\":");
    svc_buf_json_string(&b, a->request_id);
    svc_buf_puts(&b, ",\"method\":");
    svc_buf_json_string(&b, a->method);
    svc_buf_puts(&b, ",\"route\":");
    svc_buf_json_string(&b, a->route);
    svc_buf_puts(&b, ",\"path\":");
    svc_buf_json_string(&b, a->path);
    svc_buf_printf(&b, ",\"status\":%d,\"duration_ms\":%.3f", a->status, a->duration_ms);
    if (a->code != NULL) {
        svc_buf_puts(&b, ",\"code\":");
        svc_buf_json_string(&b, a->code);
    }
    log_end(&b);
    svc_buf_free(&b);
}
