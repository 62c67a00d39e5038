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

char *db_text_array(const char *const *vals, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += (vals[i] ? strlen(vals[i]) * 2 + 2 : 4) + 1;
    char *out = malloc(cap);
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
