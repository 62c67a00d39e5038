/* Consumer cursors of topics (see topic_consumers.h): the statements on rowlock.topic_consumers
 * and the workflows of the REST routes. The log's readable end and the lag are computed by the
 * SQL functions of migration 008 (rowlock.topic_readable_end, rowlock.topic_consumers_lag);
 * the log itself belongs to db/topics.c. */
#include "db/topic_consumers.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/effects.h"
#include "db/sql.h"
#include "db/topics.h"
#include "db/tx.h"

/* A consumer with its lag: $1 topic id; the rows of rowlock.topic_consumers_lag joined with the
 * catalogue for the times. */
/* clang-format off */
#define CONSUMER_SELECT \
    "SELECT l.name, l.\"offset\", " DB_TS("c.created_at") ", " DB_TS("c.committed_at") ", " \
    "l.readable_end, l.lag_messages, l.lag_seconds " \
    "FROM rowlock.topic_consumers_lag($1) l " \
    "JOIN rowlock.topic_consumers c ON c.topic_id = $1 AND c.name = l.name "
/* clang-format on */

static const struct db_stmt st_get = {"consumer_get", CONSUMER_SELECT "WHERE l.name = $2", 2};
static const struct db_stmt st_list = {"consumer_list",
                                       CONSUMER_SELECT "WHERE l.name > coalesce($2, '') "
                                                       "ORDER BY l.name LIMIT $3",
                                       3};
static const struct db_stmt st_exists = {
    "consumer_exists", "SELECT 1 FROM rowlock.topic_consumers WHERE topic_id = $1 AND name = $2",
    2};
/* A consumer is created under the topic row's lock, which the janitor's retention pass shares:
 * a pass never compacts against a list of consumers that misses one being created. */
static const struct db_stmt st_lock_topic = {
    "consumer_lock_topic", "SELECT 1 FROM rowlock.topics WHERE id = $1 FOR NO KEY UPDATE", 1};
static const struct db_stmt st_end = {"consumer_readable_end",
                                      "SELECT rowlock.topic_readable_end($1, $2)", 2};
static const struct db_stmt st_insert = {
    "consumer_insert",
    "INSERT INTO rowlock.topic_consumers (topic_id, name, \"offset\") VALUES ($1, $2, $3) "
    "ON CONFLICT (topic_id, name) DO NOTHING RETURNING 1",
    3};
static const struct db_stmt st_offset = {
    "consumer_offset",
    "SELECT \"offset\" FROM rowlock.topic_consumers WHERE topic_id = $1 AND name = $2", 2};
/* The compare-and-set: the row locked, so that concurrent commits of one consumer take turns
 * and each compares with the offset the one before it committed. */
static const struct db_stmt st_offset_locked = {
    "consumer_offset_locked",
    "SELECT \"offset\" FROM rowlock.topic_consumers WHERE topic_id = $1 AND name = $2 FOR UPDATE",
    2};
static const struct db_stmt st_move = {
    "consumer_move",
    "UPDATE rowlock.topic_consumers SET \"offset\" = $3, committed_at = now() "
    "WHERE topic_id = $1 AND name = $2",
    3};
static const struct db_stmt st_delete = {
    "consumer_delete",
    "DELETE FROM rowlock.topic_consumers WHERE topic_id = $1 AND name = $2 RETURNING 1", 2};
static const struct db_stmt st_lag_all = {
    "consumers_lag_all",
    "SELECT topic, consumer, lag_messages, lag_seconds FROM rowlock.topics_consumers_lag()", 0};
static const struct db_stmt st_lag_topics = {
    "consumers_lag_topics",
    "SELECT DISTINCT t.id, t.name FROM rowlock.topics t "
    "JOIN rowlock.topic_consumers c ON c.topic_id = t.id ORDER BY t.name",
    0};
static const struct db_stmt st_lag_topic = {"consumers_lag_topic",
                                            "SELECT name, lag_messages, lag_seconds FROM "
                                            "rowlock.topic_consumers_lag($1)",
                                            1};

