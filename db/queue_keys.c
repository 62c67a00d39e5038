/* A queue's concurrency keys (see queues.h, db_queue_key_put): the limits one key has of its
 * own, over the queue's limits for every key, and what its leases hold. The claims that apply
 * them are db/leases.c's limited claim. */
#include <stdlib.h>
#include <string.h>

#include "db/queues_internal.h"
#include "db/tx.h"

/* A key's limits (k: rowlock.queue_keys, q: rowlock.queues): its own (4 columns, 0 for each
 * not set), then those in effect (4), as db_queue_limits_from_row reads each. A key's own rate
 * replaces the queue's rate for every key as a whole (limit, period and burst). */
/* clang-format off */
#define KEY_LIMITS \
    "coalesce(k.concurrency_limit, 0), coalesce(k.rate_limit, 0), " \
    "coalesce(k.rate_period_seconds, 0), coalesce(k.rate_burst, 0), " \
    "coalesce(k.concurrency_limit, q.key_concurrency_limit, 0), " \
    "CASE WHEN k.rate_limit IS NOT NULL THEN k.rate_limit ELSE coalesce(q.key_rate_limit, 0) END, " \
    "CASE WHEN k.rate_limit IS NOT NULL THEN k.rate_period_seconds " \
    "ELSE coalesce(q.key_rate_period_seconds, 0) END, " \
    "CASE WHEN k.rate_limit IS NOT NULL THEN coalesce(k.rate_burst, k.rate_limit) " \
    "ELSE coalesce(q.key_rate_burst, q.key_rate_limit, 0) END"
/* A key's row as struct db_queue_key reads it ($2 or k.key its key): key, whether it has limits
 * of its own, KEY_LIMITS, its live leases, when its own limits were set and changed. */
#define KEY_COLUMNS(key) \
    key ", k.key IS NOT NULL, " KEY_LIMITS ", (SELECT count(*) FROM rowlock.jobs j " \
    "WHERE j.queue_id = q.id AND " JOBS_LEASED " AND j.concurrency_key = " key " " \
    "AND j.lease_expires_at > now()), coalesce(" DB_TS("k.created_at") ", ''), " \
    "coalesce(" DB_TS("k.updated_at") ", '')"
/* clang-format on */

static const struct db_stmt st_key_put = {
    "queue_key_put",
    "WITH k AS (INSERT INTO rowlock.queue_keys AS k (queue_id, key, concurrency_limit, "
    "  rate_limit, rate_period_seconds, rate_burst) "
    "  SELECT q.id, $2, $3, $4, $5, $6 FROM rowlock.queues q WHERE q.name = $1 "
    "  ON CONFLICT (queue_id, key) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit, "
    "  rate_limit = EXCLUDED.rate_limit, rate_period_seconds = EXCLUDED.rate_period_seconds, "
    "  rate_burst = EXCLUDED.rate_burst, updated_at = now() "
    "  RETURNING k.*, (k.xmax = 0) AS created) "
    "SELECT k.created, " KEY_COLUMNS("k.key") " FROM k JOIN rowlock.queues q ON q.id = k.queue_id",
    6};
static const struct db_stmt st_key_get = {
    "queue_key_get",
    "SELECT true, " KEY_COLUMNS("$2::text") " FROM rowlock.queues q "
                                            "LEFT JOIN rowlock.queue_keys k ON k.queue_id = q.id "
                                            "AND k.key = $2 WHERE q.name = $1",
    2};
static const struct db_stmt st_key_delete = {
    "queue_key_delete",
    "WITH q AS (SELECT id FROM rowlock.queues WHERE name = $1), "
    "d AS (DELETE FROM rowlock.queue_keys k USING q WHERE k.queue_id = q.id AND k.key = $2 "
    "  RETURNING k.key) "
    "SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM d)",
    2};
/* $1 the queue's id (db_queue_stmt_in), $2 after (NULL: from the first), $3 limit. */
static const struct db_stmt st_keys_list = {
    "queue_keys_list",
    "SELECT true, " KEY_COLUMNS("k.key") " FROM rowlock.queues q JOIN rowlock.queue_keys k "
                                         "ON k.queue_id = q.id WHERE q.id = $1 AND k.key > "
                                         "coalesce($2, '') ORDER BY k.key LIMIT $3",
    3};

