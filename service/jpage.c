/* The page writer (see jpage.h). Text grows geometrically; nothing here knows HTTP or SQL. */
#include "service/jpage.h"

#include <stdlib.h>
#include <string.h>

static int put(struct svc_jpage *p, const char *s, size_t n)
{
    if (p->failed)
        return -1;
    if (p->len + n + 1 > p->cap) {
        size_t cap = p->cap ? p->cap : 256;
        while (cap < p->len + n + 1)
            cap *= 2;
        char *d = realloc(p->data, cap);
        if (d == NULL) {
            p->failed = 1;
            return -1;
        }
        p->data = d;
        p->cap = cap;
    }
    memcpy(p->data + p->len, s, n);
    p->len += n;
    p->data[p->len] = '\0';
    return 0;
}

/* Appends the encoding of v (stolen) without its closing brace when open is set. */
static int put_json(struct svc_jpage *p, json_t *v, int open)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (text == NULL) {
        p->failed = 1;
        return -1;
    }
    size_t n = strlen(text);
    int rc = put(p, text, open && n > 0 ? n - 1 : n);
    free(text);
    return rc;
}

void svc_jpage_begin(struct svc_jpage *p, const char *member, size_t budget)
{
    memset(p, 0, sizeof(*p));
    p->budget = budget;
    json_t *name = json_string(member);
    if (put(p, "{", 1) == 0 && put_json(p, name, 0) == 0)
        put(p, ":[", 2);
}

int svc_jpage_full(const struct svc_jpage *p, size_t value_bytes)
{
    return p->items > 0 && p->values + value_bytes > p->budget;
}

int svc_jpage_item(struct svc_jpage *p, json_t *env, size_t n, const char *const *names,
                   const char *const *raw, const size_t *lens)
{
    if (!json_is_object(env)) {
        json_decref(env);
        p->failed = 1;
        return -1;
    }
    int empty = json_object_size(env) == 0;
    if (p->items > 0 && put(p, ",", 1) != 0) {
        json_decref(env);
        return -1;
    }
    if (put_json(p, env, 1) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if ((!empty || i > 0) && put(p, ",", 1) != 0)
            return -1;
        if (put_json(p, json_string(names[i]), 0) != 0 || put(p, ":", 1) != 0)
            return -1;
        if (raw[i] == NULL ? put(p, "null", 4) : put(p, raw[i], lens[i]))
            return -1;
        if (raw[i] != NULL)
            p->values += lens[i];
    }
    if (put(p, "}", 1) != 0)
        return -1;
    p->items++;
    return 0;
}

char *svc_jpage_finish(struct svc_jpage *p, json_t *tail, size_t *len)
{
    if (put(p, "]", 1) == 0) {
        if (tail != NULL && json_object_size(tail) > 0) {
            char *text = json_dumps(tail, JSON_COMPACT);
            /* "{...}" -> ",...}" */
            if (text == NULL || put(p, ",", 1) != 0 || put(p, text + 1, strlen(text) - 1) != 0)
                p->failed = 1;
            free(text);
        } else {
            put(p, "}", 1);
        }
    }
    json_decref(tail);
    if (p->failed) {
        svc_jpage_free(p);
        return NULL;
    }
    char *out = p->data;
    *len = p->len;
    p->data = NULL;
    p->len = p->cap = 0;
    return out;
}

void svc_jpage_free(struct svc_jpage *p)
{
    free(p->data);
    p->data = NULL;
    p->len = p->cap = 0;
}