static void consumer_from_row(const PGresult *r, int row, struct db_consumer *c)
{
    snprintf(c->name, sizeof(c->name), "%s", PQgetvalue(r, row, 0));
    c->offset = strtoll(PQgetvalue(r, row, 1), NULL, 10);
    snprintf(c->created_at, sizeof(c->created_at), "%s", PQgetvalue(r, row, 2));
    snprintf(c->committed_at, sizeof(c->committed_at), "%s", PQgetvalue(r, row, 3));
    c->readable_end = strtoll(PQgetvalue(r, row, 4), NULL, 10);
    c->lag_messages = strtoll(PQgetvalue(r, row, 5), NULL, 10);
    c->lag_seconds = atof(PQgetvalue(r, row, 6));
}

/* True when err says the topic is gone (a concurrent DELETE won): a hole recorded for it failed
 * its foreign key (or, as a table would, a relation of it is missing). */
static int topic_missing(const struct db_error *err)
{
    return strcmp(err->sqlstate, "23503") == 0 || strcmp(err->sqlstate, "42P01") == 0;
}

/* The topic is gone: it is not found. */
static enum db_status topic_gone(enum db_status st, const struct db_error *err,
                                 enum db_consumer_verdict *verdict)
{
    if (st == DB_ERR_HARD && topic_missing(err)) {
        *verdict = DB_CONSUMER_TOPIC_NOT_FOUND;
        return DB_ABORTED;
    }
    return st;
}

/* Resolves topic into its id as decimal text; the verdict says TOPIC_NOT_FOUND when there is
 * none (id ""). */
static enum db_status resolve(struct db_conn *c, const char *topic, char id[DB_INT_TEXT],
                              enum db_consumer_verdict *verdict, struct db_error *err)
{
    struct db_topic t;
    int found = 0;
    id[0] = '\0';
    *verdict = DB_CONSUMER_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, topic, &t, &found, err);
    if (st == DB_OK && found) {
        db_i64(id, DB_INT_TEXT, t.id);
        *verdict = DB_CONSUMER_NOT_FOUND;
    }
    return st;
}

/* Reads consumer name of topic id with its lag into *out; verdict OK or NOT_FOUND. */
static enum db_status read_consumer(struct db_conn *c, const char *id, const char *name,
                                    struct db_consumer *out, enum db_consumer_verdict *verdict,
                                    struct db_error *err)
{
    const char *params[] = {id, name};
    PGresult *r = NULL;
    enum db_status st = topic_gone(db_query(c, &st_get, params, &r, err), err, verdict);
    if (st != DB_OK)
        return st;
    *verdict = PQntuples(r) == 1 ? DB_CONSUMER_OK : DB_CONSUMER_NOT_FOUND;
    if (PQntuples(r) == 1)
        consumer_from_row(r, 0, out);
    PQclear(r);
    return DB_OK;
}

/* The readable end of topic id, from offset `from` (known to be readable). */
static enum db_status readable_end(struct db_conn *c, const char *id, int64_t from, int64_t *end,
                                   enum db_consumer_verdict *verdict, struct db_error *err)
{
    char f[DB_INT_TEXT];
    db_i64(f, sizeof(f), from);
    const char *params[] = {id, f};
    PGresult *r = NULL;
    enum db_status st = topic_gone(db_query(c, &st_end, params, &r, err), err, verdict);
    if (st != DB_OK)
        return st;
    *end = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return DB_OK;
}

struct consumer_call {
    const char *topic, *name;
    enum db_consumer_start start;
    int64_t offset;
    const struct db_consumer_commit *commit;
    struct db_consumer *out;
    enum db_consumer_verdict verdict;
};

/* Creates the consumer under the topic row's lock at its start offset (checked against the
 * readable end). */
