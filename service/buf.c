/* Bounded growable buffers and JSON string escaping (see buf.h).
 * Callers own the struct; the storage belongs to the buffer until stolen. */
#include "service/buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/utf8.h"

void svc_buf_init(struct svc_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->failed = 0;
}

void svc_buf_free(struct svc_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = 0;
}

static int buf_reserve(struct svc_buf *b, size_t extra)
{
    if (extra > b->max || b->len > b->max - extra) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int svc_buf_append(struct svc_buf *b, const void *p, size_t n)
{
    if (buf_reserve(b, n) != 0)
        return -1;
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int svc_buf_puts(struct svc_buf *b, const char *s)
{
    return svc_buf_append(b, s, strlen(s));
}

int svc_buf_vprintf(struct svc_buf *b, const char *fmt, va_list ap)
{
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) {
        b->failed = 1;
        return -1;
    }
    if (buf_reserve(b, (size_t)n) != 0)
        return -1;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return 0;
}

int svc_buf_printf(struct svc_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = svc_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int svc_buf_json_string(struct svc_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t start = b->len, len = strlen(s);
    int rc = svc_buf_append(b, "\"", 1);
    for (size_t i = 0; rc == 0 && i < len;) {
        unsigned char c = (unsigned char)s[i];
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2, used = 1;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (c < 0x20) {
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
                n = 6;
            } else if (c < 0x80) {
                esc[0] = (char)c;
                n = 1;
            } else if ((used = svc_utf8_char_len(s + i, len - i)) > 0) {
                memcpy(esc, s + i, used);
                n = used;
            } else {
                memcpy(esc, "\xef\xbf\xbd", 3); /* not UTF-8: U+FFFD */
                n = 3;
                used = 1;
            }
        }
        rc = svc_buf_append(b, esc, n);
        i += used;
    }
    if (rc == 0)
        rc = svc_buf_append(b, "\"", 1);
    if (rc != 0 && b->data != NULL) {
        b->len = start;
        b->data[start] = '\0';
    }
    return rc;
}

int svc_buf_failed(const struct svc_buf *b)
{
    return b->failed;
}

char *svc_buf_steal(struct svc_buf *b, size_t *len)
{
    if (b->data == NULL && svc_buf_append(b, "", 0) != 0)
        return NULL;
    char *p = b->data;
    if (len != NULL)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = 0;
    return p;
}
