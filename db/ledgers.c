/* Ledgers (see ledgers.h). Statements on a ledger's generated tables are templates: {o} objects,
 * {d} displays, {t} transactions (execution status), {e} events, {q} the event offset sequence,
 * {c} checkpoints. The version guard is one predicate, written once (VERSION_GUARD), composed
 * into the object and display upserts; both paths call the same effect functions. */
#include "db/ledgers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/resource_tables.h"
#include "db/ledgers_internal.h"
#include "db/tx.h"

static const struct db_gen_table ledger_tables[] = {{'o', "objects_", ""},
                                                    {'d', "displays_", ""},
                                                    {'t', "transactions_", ""},
                                                    {'e', "events_", ""},
                                                    {'q', "events_", "_offset"},
                                                    {'c', "checkpoints_", ""},
                                                    {0, 0, 0}};

/* Objects and displays only move forward: a write whose version is not above the stored one
 * changes nothing. (An object row at the same version also gains the checkpoint that carried
 * it, once known: that is what lets a tombstone be purged below the horizon.) */
#define VERSION_GUARD(row) row ".version < EXCLUDED.version"

static const struct db_stmt st_ledger_resolve = {
    "ledger_resolve",
    "SELECT id, name, tombstone_retention_seconds, horizon, " DB_TS(
        "created_at") " FROM rowlock.ledgers WHERE name = $1",
    1};
static const struct db_stmt st_ledger_insert = {
    "ledger_insert",
    "INSERT INTO rowlock.ledgers (name, tombstone_retention_seconds) VALUES ($1, $2) "
    "ON CONFLICT (name) DO NOTHING RETURNING id",
    2};
static const struct db_stmt st_ledger_update = {
    "ledger_update",
    "UPDATE rowlock.ledgers SET tombstone_retention_seconds = $2, updated_at = now() "
    "WHERE name = $1",
    2};
static const struct db_stmt st_ledger_tables = {"ledger_tables",
                                                "SELECT rowlock.ledger_create_tables($1)", 1};
static const struct db_stmt st_ledger_counts = {"ledger_counts",
                                                "SELECT * FROM rowlock.ledger_counts($1)", 1};
static const struct db_stmt st_page_budget = {
    "ledger_page_budget", "SELECT set_config('rowlock.page_budget', $1, true)", 1};

/* The execution-status rows: created if missing (in digest order), then locked in digest order,
 * so that two checkpoints (or a checkpoint and an optimistic submission) cannot deadlock. */
static const char sql_status_create[] =
    "INSERT INTO {t} (digest) SELECT d FROM unnest($1::text[]) d ORDER BY d "
    "ON CONFLICT (digest) DO NOTHING";
/* clang-format off */
static const char sql_status_lock[] =
    "SELECT digest, executed, coalesce(path, ''), coalesce(checkpoint, 0), "
    "coalesce(" DB_TS("executed_at") ", '') "
    "FROM {t} WHERE digest = ANY($1::text[]) ORDER BY digest FOR UPDATE";
/* clang-format on */
static const char sql_status_read[] =
    "SELECT digest, executed, coalesce(path, ''), coalesce(checkpoint, 0), "
    "coalesce(" DB_TS("executed_at") ", '') FROM {t} WHERE digest = $1";
/* Marks transactions executed ($2 path, $3 checkpoint or NULL); those executed before keep
 * their path and time and learn their checkpoint. */
static const char sql_status_mark[] =
    "UPDATE {t} SET executed = true, path = coalesce(path, $2), "
    "executed_at = coalesce(executed_at, now()), checkpoint = coalesce(checkpoint, $3::bigint) "
    "WHERE digest = ANY($1::text[])";

/* One version-guarded upsert for writes and deletes (a delete is a tombstone upsert). A batch
 * touching one object twice is collapsed to its highest version (the later one on a tie), and
 * rows are written in object-id order. $1 ids, $2 versions, $3 deleted, $4 types, $5 data,
 * $6 order, $7 checkpoint or NULL. */
