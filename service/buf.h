/* Growable byte buffers that know their maximum size from creation.
 * Appending past the maximum fails (never truncates). Also JSON string escaping
 * for hand-written JSON (logs, metrics). Owns no other state. */
#ifndef SVC_BUF_H
#define SVC_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct svc_buf {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    size_t max; /* appends that would exceed this fail */
    int failed; /* an append failed since init, free or steal (see svc_buf_failed) */
};

/* Initializes an empty buffer that may grow to max bytes. Allocates nothing yet. */
void svc_buf_init(struct svc_buf *b, size_t max);
/* Releases the storage; the buffer is empty again. NULL-safe. */
void svc_buf_free(struct svc_buf *b);
/* Appends n bytes. Returns 0, or -1 when over the maximum or out of memory (buffer unchanged). */
int svc_buf_append(struct svc_buf *b, const void *p, size_t n);
/* Appends a NUL-terminated string. Same result as svc_buf_append. */
int svc_buf_puts(struct svc_buf *b, const char *s);
/* Appends printf-formatted text. Same result as svc_buf_append. */
int svc_buf_printf(struct svc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int svc_buf_vprintf(struct svc_buf *b, const char *fmt, va_list ap);
/* Appends s as a quoted JSON string with escapes; bytes that are not UTF-8 become U+FFFD, so the
 * result is well-formed whatever s holds. Same result as svc_buf_append. */
int svc_buf_json_string(struct svc_buf *b, const char *s);
/* True when an append failed since the buffer was last empty: a text built by many appends that
 * ignore their results (metrics) is then incomplete and must not be sent. */
int svc_buf_failed(const struct svc_buf *b);
/* Hands the storage to the caller (free() it) and leaves the buffer empty. Never NULL on success:
 * an empty buffer yields an allocated "". Returns NULL when out of memory. */
char *svc_buf_steal(struct svc_buf *b, size_t *len);

#endif
