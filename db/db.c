/* The vocabulary of db.h that needs no connection: errors, status names, array literals. */
#include "db/db.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void db_error_set(struct db_error *err, const char *sqlstate, const char *fmt, ...)
{
    if (err == NULL)
        return;
    snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", sqlstate);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    /* one line: libpq's multi-line messages ("...unexpectedly\n\tThis probably means...") */
    size_t n = 0;
    for (const char *p = err->message; *p != '\0'; p++) {
        int space = *p == '\n' || *p == '\t';
        if (!space)
            err->message[n++] = *p;
        else if (n > 0 && err->message[n - 1] != ' ')
            err->message[n++] = ' ';
    }
    err->message[n] = '\0';
    while (n > 0 && err->message[n - 1] == ' ')
        err->message[--n] = '\0';
}

/* Bytes of one element of an array literal: "text" with " and \ escaped, or NULL. */
static size_t element_len(const char *v)
{
    if (v == NULL)
        return 4;
    size_t n = 2;
    for (const char *p = v; *p != '\0'; p++)
        n += *p == '"' || *p == '\\' ? 2 : 1;
    return n;
}

char *db_text_array(const char *const *vals, size_t n)
{
    size_t len = 2; /* the braces */
    for (size_t i = 0; i < n; i++) {
        size_t e = element_len(vals[i]) + (i > 0); /* and its comma */
        if (e > DB_PARAM_MAX - len)
            return NULL;
        len += e;
    }
    char *out = malloc(len + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    out[o++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            out[o++] = ',';
        if (vals[i] == NULL) {
            memcpy(out + o, "NULL", 4);
            o += 4;
            continue;
        }
        out[o++] = '"';
        for (const char *p = vals[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                out[o++] = '\\';
            out[o++] = *p;
        }
        out[o++] = '"';
    }
    out[o++] = '}';
    out[o] = '\0';
    return out;
}

void db_arrays_free(struct db_arrays *a)
{
    for (size_t k = 0; a->arr && k < a->ncols; k++)
        free(a->arr[k]);
    free(a->arr);
    a->arr = NULL;
}

int db_arrays_build(struct db_arrays *a, const void *items, size_t n, size_t ncols,
                    db_column_fn get)
{
    a->n = n;
    a->ncols = ncols;
    a->arr = calloc(ncols, sizeof(char *));
    const char **vals = calloc(n ? n : 1, sizeof(char *));
    char(*bufs)[32] = calloc(n ? n : 1, 32);
    int rc = a->arr && vals && bufs ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < ncols; k++) {
        for (size_t i = 0; i < n; i++)
            vals[i] = get(items, i, k, bufs[i], sizeof(bufs[i]));
        a->arr[k] = db_text_array(vals, n);
        rc = a->arr[k] ? 0 : -1;
    }
    free(vals);
    free(bufs);
    return rc;
}

const char *db_status_name(enum db_status s)
{
    static const char *const names[] = {
        [DB_OK] = "ok",
        [DB_ABORTED] = "aborted",
        [DB_ERR_CONFLICT] = "conflict",
        [DB_ERR_REDO] = "redo",
        [DB_ERR_UNAVAILABLE] = "unavailable",
        [DB_ERR_POOL_TIMEOUT] = "pool_timeout",
        [DB_ERR_TIMEOUT] = "timeout",
        [DB_ERR_HARD] = "error",
        [DB_ERR_OUTCOME_UNKNOWN] = "outcome_unknown",
        [DB_ERR_BUSY] = "busy",
    };
    _Static_assert(sizeof(names) / sizeof(names[0]) == DB_ERR_BUSY + 1, "a name per status");
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}