/* clang-format off */
static const char sql_objects[] =
    "WITH input AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bool[], $4::text[], "
    "  $5::text[], $6::int[]) AS u(object_id, version, deleted, type, data, ord)), "
    "best AS (SELECT DISTINCT ON (object_id) * FROM input "
    "  ORDER BY object_id, version DESC, ord DESC) "
    "INSERT INTO {o} AS o (object_id, version, deleted, type, data, checkpoint) "
    "SELECT object_id, version, deleted, CASE WHEN deleted THEN NULL ELSE type END, "
    "  CASE WHEN deleted THEN NULL ELSE data::jsonb END, $7::bigint FROM best ORDER BY object_id "
    "ON CONFLICT (object_id) DO UPDATE SET "
    "  version = CASE WHEN " VERSION_GUARD("o") " THEN EXCLUDED.version ELSE o.version END, "
    "  deleted = CASE WHEN " VERSION_GUARD("o") " THEN EXCLUDED.deleted ELSE o.deleted END, "
    "  type = CASE WHEN " VERSION_GUARD("o") " THEN EXCLUDED.type ELSE o.type END, "
    "  data = CASE WHEN " VERSION_GUARD("o") " THEN EXCLUDED.data ELSE o.data END, "
    "  checkpoint = CASE WHEN " VERSION_GUARD("o") " THEN EXCLUDED.checkpoint "
    "    ELSE coalesce(o.checkpoint, EXCLUDED.checkpoint) END, "
    "  updated_at = CASE WHEN " VERSION_GUARD("o") " THEN now() ELSE o.updated_at END "
    /* at the same version the row only learns the checkpoint that carried it */
    "WHERE " VERSION_GUARD("o") " OR (o.version = EXCLUDED.version AND o.checkpoint IS NULL "
    "  AND EXCLUDED.checkpoint IS NOT NULL)";
/* clang-format on */
/* Displays, guarded the same way. $1 types, $2 versions, $3 data, $4 order. */
static const char sql_displays[] =
    "WITH input AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[]) "
    "  AS u(type, version, data, ord)), "
    "best AS (SELECT DISTINCT ON (type) * FROM input ORDER BY type, version DESC, ord DESC) "
    "INSERT INTO {d} AS d (type, version, data) SELECT type, version, data::jsonb FROM best "
    "ORDER BY type ON CONFLICT (type) DO UPDATE SET version = EXCLUDED.version, "
    "  data = EXCLUDED.data, updated_at = now() WHERE " VERSION_GUARD("d");
/* Events of transactions executed now, in order: $1 digests, $2 indexes, $3 types, $4 data. */
static const char sql_events[] =
    "INSERT INTO {e} (\"offset\", digest, index, type, data) "
    "SELECT nextval('{q}'), digest, idx, type, data::jsonb FROM (SELECT * FROM unnest("
    "  $1::text[], $2::int[], $3::text[], $4::text[]) WITH ORDINALITY "
    "  AS u(digest, idx, type, data, ord) ORDER BY ord) x";
static const char sql_checkpoint_seen[] = "SELECT 1 FROM {c} WHERE sequence = $1";
static const char sql_checkpoint_record[] =
    "INSERT INTO {c} (sequence, transactions) VALUES ($1, $2) ON CONFLICT (sequence) DO NOTHING "
    "RETURNING sequence";
/* Inputs as stored: $1 ids. */
static const char sql_inputs[] =
    "SELECT object_id, version, deleted FROM {o} WHERE object_id = ANY($1::text[])";
static const char sql_object_get[] = "SELECT version, deleted, type, data::text, " DB_TS(
    "updated_at") " FROM {o} WHERE object_id = $1";
static const char sql_display_get[] =
    "SELECT version, false, type, data::text, " DB_TS("updated_at") " FROM {d} WHERE type = $1";
/* A page of the event log: $1 after, $2 limit, and the byte budget of event data in the
 * transaction-local setting rowlock.page_budget (the shared gap-safe reader passes only after and
 * limit). Rows are taken one at a time with a running sum of their data's text size, and the walk
 * stops at the first row past the budget, so PostgreSQL itself never reads further than that
 * one; the first row is always served, alone when it is larger than the budget. */
#define PAGE_BUDGET "current_setting('rowlock.page_budget')::bigint"
static const char sql_events_read[] =
    "WITH RECURSIVE page AS ("
    "  (SELECT \"offset\", hole, digest, index, type, data::text AS data, created_at, 1 AS n, "
    "     coalesce(octet_length(data::text), 0)::bigint AS run "
    "   FROM {e} WHERE \"offset\" > $1 ORDER BY \"offset\" LIMIT 1) "
    "  UNION ALL "
    "  SELECT x.*, p.n + 1, p.run + coalesce(octet_length(x.data), 0) FROM page p "
    "  CROSS JOIN LATERAL (SELECT \"offset\", hole, digest, index, type, data::text AS data, "
    "     created_at FROM {e} WHERE \"offset\" > p.\"offset\" ORDER BY \"offset\" LIMIT 1) x "
    "  WHERE p.n < $2 AND p.run <= " PAGE_BUDGET ") "
    "SELECT \"offset\", hole, digest, index, type, data, " DB_TS(
        "created_at") " FROM page WHERE n = 1 OR run <= " PAGE_BUDGET " ORDER BY \"offset\"";