static enum db_status create_consumer(struct db_conn *c, struct consumer_call *a, const char *id,
                                      int *created, struct db_error *err)
{
    const char *idp[] = {id};
    int64_t end = 0, offset = a->start == DB_CONSUMER_START_OFFSET ? a->offset : 0;
    enum db_status st = db_query(c, &st_lock_topic, idp, NULL, err);
    if (st == DB_OK && a->start != DB_CONSUMER_START_BEGINNING)
        st = readable_end(c, id, 0, &end, &a->verdict, err);
    if (st != DB_OK)
        return st;
    if (a->start == DB_CONSUMER_START_END)
        offset = end;
    if (offset > end) {
        a->verdict = DB_CONSUMER_BEYOND_END;
        a->out->readable_end = end;
        return DB_ABORTED;
    }
    char off[DB_INT_TEXT];
    db_i64(off, sizeof(off), offset);
    const char *params[] = {id, a->name, off};
    PGresult *r = NULL;
    st = db_query(c, &st_insert, params, &r, err);
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23503") == 0) {
        a->verdict = DB_CONSUMER_TOPIC_NOT_FOUND; /* the topic was deleted meanwhile */
        return DB_ABORTED;
    }
    if (st != DB_OK)
        return st;
    *created = PQntuples(r) == 1; /* else another put created it meanwhile */
    PQclear(r);
    return DB_OK;
}

static enum db_status put_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct consumer_call *a = arg;
    char id[DB_INT_TEXT];
    enum db_status st = resolve(c, a->topic, id, &a->verdict, err);
    if (st != DB_OK || id[0] == '\0')
        return st;
    const char *params[] = {id, a->name};
    PGresult *r = NULL;
    st = db_query(c, &st_exists, params, &r, err);
    if (st != DB_OK)
        return st;
    int exists = PQntuples(r) == 1, created = 0;
    PQclear(r);
    if (!exists) {
        st = create_consumer(c, a, id, &created, err);
        if (st != DB_OK)
            return st;
    }
    st = read_consumer(c, id, a->name, a->out, &a->verdict, err);
    if (st == DB_OK && created && a->verdict == DB_CONSUMER_OK)
        a->verdict = DB_CONSUMER_CREATED;
    return st;
}

/* Runs fn and reports its verdict; a workflow that chose to roll back answered with it. */
static enum db_status run(struct db_pool *pool, db_workflow_fn fn, struct consumer_call *a,
                          enum db_consumer_verdict *verdict, struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, fn, a, err);
    *verdict = a->verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

enum db_status db_consumers_put(struct db_pool *pool, const char *topic, const char *name,
                                enum db_consumer_start start, int64_t offset,
                                struct db_consumer *out, enum db_consumer_verdict *verdict,
                                struct db_error *err)
{
    struct consumer_call a = {.topic = topic,
                              .name = name,
                              .start = start,
                              .offset = offset,
                              .out = out,
                              .verdict = DB_CONSUMER_TOPIC_NOT_FOUND};
    memset(out, 0, sizeof(*out));
    return run(pool, put_tx, &a, verdict, err);
}

static enum db_status get_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct consumer_call *a = arg;
    char id[DB_INT_TEXT];
    enum db_status st = resolve(c, a->topic, id, &a->verdict, err);
    if (st != DB_OK || id[0] == '\0')
        return st;
    return read_consumer(c, id, a->name, a->out, &a->verdict, err);
}

enum db_status db_consumers_get(struct db_pool *pool, const char *topic, const char *name,
                                struct db_consumer *out, enum db_consumer_verdict *verdict,
                                struct db_error *err)
{
    struct consumer_call a = {
        .topic = topic, .name = name, .out = out, .verdict = DB_CONSUMER_TOPIC_NOT_FOUND};
    memset(out, 0, sizeof(*out));
    return run(pool, get_tx, &a, verdict, err);
}

