/* The splice of stored JSON into answers and the page writer (see jpage.h), on bounded
 * svc_bufs. Nothing here knows HTTP or SQL. */
#include "service/jpage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Appends the compact encoding of v (borrowed) less its first `head` and last `tail` bytes. */
static int put_json(struct svc_buf *b, const json_t *v, size_t head, size_t tail)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    size_t n = text ? strlen(text) : 0;
    int rc =
        text != NULL && n >= head + tail ? svc_buf_append(b, text + head, n - head - tail) : -1;
    free(text);
    return rc;
}

/* Appends name as a JSON string; -1 when it is not UTF-8 (never a member name changed). */
static int put_name(struct svc_buf *b, const char *name)
{
    json_t *s = json_string(name);
    int rc = put_json(b, s, 0, 0);
    json_decref(s);
    return rc;
}

int svc_jpage_splice(struct svc_buf *b, json_t *env, const struct svc_jpage_raw *raw, size_t n)
{
    size_t start = b->len;
    int sep = json_object_size(env) > 0; /* members before the first spliced one */
    int rc = json_is_object(env) ? put_json(b, env, 0, 1) : -1; /* {"id":...} less its brace */
    json_decref(env);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if ((sep || i > 0) && svc_buf_append(b, ",", 1) != 0)
            rc = -1;
        else if (put_name(b, raw[i].name) != 0 || svc_buf_append(b, ":", 1) != 0)
            rc = -1;
        else
            rc = raw[i].text ? svc_buf_append(b, raw[i].text, raw[i].len)
                             : svc_buf_append(b, "null", 4);
    }
    if (rc == 0)
        rc = svc_buf_append(b, "}", 1);
    if (rc != 0 && b->data != NULL) {
        b->len = start;
        b->data[start] = '\0';
    }
    return rc;
}

char *svc_jpage_object(json_t *env, const struct svc_jpage_raw *raw, size_t n, size_t *len)
{
    struct svc_buf b;
    svc_buf_init(&b, SVC_JPAGE_SLACK);
    char *text = svc_jpage_splice(&b, env, raw, n) == 0 ? svc_buf_steal(&b, len) : NULL;
    svc_buf_free(&b);
    return text;
}

void svc_jpage_begin(struct svc_jpage *p, const char *member, size_t budget)
{
    memset(p, 0, sizeof(*p));
    p->budget = budget;
    svc_buf_init(&p->text,
                 budget > SIZE_MAX - SVC_JPAGE_SLACK ? SIZE_MAX : budget + SVC_JPAGE_SLACK);
    if (svc_buf_append(&p->text, "{", 1) != 0 || put_name(&p->text, member) != 0 ||
        svc_buf_append(&p->text, ":[", 2) != 0)
        p->failed = 1;
}

int svc_jpage_full(const struct svc_jpage *p, size_t value_bytes)
{
    return p->items > 0 && p->values + value_bytes > p->budget;
}

int svc_jpage_item(struct svc_jpage *p, json_t *env, const struct svc_jpage_raw *raw, size_t n)
{
    if (p->failed || (p->items > 0 && svc_buf_append(&p->text, ",", 1) != 0)) {
        json_decref(env);
        p->failed = 1;
        return -1;
    }
    if (svc_jpage_splice(&p->text, env, raw, n) != 0) {
        p->failed = 1;
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        p->values += raw[i].text ? raw[i].len : 0;
    p->items++;
    return 0;
}

char *svc_jpage_finish(struct svc_jpage *p, json_t *tail, size_t *len)
{
    if (p->failed || svc_buf_append(&p->text, "]", 1) != 0)
        p->failed = 1;
    else if (tail != NULL && json_object_size(tail) > 0) /* {"next":1} -> ,"next":1} */
        p->failed = svc_buf_append(&p->text, ",", 1) != 0 || put_json(&p->text, tail, 1, 0) != 0;
    else
        p->failed = svc_buf_append(&p->text, "}", 1) != 0;
    json_decref(tail);
    char *out = p->failed ? NULL : svc_buf_steal(&p->text, len);
    svc_jpage_free(p);
    return out;
}

void svc_jpage_free(struct svc_jpage *p)
{
    svc_buf_free(&p->text);
}