static const char sql_events_fill[] =
    "INSERT INTO {e} (\"offset\", hole) SELECT g, true FROM generate_series($1::bigint, "
    "$2::bigint) g ON CONFLICT (\"offset\") DO NOTHING";

/* ---- helpers ---- */

enum db_status db_ledger_query(struct db_conn *c, int64_t ledger, const char *tag, const char *sql,
                               int nparams, const char *const *params, PGresult **out,
                               struct db_error *err)
{
    struct db_gen g = {'l', ledger, ledger_tables};
    return db_gen_query(c, &g, tag, sql, nparams, params, out, err);
}

/* Reads a row of st_ledger_resolve (if any) into l; clears r. */
static void resolved(PGresult *r, struct db_ledger *l, int *found)
{
    *found = 0;
    if (PQntuples(r) == 1) {
        l->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        db_copy(l->name, sizeof(l->name), PQgetvalue(r, 0, 1));
        l->tombstone_retention_seconds = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        l->horizon = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
        db_copy(l->created_at, sizeof(l->created_at), PQgetvalue(r, 0, 4));
        *found = 1;
    }
    PQclear(r);
}

static enum db_status resolve(struct db_conn *c, const char *name, struct db_ledger *l, int *found,
                              struct db_error *err)
{
    const char *params[] = {name};
    PGresult *r = NULL;
    *found = 0;
    enum db_status st = db_query(c, &st_ledger_resolve, params, &r, err);
    if (st == DB_OK)
        resolved(r, l, found);
    return st;
}

static void status_from_row(const PGresult *r, int i, struct db_ledger_status *s)
{
    memset(s, 0, sizeof(*s));
    s->executed = PQgetvalue(r, i, 1)[0] == 't';
    db_copy(s->path, sizeof(s->path), PQgetvalue(r, i, 2));
    s->checkpoint = strtoll(PQgetvalue(r, i, 3), NULL, 10);
    db_copy(s->executed_at, sizeof(s->executed_at), PQgetvalue(r, i, 4));
}

/* ---- effects: the same functions for both paths ---- */

struct flat_object {
    const struct db_ledger_object *o;
    int ord;
};

static const char *object_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct flat_object *f = (const struct flat_object *)items + i;
    switch (col) {
    case 0:
        return f->o->object_id;
    case 1:
        snprintf(buf, size, "%" PRId64, f->o->version);
        return buf;
    case 2:
        return f->o->deleted ? "t" : "f";
    case 3:
        return f->o->deleted ? NULL : f->o->type;
    case 4:
        return f->o->deleted ? NULL : f->o->data;
    default:
        snprintf(buf, size, "%d", f->ord);
        return buf;
    }
}

struct flat_display {
    const struct db_ledger_display *d;
    int ord;
};

static const char *display_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct flat_display *f = (const struct flat_display *)items + i;
    switch (col) {
    case 0:
        return f->d->type;
    case 1:
        snprintf(buf, size, "%" PRId64, f->d->version);
        return buf;
    case 2:
        return f->d->data;
    default:
        snprintf(buf, size, "%d", f->ord);
        return buf;
    }
}

struct flat_event {
    const char *digest;
    const struct db_ledger_event *e;
    int index;
};

static const char *event_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct flat_event *f = (const struct flat_event *)items + i;
    switch (col) {
    case 0:
        return f->digest;
    case 1:
        snprintf(buf, size, "%d", f->index);
        return buf;
    case 2:
        return f->e->type;
    default:
        return f->e->data;
    }
}

/* Runs one set-based statement over n flattened rows: one array parameter per column, then
 * nextra more parameters (extra, which may be SQL NULL). */
static enum db_status run_flat(struct db_conn *c, int64_t ledger, const char *tag, const char *sql,
                               const void *rows, size_t n, size_t ncols, db_column_fn get,
                               int nextra, const char *extra, struct db_error *err)
{
    if (n == 0)
        return DB_OK;
    struct db_arrays arr = {0, 0, NULL};
    enum db_status st = DB_ERR_HARD;
    if (db_arrays_build(&arr, rows, n, ncols, get) != 0) {
        db_error_set(err, "", "out of memory");
    } else {
        const char *params[8] = {NULL};
        for (size_t k = 0; k < ncols; k++)
            params[k] = arr.arr[k];
        params[ncols] = extra;
        st = db_ledger_query(c, ledger, tag, sql, (int)ncols + nextra, params, NULL, err);
    }
    db_arrays_free(&arr);
    return st;
}

/* Object and display effects of txs (all of them: re-applying is a no-op by the version
 * guard). checkpoint: the carrying checkpoint, or NULL. */