/* Reads row i of a key statement (KEY_COLUMNS from column 1). 0, or -1 out of memory. */
static int key_from_row(const PGresult *r, int i, struct db_queue_key *k)
{
    memset(k, 0, sizeof(*k));
    k->key = strdup(PQgetvalue(r, i, 1));
    k->own = PQgetvalue(r, i, 2)[0] == 't';
    db_queue_limits_from_row(r, i, 3, &k->limits);
    db_queue_limits_from_row(r, i, 7, &k->in_effect);
    k->processing = strtoll(PQgetvalue(r, i, 11), NULL, 10);
    db_copy(k->created_at, sizeof(k->created_at), PQgetvalue(r, i, 12));
    db_copy(k->updated_at, sizeof(k->updated_at), PQgetvalue(r, i, 13));
    return k->key == NULL ? -1 : 0;
}

void db_queue_key_clear(struct db_queue_key *k)
{
    free(k->key);
    memset(k, 0, sizeof(*k));
}

/* One statement's row into *out: found (a row), created (its first column). */
static enum db_status key_one(struct db_pool *pool, const struct db_stmt *stmt,
                              const char *const *params, struct db_queue_key *out, int *created,
                              int *found, struct db_error *err)
{
    struct db_queue_rows a = {stmt, params, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, db_queue_rows_tx, &a, err);
    *found = 0;
    if (st == DB_OK && PQntuples(a.rows) == 1) {
        *found = 1;
        if (created != NULL)
            *created = PQgetvalue(a.rows, 0, 0)[0] == 't';
        if (key_from_row(a.rows, 0, out) != 0) {
            db_error_set(err, "", "out of memory");
            st = DB_ERR_HARD;
        }
    }
    PQclear(a.rows);
    return st;
}

enum db_status db_queue_key_put(struct db_pool *pool, const char *queue, const char *key,
                                const struct db_queue_limits *limits, struct db_queue_key *out,
                                enum db_queue_verdict *verdict, struct db_error *err)
{
    char text[4][32];
    const char *params[6] = {queue, key};
    db_queue_limits_params(limits, text, params + 2);
    int created = 0, found = 0;
    enum db_status st = key_one(pool, &st_key_put, params, out, &created, &found, err);
    *verdict = !found ? DB_Q_QUEUE_NOT_FOUND : created ? DB_Q_CREATED : DB_Q_OK;
    return st;
}

enum db_status db_queue_key_get(struct db_pool *pool, const char *queue, const char *key,
                                struct db_queue_key *out, enum db_queue_verdict *verdict,
                                struct db_error *err)
{
    const char *params[] = {queue, key};
    int found = 0;
    enum db_status st = key_one(pool, &st_key_get, params, out, NULL, &found, err);
    *verdict = found ? DB_Q_OK : DB_Q_QUEUE_NOT_FOUND;
    return st;
}

enum db_status db_queue_key_delete(struct db_pool *pool, const char *queue, const char *key,
                                   enum db_queue_verdict *verdict, struct db_error *err)
{
    const char *params[] = {queue, key};
    struct db_queue_rows a = {&st_key_delete, params, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, db_queue_rows_tx, &a, err);
    *verdict = DB_Q_QUEUE_NOT_FOUND;
    if (st == DB_OK)
        *verdict = PQgetvalue(a.rows, 0, 0)[0] == '0'   ? DB_Q_QUEUE_NOT_FOUND
                   : PQgetvalue(a.rows, 0, 1)[0] == '0' ? DB_Q_KEY_NOT_FOUND
                                                        : DB_Q_OK;
    PQclear(a.rows);
    return st;
}

/* The listing, after the queue's lookup by name (db_queue_stmt_in). */
struct keys_list {
    const char *queue;
    const char **params;
    PGresult *rows;
    int found;
};

static enum db_status keys_list_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct keys_list *a = arg;
    struct db_queue q;
    PQclear(a->rows);
    return db_queue_stmt_in(c, a->queue, &st_keys_list, a->params, 0, 1, &q, &a->found, &a->rows,
                            err);
}

enum db_status db_queue_keys_list(struct db_pool *pool, const char *queue, const char *after,
                                  int limit, db_queue_key_each each, void *ctx,
                                  enum db_queue_verdict *verdict, struct db_error *err)
{
    char lim[DB_INT_TEXT];
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *params[] = {NULL, after, lim};
    struct keys_list a = {queue, params, NULL, 0};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, keys_list_tx, &a, err);
    *verdict = a.found ? DB_Q_OK : DB_Q_QUEUE_NOT_FOUND;
    for (int i = 0; st == DB_OK && a.found && i < PQntuples(a.rows); i++) {
        struct db_queue_key k;
        if (key_from_row(a.rows, i, &k) != 0) {
            db_error_set(err, "", "out of memory");
            st = DB_ERR_HARD;
        } else {
            each(&k, ctx);
        }
        db_queue_key_clear(&k);
    }
    PQclear(a.rows);
    return st;
}

const char *const db_limit_kind_names[DB_LIMIT_KINDS] = {"concurrency", "key_concurrency", "rate",
                                                         "key_rate"};
