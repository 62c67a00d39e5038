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

/* ---- the access line: built without printf or heap, since it runs once per request ---- */

struct line {
    char buf[2048];
    size_t len;
    int full;
};

static void line_put(struct line *l, const char *s, size_t n)
{
    if (l->full || n > sizeof(l->buf) - 2 - l->len) {
        l->full = 1;
        return;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void line_str(struct line *l, const char *s)
{
    line_put(l, s, strlen(s));
}

/* s as a JSON string: runs of plain characters are copied at once. */
static void line_json(struct line *l, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    line_put(l, "\"", 1);
    const char *run = s;
    for (const char *p = s;; p++) {
        unsigned char c = (unsigned char)*p;
        if (c != 0 && c >= 0x20 && c != '"' && c != '\\')
            continue;
        line_put(l, run, (size_t)(p - run));
        if (c == 0)
            break;
        char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
            line_put(l, esc, 2);
        } else {
            line_put(l, esc, 6);
        }
        run = p + 1;
    }
    line_put(l, "\"", 1);
}

static void line_uint(struct line *l, unsigned long long v, int min_digits)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 || n < min_digits);
    char out[24];
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    line_put(l, out, (size_t)n);
}

/* "2026-01-02T03:04:05" of the current second, formatted once per second per thread. */
static void line_time(struct line *l)
{
    static _Thread_local time_t cached_sec = -1;
    static _Thread_local char cached[24];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (ts.tv_sec != cached_sec) {
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        strftime(cached, sizeof(cached), "%Y-%m-%dT%H:%M:%S", &tm);
        cached_sec = ts.tv_sec;
    }
    line_str(l, cached);
    line_put(l, ".", 1);
    line_uint(l, (unsigned long long)(ts.tv_nsec / 1000000), 3);
    line_put(l, "Z", 1);
}

void svc_log_access(const struct svc_access *a)
{
    if (!svc_log_enabled(SVC_LOG_INFO))
        return;
    struct line l;
    l.len = 0;
    l.full = 0;
    line_str(&l, "{\"ts\":\"");
    line_time(&l);
    line_str(&l, "\",\"level\":\"info\",\"msg\":\"request\",\"request_id\":");
    line_json(&l, a->request_id);
    line_str(&l, ",\"method\":");
    line_json(&l, a->method);
    line_str(&l, ",\"route\":");
    line_json(&l, a->route);
    line_str(&l, ",\"path\":");
    /* the path ends at path_len; escape it through a bounded copy */
    char path[512];
    size_t plen = a->path_len < sizeof(path) - 1 ? a->path_len : sizeof(path) - 1;
    memcpy(path, a->path, plen);
    path[plen] = '\0';
    line_json(&l, path);
    line_str(&l, ",\"status\":");
    line_uint(&l, (unsigned long long)(a->status < 0 ? 0 : a->status), 1);
    unsigned long long us = (unsigned long long)(a->duration_ms * 1000.0);
    line_str(&l, ",\"duration_ms\":");
    line_uint(&l, us / 1000, 1);
    line_put(&l, ".", 1);
    line_uint(&l, us % 1000, 3);
    if (a->code != NULL) {
        line_str(&l, ",\"code\":");
        line_json(&l, a->code);
    }
    line_put(&l, "}\n", 2);
    if (l.full)
        return; /* a line that does not fit is dropped whole, never cut */
    size_t off = 0;
    while (off < l.len) {
        ssize_t n = write(STDERR_FILENO, l.buf + off, l.len - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
}
