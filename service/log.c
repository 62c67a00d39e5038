/* JSON log lines on stderr (see log.h). Lines are built in a stack buffer and written whole, so
 * concurrent threads never interleave within a line: with one write(2) each, or, while the
 * server runs (svc_log_buffer_start), gathered in memory and written by the batch. */
#include "service/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/buf.h"
#include "service/clock.h"
#include "service/utf8.h"

static atomic_int log_level = SVC_LOG_INFO;

void svc_log_set_level(enum svc_log_level level)
{
    atomic_store(&log_level, (int)level);
}

enum svc_log_level svc_log_get_level(void)
{
    return (enum svc_log_level)atomic_load(&log_level);
}

int svc_log_enabled(enum svc_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_level, memory_order_relaxed);
}

/* ---- where lines go: straight to stderr, or through the batch buffer ---- */

/* Bytes gathered before they are written (one pipe's worth): a fuller buffer is written at once
 * by the thread whose line does not fit. */
#define SINK_BYTES 65536

/* The batch buffer. Lines are appended under mu; write_mu orders the writes, and is held while
 * a batch is written, so that lines reach stderr in the order they entered the buffer. The
 * buffer being written (spare) is touched only by the holder of write_mu. */
static struct {
    pthread_mutex_t mu, write_mu;
    pthread_cond_t cv; /* the flusher waits for a first line, then for the interval */
    atomic_int on;
    int stop;
    long flush_ms;
    pthread_t flusher;
    char *cur, *spare;
    size_t len; /* of cur */
    char bufs[2][SINK_BYTES];
} sink = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .write_mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER};