static enum db_status apply_versioned(struct db_conn *c, int64_t ledger,
                                      const struct db_ledger_tx *txs, size_t n,
                                      const char *checkpoint, struct db_error *err)
{
    size_t no = 0, nd = 0;
    for (size_t i = 0; i < n; i++) {
        no += txs[i].nobjects;
        nd += txs[i].ndisplays;
    }
    struct flat_object *fo = calloc(no ? no : 1, sizeof(*fo));
    struct flat_display *fd = calloc(nd ? nd : 1, sizeof(*fd));
    enum db_status st = DB_ERR_HARD;
    if (fo == NULL || fd == NULL) {
        db_error_set(err, "", "out of memory");
        goto done;
    }
    size_t io = 0, id = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < txs[i].nobjects; k++, io++)
            fo[io] = (struct flat_object){&txs[i].objects[k], (int)io};
        for (size_t k = 0; k < txs[i].ndisplays; k++, id++)
            fd[id] = (struct flat_display){&txs[i].displays[k], (int)id};
    }
    /* objects first, then displays: the same order on both paths */
    st = run_flat(c, ledger, "objects", sql_objects, fo, no, 6, object_column, 1, checkpoint, err);
    if (st == DB_OK)
        st = run_flat(c, ledger, "displays", sql_displays, fd, nd, 4, display_column, 0, NULL, err);
done:
    free(fo);
    free(fd);
    return st;
}

/* Events of the transactions in txs whose execute[i] is set, in order. */
static enum db_status insert_events(struct db_conn *c, int64_t ledger,
                                    const struct db_ledger_tx *txs, size_t n, const int *execute,
                                    struct db_error *err)
{
    size_t ne = 0;
    for (size_t i = 0; i < n; i++)
        ne += execute[i] ? txs[i].nevents : 0;
    struct flat_event *fe = calloc(ne ? ne : 1, sizeof(*fe));
    if (fe == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    size_t ie = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; execute[i] && k < txs[i].nevents; k++)
            fe[ie++] = (struct flat_event){txs[i].digest, &txs[i].events[k], (int)k};
    enum db_status st =
        run_flat(c, ledger, "events", sql_events, fe, ne, 4, event_column, 0, NULL, err);
    free(fe);
    return st;
}

/* Creates and locks the execution-status rows of txs in digest order; executed[i] gets whether
 * tx i had been executed before. */