static enum db_status delete_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct consumer_call *a = arg;
    char id[DB_INT_TEXT];
    enum db_status st = resolve(c, a->topic, id, &a->verdict, err);
    if (st != DB_OK || id[0] == '\0')
        return st;
    const char *params[] = {id, a->name};
    PGresult *r = NULL;
    st = db_query(c, &st_delete, params, &r, err);
    if (st != DB_OK)
        return st;
    a->verdict = PQntuples(r) == 1 ? DB_CONSUMER_OK : DB_CONSUMER_NOT_FOUND;
    PQclear(r);
    return DB_OK;
}

enum db_status db_consumers_delete(struct db_pool *pool, const char *topic, const char *name,
                                   enum db_consumer_verdict *verdict, struct db_error *err)
{
    struct consumer_call a = {.topic = topic, .name = name, .verdict = DB_CONSUMER_TOPIC_NOT_FOUND};
    return run(pool, delete_tx, &a, verdict, err);
}

/* The commit: the consumer's row locked, its offset compared with expect and with the offset
 * asked for, which must be readable; then moved. A refusal writes nothing and reads the consumer
 * as it is into *out. */
static enum db_status commit_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct consumer_call *a = arg;
    const struct db_consumer_commit *k = a->commit;
    int64_t end = 0;
    char id[DB_INT_TEXT], off[DB_INT_TEXT];
    if (k->fx != NULL)
        k->fx->applied = 0;
    enum db_status st = resolve(c, a->topic, id, &a->verdict, err);
    if (st != DB_OK || id[0] == '\0')
        return st;
    const char *params[] = {id, a->name, off};
    PGresult *r = NULL;
    st = db_query(c, &st_offset_locked, params, &r, err);
    if (st != DB_OK)
        return st;
    int found = PQntuples(r) == 1;
    int64_t cur = found ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
    PQclear(r);
    if (!found)
        return DB_OK; /* NOT_FOUND */
    int refused = (k->has_expect && k->expect != cur) || k->offset < cur;
    if (!refused && k->offset > cur) {
        st = readable_end(c, id, cur, &end, &a->verdict, err);
        if (st != DB_OK)
            return st;
        if (k->offset > end) {
            a->verdict = DB_CONSUMER_BEYOND_END;
            refused = 1;
        } else {
            db_i64(off, sizeof(off), k->offset);
            st = db_query(c, &st_move, params, NULL, err);
            if (st == DB_OK && k->fx != NULL)
                st = db_effects_apply(c, k->fx, err);
            if (st != DB_OK)
                return st; /* a refused effect: DB_ABORTED, nothing moved */
        }
    }
    enum db_consumer_verdict why =
        refused && a->verdict != DB_CONSUMER_BEYOND_END ? DB_CONSUMER_CONFLICT : a->verdict;
    if (st == DB_OK)
        st = read_consumer(c, id, a->name, a->out, &a->verdict, err);
    if (st == DB_OK && refused && a->verdict == DB_CONSUMER_OK)
        a->verdict = why;
    return st;
}

enum db_status db_consumers_commit(struct db_pool *pool, const char *topic, const char *name,
                                   const struct db_consumer_commit *commit, struct db_consumer *out,
                                   enum db_consumer_verdict *verdict, struct db_error *err)
{
    struct consumer_call a = {.topic = topic,
                              .name = name,
                              .commit = commit,
                              .out = out,
                              .verdict = DB_CONSUMER_TOPIC_NOT_FOUND};
    memset(out, 0, sizeof(*out));
    return run(pool, commit_tx, &a, verdict, err);
}

struct list_call {
    const char *topic, *after;
    int limit;
    PGresult *rows;
    enum db_consumer_verdict verdict;
};

static enum db_status list_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct list_call *a = arg;
    char id[DB_INT_TEXT], limit[DB_INT_TEXT];
    PQclear(a->rows);
    a->rows = NULL;
    enum db_status st = resolve(c, a->topic, id, &a->verdict, err);
    if (st != DB_OK || id[0] == '\0')
        return st;
    snprintf(limit, sizeof(limit), "%d", a->limit);
    const char *params[] = {id, a->after, limit};
    a->verdict = DB_CONSUMER_OK;
    return topic_gone(db_query(c, &st_list, params, &a->rows, err), err, &a->verdict);
}