static void write_all(const char *s, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(STDERR_FILENO, s + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

/* Writes what the buffer holds, then line (n bytes; none when NULL): the lines buffered before
 * it go first. */
static void sink_write(const char *line, size_t n)
{
    pthread_mutex_lock(&sink.write_mu);
    pthread_mutex_lock(&sink.mu);
    char *full = sink.cur;
    size_t len = sink.len;
    sink.cur = sink.spare;
    sink.spare = full;
    sink.len = 0;
    pthread_mutex_unlock(&sink.mu);
    if (len > 0)
        write_all(full, len);
    if (line != NULL)
        write_all(line, n);
    pthread_mutex_unlock(&sink.write_mu);
}

/* Writes line (n bytes, whole lines). An urgent line (any but an access line) is written before
 * this returns, after the lines buffered before it; the others are buffered while the buffer is
 * on, and written with the lines that join them within flush_ms, or once it is full. */
static void emit(const char *line, size_t n, int urgent)
{
    if (urgent || n > SINK_BYTES || !atomic_load_explicit(&sink.on, memory_order_relaxed)) {
        sink_write(line, n);
        return;
    }
    pthread_mutex_lock(&sink.mu);
    while (atomic_load_explicit(&sink.on, memory_order_relaxed) && sink.len + n > SINK_BYTES) {
        pthread_mutex_unlock(&sink.mu);
        sink_write(NULL, 0);
        pthread_mutex_lock(&sink.mu);
    }
    if (!atomic_load_explicit(&sink.on, memory_order_relaxed)) { /* stopped meanwhile */
        pthread_mutex_unlock(&sink.mu);
        sink_write(line, n);
        return;
    }
    if (sink.len == 0)
        pthread_cond_signal(&sink.cv); /* the flusher's interval starts with a first line */
    memcpy(sink.cur + sink.len, line, n);
    sink.len += n;
    pthread_mutex_unlock(&sink.mu);
}

/* Waits for a first line, lets flush_ms pass so that others join it, writes them; again. */
static void *flusher_main(void *unused)
{
    pthread_mutex_lock(&sink.mu);
    while (!sink.stop) {
        if (sink.len == 0) {
            pthread_cond_wait(&sink.cv, &sink.mu);
            continue;
        }
        struct timespec due = svc_clock_after_ms(CLOCK_MONOTONIC, sink.flush_ms);
        while (!sink.stop && pthread_cond_timedwait(&sink.cv, &sink.mu, &due) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&sink.mu);
        sink_write(NULL, 0);
        pthread_mutex_lock(&sink.mu);
    }
    pthread_mutex_unlock(&sink.mu);
    return NULL;
}

int svc_log_buffer_start(long flush_ms)
{
    pthread_mutex_lock(&sink.mu);
    if (atomic_load(&sink.on)) {
        pthread_mutex_unlock(&sink.mu);
        return 0;
    }
    sink.cur = sink.bufs[0];
    sink.spare = sink.bufs[1];
    sink.len = 0;
    sink.stop = 0;
    sink.flush_ms = flush_ms > 0 ? flush_ms : 1;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&sink.cv);
    pthread_cond_init(&sink.cv, &ca);
    pthread_condattr_destroy(&ca);
    int ok = pthread_create(&sink.flusher, NULL, flusher_main, NULL) == 0;
    atomic_store(&sink.on, ok);
    pthread_mutex_unlock(&sink.mu);
    return ok ? 0 : -1;
}

void svc_log_buffer_stop(void)
{
    pthread_mutex_lock(&sink.mu);
    if (!atomic_load(&sink.on)) {
        pthread_mutex_unlock(&sink.mu);
        return;
    }
    sink.stop = 1;
    pthread_cond_signal(&sink.cv);
    pthread_mutex_unlock(&sink.mu);
    pthread_join(sink.flusher, NULL);
    /* off under write_mu, then what is left: a line that finds it off waits for it to be out */
    pthread_mutex_lock(&sink.write_mu);
    pthread_mutex_lock(&sink.mu);
    atomic_store(&sink.on, 0);
    size_t n = sink.len;
    sink.len = 0;
    pthread_mutex_unlock(&sink.mu);
    write_all(sink.cur, n);
    pthread_mutex_unlock(&sink.write_mu);
}

void svc_log_flush(void)
{
    sink_write(NULL, 0);
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
    emit(b->data, b->len, 1);
}

/* True when s is a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int json_number_text(const char *s)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (*p >= '1' && *p <= '9')
        while (*p >= '0' && *p <= '9')
            p++;
    else
        return 0;
    if (*p == '.') {
        if (*++p < '0' || *p > '9')
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (*p < '0' || *p > '9')
            return 0;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    return *p == '\0';
}

/* Appends one key/value pair; an SVC_NUM key holds a number. */
static void log_field(struct svc_buf *b, const char *key, const char *value)
{
    int number = key[0] == '#';
    svc_buf_puts(b, ",");
    svc_buf_json_string(b, key + number);
    svc_buf_puts(b, ":");
    if (number && value != NULL && json_number_text(value))
        svc_buf_puts(b, value);
    else
        svc_buf_json_string(b, value ? value : "");
}

/* Appends the key/value pairs of ap (ended by a NULL key). */
static void log_fields(struct svc_buf *b, va_list ap)
{
    for (const char *key = va_arg(ap, const char *); key != NULL; key = va_arg(ap, const char *))
        log_field(b, key, va_arg(ap, const char *));
}

void svc_log_fields(enum svc_log_level level, int always, const char *msg,
                    const char *const *fields, size_t npairs)
{
    if (!always && !svc_log_enabled(level))
        return;
    struct svc_buf b;
    svc_buf_init(&b, 16384);
    log_begin(&b, level, msg);
    for (size_t i = 0; i < npairs; i++) {
        const char *key = fields[2 * i], *value = fields[2 * i + 1];
        log_field(&b, key, value);
    }
    log_end(&b);
    svc_buf_free(&b);
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
    log_fields(&b, ap);
    va_end(ap);
    log_end(&b);
    svc_buf_free(&b);
}

char *svc_log_format(enum svc_log_level level, const char *msg, ...)
{
    struct svc_buf b;
    svc_buf_init(&b, 16384);
    log_begin(&b, level, msg);
    va_list ap;
    va_start(ap, msg);
    log_fields(&b, ap);
    va_end(ap);
    char *out = NULL;
    if (svc_buf_puts(&b, "}\n") == 0 && (out = malloc(b.len + 1)) != NULL) {
        memcpy(out, b.data, b.len);
        out[b.len] = '\0';
    }
    svc_buf_free(&b);
    return out;
}

/* ---- the access line: built without printf or heap, since it runs once per request ---- */

/* Longest path written (bytes of the request, before escaping); a longer one is cut at a
 * character boundary. Sized so that the worst escaping of every field still fits in a line. */
#define PATH_MAX_BYTES 512

struct line {
    char buf[4096];
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

/* A string literal, its length known when compiled. */
#define LINE_LIT(l, lit) line_put((l), (lit), sizeof(lit) - 1)

/* 1 for the bytes a JSON string holds as they are (printable ASCII but '"' and '\\'). */
static const unsigned char json_plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x00 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 0x10 */
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20: '"' */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x30 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x40 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50: '\\' */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x60 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x70 */
};

/* s (len bytes, any content) as a JSON string of well-formed UTF-8: runs of plain characters are
 * copied at once, controls escaped, and each byte that does not begin a UTF-8 character written
 * as U+FFFD. The plain bytes (every byte of a request id, a method or a route, as a rule) are
 * skipped over by a table lookup each: this runs for four fields of every request. */
static void line_json_n(struct line *l, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len && json_plain[u[i]])
        i++;
    if (i == len && !l->full && len + 2 <= sizeof(l->buf) - 2 - l->len) {
        /* all plain, and room for it: copied at once between its quotes */
        char *to = l->buf + l->len;
        to[0] = '"';
        memcpy(to + 1, s, len);
        to[len + 1] = '"';
        l->len += len + 2;
        return;
    }
    line_put(l, "\"", 1);
    size_t run = 0;
    while (i < len) {
        if (json_plain[u[i]]) {
            i++;
            continue;
        }
        unsigned char c = u[i];
        size_t n = c >= 0x80 ? svc_utf8_char_len(s + i, len - i) : 0;
        if (n > 0) {
            i += n;
            continue;
        }
        line_put(l, s + run, i - run);
        if (c >= 0x80) {
            line_put(l, "\xef\xbf\xbd", 3);
        } else if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            line_put(l, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            line_put(l, esc, 6);
        }
        run = ++i;
    }
    line_put(l, s + run, i - run);
    line_put(l, "\"", 1);
}