static enum db_status lock_statuses(struct db_conn *c, int64_t ledger,
                                    const struct db_ledger_tx *txs, size_t n, int *executed,
                                    struct db_ledger_status *first, struct db_error *err)
{
    const char **digests = calloc(n ? n : 1, sizeof(char *));
    if (digests == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    for (size_t i = 0; i < n; i++)
        digests[i] = txs[i].digest;
    char *arr = db_text_array(digests, n);
    free(digests);
    if (arr == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    const char *params[] = {arr};
    PGresult *r = NULL;
    enum db_status st =
        db_ledger_query(c, ledger, "status_create", sql_status_create, 1, params, NULL, err);
    if (st == DB_OK)
        st = db_ledger_query(c, ledger, "status_lock", sql_status_lock, 1, params, &r, err);
    free(arr);
    for (int row = 0; st == DB_OK && row < PQntuples(r); row++) {
        for (size_t i = 0; i < n; i++) {
            if (strcmp(txs[i].digest, PQgetvalue(r, row, 0)) != 0)
                continue;
            executed[i] = PQgetvalue(r, row, 1)[0] == 't';
            if (i == 0 && first != NULL)
                status_from_row(r, row, first);
        }
    }
    PQclear(r);
    return st;
}

static enum db_status mark_executed(struct db_conn *c, int64_t ledger,
                                    const struct db_ledger_tx *txs, size_t n, const char *path,
                                    const char *checkpoint, struct db_error *err)
{
    const char **digests = calloc(n ? n : 1, sizeof(char *));
    if (digests == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    for (size_t i = 0; i < n; i++)
        digests[i] = txs[i].digest;
    char *arr = db_text_array(digests, n);
    free(digests);
    const char *params[] = {arr, path, checkpoint};
    enum db_status st =
        arr ? db_ledger_query(c, ledger, "status_mark", sql_status_mark, 3, params, NULL, err)
            : DB_ERR_HARD;
    free(arr);
    return st;
}

/* ---- workflows ---- */

struct put_ledger {
    const char *name;
    int64_t retention;
    struct db_ledger *out;
    enum db_ledger_verdict verdict;
};

static enum db_status put_ledger_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct put_ledger *a = arg;
    char ret[DB_INT_TEXT];
    db_i64(ret, sizeof(ret), a->retention);
    const char *params[] = {a->name, ret};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_ledger_insert, params, &r, err);
    if (st != DB_OK)
        return st;
    int created = PQntuples(r) == 1;
    char id[DB_INT_TEXT] = "";
    if (created)
        db_copy(id, sizeof(id), PQgetvalue(r, 0, 0));
    PQclear(r);
    if (created) {
        const char *idp[] = {id};
        st = db_query(c, &st_ledger_tables, idp, NULL, err);
    } else {
        st = db_query(c, &st_ledger_update, params, NULL, err);
    }
    a->verdict = created ? DB_L_APPLIED : DB_L_OK;
    int found = 0;
    if (st == DB_OK)
        st = resolve(c, a->name, a->out, &found, err);
    return st;
}

enum db_status db_ledgers_put(struct db_pool *pool, const char *name, int64_t retention_seconds,
                              struct db_ledger *out, enum db_ledger_verdict *verdict,
                              struct db_error *err)
{
    struct put_ledger a = {name, retention_seconds, out, DB_L_OK};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, put_ledger_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct get_ledger {
    const char *name;
    struct db_ledger *out;
    struct db_ledger_counts *counts;
    enum db_ledger_verdict verdict;
};

static enum db_status get_ledger_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct get_ledger *a = arg;
    int found = 0;
    a->verdict = DB_L_NOT_FOUND;
    enum db_status st = resolve(c, a->name, a->out, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->out->id);
    const char *params[] = {id};
    PGresult *r = NULL;
    st = db_query(c, &st_ledger_counts, params, &r, err);
    if (st != DB_OK)
        return st;
    int64_t *v[] = {&a->counts->objects, &a->counts->tombstones,  &a->counts->transactions,
                    &a->counts->events,  &a->counts->checkpoints, &a->counts->watermark};
    for (int i = 0; i < 6; i++)
        *v[i] = strtoll(PQgetvalue(r, 0, i), NULL, 10);
    PQclear(r);
    a->verdict = DB_L_OK;
    return db_ledger_pending(c, a->out->id, &a->counts->pending, err);
}

static const struct db_stmt st_ledger_delete = {
    "ledger_delete", "DELETE FROM rowlock.ledgers WHERE name = $1 RETURNING id", 1};
static const struct db_stmt st_ledger_drop = {"ledger_drop_tables",
                                              "SELECT rowlock.ledger_drop_tables($1)", 1};

struct delete_ledger {
    const char *name;
    enum db_ledger_verdict verdict;
};

static enum db_status delete_ledger_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct delete_ledger *a = arg;
    const char *params[] = {a->name};
    PGresult *r = NULL;
    a->verdict = DB_L_NOT_FOUND;
    enum db_status st = db_query(c, &st_ledger_delete, params, &r, err);
    if (st != DB_OK || PQntuples(r) == 0) {
        PQclear(r);
        return st;
    }
    const char *idp[] = {PQgetvalue(r, 0, 0)};
    /* DROP waits for every transaction that already touched the tables */
    st = db_query(c, &st_ledger_drop, idp, NULL, err);
    PQclear(r);
    a->verdict = DB_L_OK;
    return st;
}

