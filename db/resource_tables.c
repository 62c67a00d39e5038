/* Statements on resources' generated tables and gap-safe log reads (see resource_tables.h). */
#include "db/resource_tables.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/pool.h"
#include "db/tx.h"

/* The quoted, schema-qualified name of placeholder letter, into out. 0, or -1 unknown. */
static int table_name(const struct db_gen_tpl *t, char letter, char *out, size_t size)
{
    for (const struct db_gen_table *x = t->g->tables; x->letter; x++) {
        if (x->letter != letter)
            continue;
        char raw[80];
        snprintf(raw, sizeof(raw), "%s%" PRId64 "%s", x->prefix, t->g->id, x->suffix);
        char *q = PQescapeIdentifier(t->pg, raw, strlen(raw));
        if (q == NULL)
            return -1;
        snprintf(out, size, "rowlock.%s", q);
        PQfreemem(q);
        return 0;
    }
    return -1;
}

/* Expands every {x} of t->sql into buf. */
static int build_tpl(char *buf, size_t size, const void *ctx)
{
    const struct db_gen_tpl *t = ctx;
    size_t o = 0;
    for (const char *p = t->sql; *p; p++) {
        char name[128];
        const char *add = NULL;
        if (p[0] == '{' && p[1] != '\0' && p[2] == '}') {
            if (table_name(t, p[1], name, sizeof(name)) != 0)
                return -1;
            add = name;
        }
        size_t n = add ? strlen(add) : 1;
        if (o + n >= size)
            return -1;
        memcpy(buf + o, add ? add : p, n);
        o += n;
        p += add ? 2 : 0;
    }
    buf[o] = '\0';
    return 0;
}

enum db_status db_gen_query(struct db_conn *c, const struct db_gen *g, const char *tag,
                            const char *sql, int nparams, const char *const *params, PGresult **out,
                            struct db_error *err)
{
    struct db_gen_call call = {
        .tag = tag, .sql = sql, .nparams = nparams, .params = params, .out = out};
    return db_gen_pipeline(c, g, &call, 1, err);
}

void db_gen_call_make(struct db_conn *c, const struct db_gen *g, const struct db_gen_call *in,
                      struct db_gen_slot *slot, struct db_call *out)
{
    snprintf(slot->name, sizeof(slot->name), "%c%" PRId64 "_%s", g->kind, g->id, in->tag);
    slot->tpl = (struct db_gen_tpl){in->sql, g, db_conn_pg(c)};
    *out = (struct db_call){.name = slot->name,
                            .build = build_tpl,
                            .ctx = &slot->tpl,
                            .nparams = in->nparams,
                            .params = in->params,
                            .out = in->out};
}

enum db_status db_gen_pipeline(struct db_conn *c, const struct db_gen *g,
                               const struct db_gen_call *calls, size_t n, struct db_error *err)
{
    struct db_gen_slot slots[DB_GEN_PIPELINE_MAX];
    struct db_call q[DB_GEN_PIPELINE_MAX];
    if (n > DB_GEN_PIPELINE_MAX) {
        db_error_set(err, "", "too many statements in one pipeline");
        return DB_ERR_HARD;
    }
    for (size_t i = 0; i < n; i++)
        db_gen_call_make(c, g, &calls[i], &slots[i], &q[i]);
    return db_query_pipeline(c, q, n, err);
}

int db_gen_missing(const struct db_error *err)
{
    return strcmp(err->sqlstate, "42P01") == 0;
}

/* Index of the first row after a gap (rows start right after `after`), or the row count. */
static int first_gap(const PGresult *r, int64_t after)
{
    int64_t expected = after + 1;
    for (int i = 0; i < PQntuples(r); i++) {
        if (strtoll(PQgetvalue(r, i, 0), NULL, 10) != expected)
            return i;
        expected++;
    }
    return PQntuples(r);
}

/* The two statements of a gap-safe log read: templates on a resource's generated tables (g), or
 * prepared statements on shared tables with the resource's id as $1 (g NULL). */