enum db_status db_consumers_list(struct db_pool *pool, const char *topic, const char *after,
                                 int limit, db_consumer_each each, void *ctx,
                                 enum db_consumer_verdict *verdict, struct db_error *err)
{
    struct list_call a = {
        .topic = topic, .after = after, .limit = limit, .verdict = DB_CONSUMER_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_tx, &a, err);
    *verdict = a.verdict;
    for (int i = 0; st == DB_OK && a.verdict == DB_CONSUMER_OK && i < PQntuples(a.rows); i++) {
        struct db_consumer one;
        consumer_from_row(a.rows, i, &one);
        each(&one, ctx);
    }
    PQclear(a.rows);
    return st == DB_ABORTED ? DB_OK : st;
}

enum db_status db_consumer_offset(struct db_conn *c, int64_t topic_id, const char *name,
                                  int64_t *offset, int *found, struct db_error *err)
{
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), topic_id);
    const char *params[] = {id, name};
    PGresult *r = NULL;
    *found = 0;
    *offset = 0;
    enum db_status st = db_query(c, &st_offset, params, &r, err);
    if (st != DB_OK)
        return st;
    *found = PQntuples(r) == 1;
    if (*found)
        *offset = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return DB_OK;
}

/* ---- metrics ---- */

struct lag_rows {
    const struct db_stmt *stmt;
    const char *id; /* the topic id for st_lag_topic */
    PGresult *rows;
};

static enum db_status lag_rows_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct lag_rows *a = arg;
    const char *params[] = {a->id};
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, a->stmt, a->id ? params : NULL, &a->rows, err);
}

/* The lag topic by topic, one transaction each: what the one-statement form cannot give when
 * one topic fails. */
static enum db_status lag_each_topic(struct db_pool *pool, db_consumer_lag_each each,
                                     db_consumer_lag_failed failed, void *ctx, struct db_error *err)
{
    struct lag_rows topics = {&st_lag_topics, NULL, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, lag_rows_tx, &topics, err);
    for (int i = 0; st == DB_OK && i < PQntuples(topics.rows); i++) {
        const char *name = PQgetvalue(topics.rows, i, 1);
        struct lag_rows one = {&st_lag_topic, PQgetvalue(topics.rows, i, 0), NULL};
        struct db_error one_err;
        enum db_status s = db_tx_run(pool, DB_READ_COMMITTED, lag_rows_tx, &one, &one_err);
        for (int j = 0; s == DB_OK && j < PQntuples(one.rows); j++)
            each(name, PQgetvalue(one.rows, j, 0), strtoll(PQgetvalue(one.rows, j, 1), NULL, 10),
                 atof(PQgetvalue(one.rows, j, 2)), ctx);
        if (s != DB_OK && !(s == DB_ERR_HARD && topic_missing(&one_err)))
            failed(name, s, &one_err, ctx);
        PQclear(one.rows);
    }
    PQclear(topics.rows);
    return st;
}

enum db_status db_consumers_lag_all(struct db_pool *pool, db_consumer_lag_each each,
                                    db_consumer_lag_failed failed, void *ctx, struct db_error *err)
{
    struct lag_rows all = {&st_lag_all, NULL, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, lag_rows_tx, &all, err);
    for (int i = 0; st == DB_OK && i < PQntuples(all.rows); i++)
        each(PQgetvalue(all.rows, i, 0), PQgetvalue(all.rows, i, 1),
             strtoll(PQgetvalue(all.rows, i, 2), NULL, 10), atof(PQgetvalue(all.rows, i, 3)), ctx);
    PQclear(all.rows);
    if (st == DB_ERR_HARD) /* one topic may have failed the whole statement */
        st = lag_each_topic(pool, each, failed, ctx, err);
    return st;
}