enum db_status db_ledgers_delete(struct db_pool *pool, const char *name,
                                 enum db_ledger_verdict *verdict, struct db_error *err)
{
    struct delete_ledger a = {name, DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, delete_ledger_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

enum db_status db_ledgers_get(struct db_pool *pool, const char *name, struct db_ledger *out,
                              struct db_ledger_counts *counts, enum db_ledger_verdict *verdict,
                              struct db_error *err)
{
    struct get_ledger a = {name, out, counts, DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, get_ledger_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct check {
    const char *name;
    const struct db_ledger_tx *tx;
    struct db_ledger_status *status;
    enum db_ledger_verdict verdict;
};

/* Compares the inputs with the stored objects: pending when one is absent or older, superseded
 * when one is newer (or deleted at or past the version). */
static enum db_ledger_verdict judge_inputs(const PGresult *r, const struct db_ledger_tx *tx)
{
    enum db_ledger_verdict v = DB_L_OK;
    for (size_t i = 0; i < tx->ninputs; i++) {
        const struct db_ledger_input *in = &tx->inputs[i];
        int row = -1;
        for (int k = 0; k < PQntuples(r) && row < 0; k++)
            if (strcmp(PQgetvalue(r, k, 0), in->object_id) == 0)
                row = k;
        if (row < 0) {
            v = DB_L_DEPS_PENDING;
            continue;
        }
        int64_t stored = strtoll(PQgetvalue(r, row, 1), NULL, 10);
        int deleted = PQgetvalue(r, row, 2)[0] == 't';
        if (stored > in->version || (deleted && stored >= in->version))
            return DB_L_SUPERSEDED; /* waiting cannot help */
        if (stored < in->version)
            v = DB_L_DEPS_PENDING;
    }
    return v;
}

static enum db_status check_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct check *a = arg;
    struct db_ledger l;
    int found = 0;
    memset(a->status, 0, sizeof(*a->status));
    a->verdict = DB_L_NOT_FOUND;
    enum db_status st = resolve(c, a->name, &l, &found, err);
    if (st != DB_OK || !found)
        return st;
    const char *dp[] = {a->tx->digest};
    PGresult *r = NULL;
    st = db_ledger_query(c, l.id, "status_read", sql_status_read, 1, dp, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1)
        status_from_row(r, 0, a->status);
    PQclear(r);
    if (a->status->executed) {
        a->verdict = DB_L_REPLAY;
        return DB_OK;
    }
    const char **ids = calloc(a->tx->ninputs ? a->tx->ninputs : 1, sizeof(char *));
    if (ids == NULL)
        return DB_ERR_HARD;
    for (size_t i = 0; i < a->tx->ninputs; i++)
        ids[i] = a->tx->inputs[i].object_id;
    char *arr = db_text_array(ids, a->tx->ninputs);
    free(ids);
    const char *ip[] = {arr};
    st = arr ? db_ledger_query(c, l.id, "inputs", sql_inputs, 1, ip, &r, err) : DB_ERR_HARD;
    free(arr);
    if (st != DB_OK)
        return st;
    a->verdict = judge_inputs(r, a->tx);
    PQclear(r);
    return DB_OK;
}

enum db_status db_ledgers_check(struct db_pool *pool, const char *name,
                                const struct db_ledger_tx *tx, struct db_ledger_status *status,
                                enum db_ledger_verdict *verdict, struct db_error *err)
{
    struct check a = {name, tx, status, DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, check_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct apply {
    const char *name;
    const struct db_ledger_tx *tx;
    int lock_timeout_ms;
    struct db_ledger_status *status;
    enum db_ledger_verdict verdict;
};

static enum db_status apply_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct apply *a = arg;
    struct db_ledger l;
    int found = 0, executed = 0;
    memset(a->status, 0, sizeof(*a->status));
    a->verdict = DB_L_NOT_FOUND;
    /* bounded lock waits: an optimistic submission never stalls checkpoint ingestion for long */
    char set[64];
    snprintf(set, sizeof(set), "SET LOCAL lock_timeout = %d", a->lock_timeout_ms);
    enum db_status st = db_exec(c, set, err);
    if (st == DB_OK)
        st = resolve(c, a->name, &l, &found, err);
    if (st != DB_OK || !found)
        return st;
    st = lock_statuses(c, l.id, a->tx, 1, &executed, a->status, err);
    if (st != DB_OK)
        return st;
    if (executed) {
        a->verdict = DB_L_REPLAY;
        return DB_OK;
    }
    int one = 1;
    st = apply_versioned(c, l.id, a->tx, 1, NULL, err);
    if (st == DB_OK)
        st = insert_events(c, l.id, a->tx, 1, &one, err);
    if (st == DB_OK)
        st = mark_executed(c, l.id, a->tx, 1, "optimistic", NULL, err);
    const char *dp[] = {a->tx->digest};
    PGresult *r = NULL;
    if (st == DB_OK)
        st = db_ledger_query(c, l.id, "status_read", sql_status_read, 1, dp, &r, err);
    if (st == DB_OK && PQntuples(r) == 1)
        status_from_row(r, 0, a->status);
    PQclear(r);
    a->verdict = DB_L_APPLIED;
    return st;
}

enum db_status db_ledgers_apply(struct db_pool *pool, const char *name,
                                const struct db_ledger_tx *tx, int lock_timeout_ms,
                                struct db_ledger_status *status, enum db_ledger_verdict *verdict,
                                struct db_error *err)
{
    struct apply a = {.name = name,
                      .tx = tx,
                      .lock_timeout_ms = lock_timeout_ms,
                      .status = status,
                      .verdict = DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, apply_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct checkpoint {
    const char *name;
    int64_t sequence;
    const struct db_ledger_tx *txs;
    size_t n, applied, skipped;
    enum db_ledger_verdict verdict;
};

static enum db_status checkpoint_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct checkpoint *a = arg;
    struct db_ledger l;
    int found = 0;
    a->applied = a->skipped = 0;
    a->verdict = DB_L_NOT_FOUND;
    enum db_status st = resolve(c, a->name, &l, &found, err);
    if (st != DB_OK || !found)
        return st;
    char seq[DB_INT_TEXT], count[DB_INT_TEXT];
    db_i64(seq, sizeof(seq), a->sequence);
    snprintf(count, sizeof(count), "%zu", a->n);
    const char *sp[] = {seq, count};
    PGresult *r = NULL;
    st = db_ledger_query(c, l.id, "checkpoint_seen", sql_checkpoint_seen, 1, sp, &r, err);
    if (st != DB_OK)
        return st;
    int seen = PQntuples(r) == 1;
    PQclear(r);
    if (seen) {
        a->verdict = DB_L_REPLAY;
        return DB_OK;
    }
    if (a->sequence <= l.horizon) {
        a->verdict = DB_L_BELOW_HORIZON;
        return DB_ABORTED;
    }
    int *executed = calloc(a->n ? a->n : 1, sizeof(int));
    int *execute = calloc(a->n ? a->n : 1, sizeof(int));
    if (executed == NULL || execute == NULL) {
        free(executed);
        free(execute);
        return DB_ERR_HARD;
    }
    st = lock_statuses(c, l.id, a->txs, a->n, executed, NULL, err);
    for (size_t i = 0; i < a->n; i++) {
        execute[i] = !executed[i];
        a->applied += execute[i];
    }
    a->skipped = a->n - a->applied;
    if (st == DB_OK)
        st = apply_versioned(c, l.id, a->txs, a->n, seq, err);
    if (st == DB_OK)
        st = insert_events(c, l.id, a->txs, a->n, execute, err);
    if (st == DB_OK)
        st = mark_executed(c, l.id, a->txs, a->n, "checkpoint", seq, err);
    free(executed);
    free(execute);
    if (st == DB_OK)
        st = db_ledger_query(c, l.id, "checkpoint_record", sql_checkpoint_record, 2, sp, &r, err);
    if (st != DB_OK)
        return st;
    /* a concurrent copy of this checkpoint won: everything here was a no-op */
    a->verdict = PQntuples(r) == 1 ? DB_L_APPLIED : DB_L_REPLAY;
    PQclear(r);
    return a->verdict == DB_L_APPLIED ? DB_OK : DB_ABORTED;
}

enum db_status db_ledgers_checkpoint(struct db_pool *pool, const char *name, int64_t sequence,
                                     const struct db_ledger_tx *txs, size_t n, size_t *applied,
                                     size_t *skipped, enum db_ledger_verdict *verdict,
                                     struct db_error *err)
{
    struct checkpoint a = {
        .name = name, .sequence = sequence, .txs = txs, .n = n, .verdict = DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, checkpoint_tx, &a, err);
    *verdict = a.verdict;
    *applied = a.verdict == DB_L_APPLIED ? a.applied : 0;
    *skipped = a.verdict == DB_L_APPLIED ? a.skipped : 0;
    return st == DB_ABORTED ? DB_OK : st;
}

struct lookup {
    const char *name, *key;
    const char *tag, *sql;
    PGresult *rows;
    enum db_ledger_verdict verdict;
};

/* Resolves the ledger and runs one read keyed by a->key. */
static enum db_status lookup_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct lookup *a = arg;
    struct db_ledger l;
    int found = 0;
    PQclear(a->rows);
    a->rows = NULL;
    a->verdict = DB_L_NOT_FOUND;
    enum db_status st = resolve(c, a->name, &l, &found, err);
    if (st != DB_OK || !found)
        return st;
    const char *params[] = {a->key};
    a->verdict = DB_L_OK;
    return db_ledger_query(c, l.id, a->tag, a->sql, 1, params, &a->rows, err);
}

enum db_status db_ledgers_tx_get(struct db_pool *pool, const char *name, const char *digest,
                                 struct db_ledger_status *out, enum db_ledger_verdict *verdict,
                                 struct db_error *err)
{
    struct lookup a = {.name = name,
                       .key = digest,
                       .tag = "status_read",
                       .sql = sql_status_read,
                       .verdict = DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, lookup_tx, &a, err);
    memset(out, 0, sizeof(*out));
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_L_OK) {
        if (PQntuples(a.rows) == 1)
            status_from_row(a.rows, 0, out);
        /* a status row created by a submission still waiting or rolled back says nothing */
        if (!out->executed)
            *verdict = DB_L_TX_NOT_FOUND;
    }
    PQclear(a.rows);
    return st;
}

void db_ledger_item_clear(struct db_ledger_item *it)
{
    free(it->type);
    free(it->data);
    memset(it, 0, sizeof(*it));
}

static enum db_status item_get(struct db_pool *pool, struct lookup *a, struct db_ledger_item *out,
                               enum db_ledger_verdict missing, enum db_ledger_verdict *verdict,
                               struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, lookup_tx, a, err);
    memset(out, 0, sizeof(*out));
    *verdict = a->verdict;
    if (st == DB_OK && a->verdict == DB_L_OK) {
        if (PQntuples(a->rows) == 0) {
            *verdict = missing;
        } else {
            const PGresult *r = a->rows;
            out->version = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            out->deleted = PQgetvalue(r, 0, 1)[0] == 't';
            out->type = PQgetisnull(r, 0, 2) ? NULL : strdup(PQgetvalue(r, 0, 2));
            out->data = PQgetisnull(r, 0, 3) ? NULL : strdup(PQgetvalue(r, 0, 3));
            db_copy(out->updated_at, sizeof(out->updated_at), PQgetvalue(r, 0, 4));
            if (out->deleted)
                *verdict = DB_L_OBJECT_DELETED;
        }
    }
    PQclear(a->rows);
    return st;
}

enum db_status db_ledgers_object_get(struct db_pool *pool, const char *name, const char *id,
                                     struct db_ledger_item *out, enum db_ledger_verdict *verdict,
                                     struct db_error *err)
{
    struct lookup a = {.name = name,
                       .key = id,
                       .tag = "object_get",
                       .sql = sql_object_get,
                       .verdict = DB_L_NOT_FOUND};
    return item_get(pool, &a, out, DB_L_OBJECT_NOT_FOUND, verdict, err);
}

enum db_status db_ledgers_display_get(struct db_pool *pool, const char *name, const char *type,
                                      struct db_ledger_item *out, enum db_ledger_verdict *verdict,
                                      struct db_error *err)
{
    struct lookup a = {.name = name,
                       .key = type,
                       .tag = "display_get",
                       .sql = sql_display_get,
                       .verdict = DB_L_NOT_FOUND};
    return item_get(pool, &a, out, DB_L_DISPLAY_NOT_FOUND, verdict, err);
}

struct events {
    const char *name;
    int64_t after;
    int limit;
    int64_t budget;
    PGresult *rows;
    int usable;
    enum db_ledger_verdict verdict;
};

static enum db_status events_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct events *a = arg;
    struct db_ledger l;
    int found = 0;
    PQclear(a->rows);
    a->rows = NULL;
    a->usable = 0;
    a->verdict = DB_L_NOT_FOUND;
    /* the ledger and the page budget (for sql_events_read) in one round trip */
    char budget[DB_INT_TEXT];
    db_i64(budget, sizeof(budget), a->budget);
    const char *np[] = {a->name}, *bp[] = {budget};
    PGresult *r = NULL;
    const struct db_call calls[] = {{.st = &st_ledger_resolve, .params = np, .out = &r},
                                    {.st = &st_page_budget, .params = bp}};
    enum db_status st = db_query_pipeline(c, calls, 2, err);
    if (st != DB_OK)
        return st;
    resolved(r, &l, &found);
    if (!found)
        return DB_OK;
    a->verdict = DB_L_OK;
    struct db_gen g = {'l', l.id, ledger_tables};
    return db_gen_read_log(c, &g, sql_events_read, sql_events_fill, a->after, a->limit, &a->rows,
                           &a->usable, err);
}

enum db_status db_ledgers_events(struct db_pool *pool, const char *name, int64_t after, int limit,
                                 int64_t budget, db_ledger_event_each each, void *ctx,
                                 int64_t *next, enum db_ledger_verdict *verdict,
                                 struct db_error *err)
{
    struct events a = {
        .name = name, .after = after, .limit = limit, .budget = budget, .verdict = DB_L_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, events_tx, &a, err);
    *verdict = a.verdict;
    *next = after;
    for (int i = 0; st == DB_OK && i < a.usable; i++) {
        const PGresult *r = a.rows;
        int64_t offset = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        if (PQgetvalue(r, i, 1)[0] != 't') { /* else a hole: its transaction rolled back */
            struct db_ledger_event_row e = {
                .offset = offset,
                .digest = PQgetvalue(r, i, 2),
                .index = atoi(PQgetvalue(r, i, 3)),
                .type = PQgetvalue(r, i, 4),
                .data = PQgetvalue(r, i, 5),
                .created_at = PQgetvalue(r, i, 6),
            };
            if (each(&e, (size_t)PQgetlength(r, i, 5), ctx) != 0)
                break;
        }
        *next = offset;
    }
    PQclear(a.rows);
    return st;
}