static void line_json(struct line *l, const char *s)
{
    line_json_n(l, s ? s : "", s ? strlen(s) : 0);
}
static void line_uint(struct line *l, unsigned long long v, int min_digits)
{
    char out[24];
    int at = (int)sizeof(out);
    do {
        out[--at] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0 || (int)sizeof(out) - at < min_digits);
    line_put(l, out + at, sizeof(out) - (size_t)at);
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

/* Where a path of len bytes may be cut, at most max bytes in: not inside a UTF-8 character. */
static size_t path_cut(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    size_t n = max;
    /* back over at most three continuation bytes to the start of their character */
    for (int i = 0; i < 3 && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; i++)
        n--;
    return ((unsigned char)s[n] & 0xc0) == 0x80 ? max : n;
}

static void access_line(const struct svc_access *a, struct line *l)
{
    l->len = 0;
    l->full = 0;
    LINE_LIT(l, "{\"ts\":\"");
    line_time(l);
    LINE_LIT(l, "\",\"level\":\"info\",\"msg\":\"request\",\"request_id\":");
    line_json(l, a->request_id);
    LINE_LIT(l, ",\"method\":");
    line_json(l, a->method);
    LINE_LIT(l, ",\"route\":");
    line_json(l, a->route);
    LINE_LIT(l, ",\"path\":");
    const char *path = a->path ? a->path : "";
    line_json_n(l, path, path_cut(path, a->path ? a->path_len : 0, PATH_MAX_BYTES));
    LINE_LIT(l, ",\"status\":");
    line_uint(l, (unsigned long long)(a->status < 0 ? 0 : a->status), 1);
    double ms = a->duration_ms >= 0 && a->duration_ms < 1e12 ? a->duration_ms : 0;
    unsigned long long us = (unsigned long long)(ms * 1000.0);
    LINE_LIT(l, ",\"duration_ms\":");
    line_uint(l, us / 1000, 1);
    line_put(l, ".", 1);
    line_uint(l, us % 1000, 3);
    if (a->code != NULL) {
        LINE_LIT(l, ",\"code\":");
        line_json(l, a->code);
    }
    line_put(l, "}\n", 2);
}

char *svc_log_access_format(const struct svc_access *a, size_t *len)
{
    struct line l;
    access_line(a, &l);
    if (l.full)
        return NULL;
    char *out = malloc(l.len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, l.buf, l.len);
    out[l.len] = '\0';
    if (len != NULL)
        *len = l.len;
    return out;
}

void svc_log_access(const struct svc_access *a)
{
    if (!svc_log_enabled(SVC_LOG_INFO))
        return;
    struct line l;
    access_line(a, &l);
    if (l.full)
        return; /* a line that does not fit is dropped whole, never cut */
    emit(l.buf, l.len, 0);
}