struct log_src {
    struct db_conn *c;
    const struct db_gen *g;
    const char *read_sql, *fill_sql;
    const struct db_stmt *read, *fill;
    const char *id;
};

/* Runs the read ($ after, limit) or the fill ($ from, to) of s. */
static enum db_status log_run(const struct log_src *s, int fill, const char *a, const char *b,
                              PGresult **out, struct db_error *err)
{
    if (s->g != NULL) {
        const char *params[] = {a, b};
        return db_gen_query(s->c, s->g, fill ? "log_fill" : "log_read",
                            fill ? s->fill_sql : s->read_sql, 2, params, out, err);
    }
    const char *params[] = {s->id, a, b};
    return db_query(s->c, fill ? s->fill : s->read, params, out, err);
}

/* Tries to record offsets from..to as holes without waiting for anyone: *filled 1 done, 0 some
 * offset is still held by a transaction in progress. */
static enum db_status fill_holes(const struct log_src *s, int64_t from, int64_t to, int *filled,
                                 struct db_error *err)
{
    char a[DB_INT_TEXT], b[DB_INT_TEXT];
    snprintf(a, sizeof(a), "%" PRId64, from);
    snprintf(b, sizeof(b), "%" PRId64, to);
    *filled = 0;
    enum db_status st = db_exec(s->c, "SAVEPOINT fill; SET LOCAL lock_timeout = '2ms'", err);
    if (st != DB_OK)
        return st;
    st = log_run(s, 1, a, b, NULL, err);
    /* SET LOCAL lasts to the end of this transaction (or is undone by the rollback to the
     * savepoint); the session's own lock_timeout comes back after it. */
    if (st == DB_ERR_TIMEOUT) /* in progress: it may still commit, so readers stop before it */
        return db_exec(s->c, "ROLLBACK TO SAVEPOINT fill", err);
    if (st != DB_OK)
        return st;
    *filled = 1;
    return db_exec(s->c, "RELEASE SAVEPOINT fill", err);
}

static enum db_status read_log(const struct log_src *s, int64_t after, int limit, PGresult **rows,
                               int *usable, struct db_error *err)
{
    char a[DB_INT_TEXT], l[DB_INT_TEXT];
    snprintf(a, sizeof(a), "%" PRId64, after);
    snprintf(l, sizeof(l), "%d", limit);
    *usable = 0;
    for (int round = 0; round < 4; round++) {
        PQclear(*rows);
        *rows = NULL;
        enum db_status st = log_run(s, 0, a, l, rows, err);
        if (st != DB_OK)
            return st;
        *usable = first_gap(*rows, after);
        if (*usable == PQntuples(*rows))
            return DB_OK;
        int64_t from =
            *usable == 0 ? after + 1 : strtoll(PQgetvalue(*rows, *usable - 1, 0), NULL, 10) + 1;
        int64_t to = strtoll(PQgetvalue(*rows, *usable, 0), NULL, 10) - 1;
        int filled = 0;
        st = fill_holes(s, from, to, &filled, err);
        if (st != DB_OK || !filled)
            return st;
    }
    return DB_OK;
}

enum db_status db_gen_read_log(struct db_conn *c, const struct db_gen *g, const char *read_sql,
                               const char *fill_sql, int64_t after, int limit, PGresult **rows,
                               int *usable, struct db_error *err)
{
    struct log_src s = {.c = c, .g = g, .read_sql = read_sql, .fill_sql = fill_sql};
    return read_log(&s, after, limit, rows, usable, err);
}

enum db_status db_read_log(struct db_conn *c, const struct db_stmt *read,
                           const struct db_stmt *fill, const char *id, int64_t after, int limit,
                           PGresult **rows, int *usable, struct db_error *err)
{
    struct log_src s = {.c = c, .read = read, .fill = fill, .id = id};
    return read_log(&s, after, limit, rows, usable, err);
}
