/* Compacted topics (see topics.h): the workflows the REST routes call, and the statements on
 * the catalogue, the log, the key list and the janitor. The handles (key and producer) and their
 * statements are in db/topic_handles.c. Every topic's log and heads are the shared tables
 * rowlock.topic_messages and rowlock.topic_heads (migration 12): statements name the topic by a
 * topic_id parameter, so each is prepared once per connection whatever the topic. */
#include "db/topics_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/resource_tables.h" /* db_read_log */
#include "db/topic_consumers.h"
#include "db/tx.h"
#include "db/upkeep.h"

/* The family's name in rowlock.upkeep. */
#define FAMILY "topics"

/* ---- statements on the catalogue ---- */

static const struct db_stmt st_insert_topic = {
    "topic_insert",
    "INSERT INTO rowlock.topics (name, headless_ttl_seconds, retention_seconds, "
    "default_schema_version, retention_ignores_consumers) "
    "VALUES ($1, $2, nullif($3::integer, 0), $4, $5) "
    "ON CONFLICT (name) DO NOTHING RETURNING " TOPIC_COLUMNS,
    5};
static const struct db_stmt st_update_topic = {
    "topic_update",
    "UPDATE rowlock.topics SET headless_ttl_seconds = $2, retention_seconds = "
    "nullif($3::integer, 0), default_schema_version = $4, retention_ignores_consumers = $5, "
    "updated_at = now() WHERE name = $1 RETURNING " TOPIC_COLUMNS,
    5};
static const struct db_stmt st_create_tables = {"topic_create_tables",
                                                "SELECT rowlock.topic_create_tables($1)", 1};
static const struct db_stmt st_delete_topic = {
    "topic_delete", "DELETE FROM rowlock.topics WHERE name = $1 RETURNING id", 1};
static const struct db_stmt st_drop_tables = {"topic_drop_tables",
                                              "SELECT rowlock.topic_drop_tables($1)", 1};
static const struct db_stmt st_stats = {"topic_stats", "SELECT * FROM rowlock.topic_stats($1, $2)",
                                        2};
static const struct db_stmt st_list = {"topic_list",
                                       "SELECT " TOPIC_COLUMNS
                                       ", s.* FROM rowlock.topics, rowlock.topic_stats(id, $3) s "
                                       "WHERE name > coalesce($1, '') ORDER BY name LIMIT $2",
                                       3};
static const struct db_stmt st_producer_put = {
    "producer_put",
    "INSERT INTO rowlock.producers AS p (topic_id, name, schema_version) VALUES ($1, $2, $3) "
    "ON CONFLICT (topic_id, name) DO UPDATE SET schema_version = EXCLUDED.schema_version, "
    "updated_at = now() RETURNING (xmax = 0) AS created",
    3};
static const struct db_stmt st_headless = {
    "topics_headless",
    "SELECT h.name, h.headless_rows, h.headless_oldest_age_seconds, t.headless_ttl_seconds "
    "FROM rowlock.topics_headless($1, $2) h JOIN rowlock.topics t ON t.name = h.name",
    2};
static const struct db_stmt st_topic_ids = {
    "topics_ids",
    "SELECT id, name, headless_ttl_seconds, coalesce(retention_seconds, 0) FROM rowlock.topics "
    "ORDER BY name LIMIT $1",
    1};

/* The log of topic $1 after $2, at most $3 rows, stopped at the page budget: a row comes only
 * while the bytes of the values up to it (as text, as sent) stay within the budget, and the first
 * always comes, so that the rows are a prefix of the log (the gap-safe read relies on that) and
 * libpq never holds more than the budget plus one value. Holes and tombstones weigh nothing. */
static const struct db_stmt st_log_read = {
    "topic_log_read",
    "SELECT \"offset\", hole, key, value::text, producer, rank, schema_version, " DB_TS(
        "created_at") " FROM ("
                      "  SELECT *, row_number() OVER w AS n, "
                      "    sum(coalesce(octet_length(value::text), 0)) OVER w AS bytes FROM ("
                      "    SELECT * FROM rowlock.topic_messages WHERE topic_id = $1::bigint "
                      "    AND \"offset\" > $2::bigint ORDER BY \"offset\" LIMIT $3) l "
                      "  WINDOW w AS (ORDER BY \"offset\" ROWS UNBOUNDED PRECEDING)) p "
                      "WHERE n = 1 OR bytes <= " DB_TOPIC_BUDGET_SQL " ORDER BY \"offset\"",
    3};
/* Records offsets $2..$3 of topic $1 that hold no visible row as holes. An offset still held by
 * a transaction in progress makes this wait on it, which the caller bounds with lock_timeout. */
static const struct db_stmt st_log_fill = {
    "topic_log_fill",
    "INSERT INTO rowlock.topic_messages (topic_id, \"offset\", hole) "
    "SELECT $1::bigint, g, true FROM generate_series($2::bigint, $3::bigint) g "
    "ON CONFLICT (topic_id, \"offset\") DO NOTHING",
    3};

/* Live heads of topic $1 after key $2, at most $3, stopped at the page budget as the log is (see
 * st_log_read); the last column says whether another head followed within the $3. */
static const struct db_stmt st_keys = {
    "topic_keys",
    "SELECT key, value::text, head_id, compaction_rank, schema_version, " DB_TS(
        "updated_at") ", more FROM ("
                      "  SELECT *, row_number() OVER w AS n, sum(octet_length(value::text)) OVER w "
                      "AS bytes, "
                      "    lead(true, 1, false) OVER w AS more FROM ("
                      "    SELECT h.key, m.value, h.head_id, h.compaction_rank, h.schema_version, "
                      "h.updated_at "
                      "    FROM rowlock.topic_heads h JOIN rowlock.topic_messages m "
                      "    ON m.topic_id = h.topic_id AND m.\"offset\" = h.head_id "
                      "    WHERE h.topic_id = $1::bigint AND h.key > coalesce($2, '') "
                      "    AND m.value IS NOT NULL ORDER BY h.key LIMIT $3) l "
                      "  WINDOW w AS (ORDER BY key ROWS UNBOUNDED PRECEDING)) p "
                      "WHERE n = 1 OR bytes <= " DB_TOPIC_BUDGET_SQL " ORDER BY key",
    3};

/* A key's history in topic $1: its messages among the offsets in [$3 - $5, $3), newest first,
 * at most $4, stopped at the page budget as the log is (see st_log_read); total is how many
 * there were before the budget's cut. The log's primary key is walked backwards over at most $5
 * offsets. $2 the key. */
static const struct db_stmt st_history = {
    "topic_history",
    "SELECT \"offset\", value::text, producer, rank, schema_version, " DB_TS(
        "created_at") ", total FROM ("
                      "  SELECT *, row_number() OVER w AS n, count(*) OVER () AS total, "
                      "    sum(coalesce(octet_length(value::text), 0)) OVER w AS bytes FROM ("
                      "    SELECT * FROM rowlock.topic_messages WHERE topic_id = $1::bigint "
                      "    AND \"offset\" < $3::bigint AND \"offset\" >= $3::bigint - $5 "
                      "    AND key = $2 AND NOT hole ORDER BY \"offset\" DESC LIMIT $4) l "
                      "  WINDOW w AS (ORDER BY \"offset\" DESC ROWS UNBOUNDED PRECEDING)) p "
                      "WHERE n = 1 OR bytes <= " DB_TOPIC_BUDGET_SQL " ORDER BY \"offset\" DESC",
    5};
/* Past the end of topic $1's log: the offset a history read starts below by default. */
static const struct db_stmt st_log_end = {
    "topic_log_end",
    "SELECT coalesce(max(\"offset\"), 0) + 1 FROM rowlock.topic_messages "
    "WHERE topic_id = $1::bigint",
    1};

/* One topic's headless gauges (the per-topic form of rowlock.topics_headless): $1 the topic,
 * $2 the cap. */
static const struct db_stmt st_headless_one = {
    "topic_headless_one",
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM rowlock.topic_heads "
    "  WHERE topic_id = $1::bigint AND head_id IS NULL LIMIT $2) s), "
    "(SELECT coalesce(extract(epoch FROM now() - min(updated_at)), 0) FROM rowlock.topic_heads "
    "  WHERE topic_id = $1::bigint AND head_id IS NULL)",
    2};

/* Janitor: topic $3's expired headless rows through the partial index; rows locked by a reader
 * are skipped, never waited for. $1 TTL seconds, $2 batch. */
static const struct db_stmt st_janitor = {
    "topic_janitor",
    "DELETE FROM rowlock.topic_heads WHERE topic_id = $3::bigint AND key IN ("
    "  SELECT key FROM rowlock.topic_heads WHERE topic_id = $3::bigint AND head_id IS NULL "
    "  AND updated_at < now() - make_interval(secs => $1::double precision) "
    "  ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "AND head_id IS NULL",
    3};
/* When topic $4's upkeep is next due: at once ($3, a batch was full), else when its oldest
 * headless row passes the TTL $1 (a headless row made later expires later: now plus the TTL),
 * or, with a retention $2, after that retention (at most an hour): a message superseded from now
 * on may be compacted once it is older than the retention, which this bounds how late. */
static const struct db_stmt st_next_due = {
    "topic_next_due",
    DB_UPKEEP_SET_NEXT_SQL(
        FAMILY, "$4::bigint",
        "CASE WHEN $3::boolean THEN now() ELSE least("
        "  coalesce((SELECT min(updated_at) FROM rowlock.topic_heads "
        "    WHERE topic_id = $4::bigint AND head_id IS NULL), now()) "
        "    + make_interval(secs => $1::float8), "
        "  CASE WHEN $2::integer > 0 THEN now() + make_interval(secs => least($2::integer, 3600)) "
        "  END) END"),
    4};
/* Retention: topic $4's superseded messages older than the retention $1 lose their payload and
 * become holes (readers skip them; offsets stay dense), $2 at most. The current head of a key is
 * never touched, nor a message after the lowest offset a consumer of topic $3 committed ($3
 * NULL: the topic ignores consumers). */
static const struct db_stmt st_retention = {
    "topic_retention",
    "UPDATE rowlock.topic_messages SET hole = true, key = NULL, value = NULL, producer = NULL, "
    "sequence = NULL, schema_version = NULL, rank = NULL "
    "WHERE topic_id = $4::bigint AND \"offset\" IN ("
    "  SELECT m.\"offset\" FROM rowlock.topic_messages m WHERE m.topic_id = $4::bigint "
    "  AND NOT m.hole AND m.created_at < now() - make_interval(secs => $1::double precision) "
    "  AND m.\"offset\" IS DISTINCT FROM (SELECT head_id FROM rowlock.topic_heads h "
    "    WHERE h.topic_id = $4::bigint AND h.key = m.key) "
    "  AND ($3::bigint IS NULL OR m.\"offset\" <= coalesce((SELECT min(c.\"offset\") "
    "    FROM rowlock.topic_consumers c WHERE c.topic_id = $3), 9223372036854775807)) "
    "  ORDER BY m.\"offset\" LIMIT $2 FOR UPDATE SKIP LOCKED)",
    4};
/* Before retention: the topic row shared with consumer creation (which locks it), so that the
 * retention statement after it sees every consumer that exists; and the topic's setting. */
static const struct db_stmt st_retention_lock = {
    "topic_retention_lock",
    "SELECT retention_ignores_consumers FROM rowlock.topics WHERE id = $1 FOR SHARE", 1};

/* The claim of due topics (db/upkeep.h): id, name, TTL, retention (0: none). */
static const struct db_stmt st_topics_due = {
    "topics_due",
    DB_UPKEEP_CLAIM_SQL(FAMILY, "topics",
                        "r.headless_ttl_seconds, coalesce(r.retention_seconds, 0)"),
    2};

static int is_missing_table(const struct db_error *err)
{
    return db_topic_missing(err);
}

/* ---- workflows ---- */

/* Maps "the topic is gone" (a concurrent DELETE won: its sequence is dropped, or a row written
 * for it fails its foreign key) to not found. */
static enum db_status topic_gone(enum db_status st, const struct db_error *err,
                                 enum db_topic_verdict *verdict)
{
    if (st == DB_ERR_HARD && is_missing_table(err)) {
        *verdict = DB_TOPIC_NOT_FOUND;
        return DB_ABORTED;
    }
    return st;
}

struct put_topic {
    const char *name;
    const struct db_topic_config *cfg;
    struct db_topic *out;
    enum db_topic_verdict verdict;
};

static enum db_status put_topic_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct put_topic *a = arg;
    char ttl[DB_INT_TEXT], ret[DB_INT_TEXT], sv[DB_INT_TEXT], id[DB_INT_TEXT];
    db_i64(ttl, sizeof(ttl), a->cfg->headless_ttl_seconds);
    db_i64(ret, sizeof(ret), a->cfg->retention_seconds);
    snprintf(sv, sizeof(sv), "%d", a->cfg->default_schema_version);
    const char *params[] = {a->name, ttl, ret, sv, a->cfg->retention_ignores_consumers ? "t" : "f"};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_insert_topic, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        db_topic_from_row(r, 0, 0, a->out);
        PQclear(r);
        a->verdict = DB_TOPIC_CREATED;
        db_i64(id, sizeof(id), a->out->id);
        const char *idp[] = {id};
        return db_query(c, &st_create_tables, idp, NULL, err);
    }
    PQclear(r);
    st = db_query(c, &st_update_topic, params, &r, err);
    if (st != DB_OK)
        return st;
    a->verdict = PQntuples(r) == 1 ? DB_TOPIC_OK : DB_TOPIC_NOT_FOUND;
    if (PQntuples(r) == 1)
        db_topic_from_row(r, 0, 0, a->out);
    PQclear(r);
    if (a->verdict == DB_TOPIC_OK)
        return DB_OK;
    /* deleted between our insert attempt and update: run again (and create it) */
    db_error_set(err, "", "topic %s was deleted while it was being put", a->name);
    return DB_ERR_REDO;
}

enum db_status db_topics_put(struct db_pool *pool, const char *name,
                             const struct db_topic_config *cfg, struct db_topic *out,
                             enum db_topic_verdict *verdict, struct db_error *err)
{
    struct put_topic a = {name, cfg, out, DB_TOPIC_OK};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, put_topic_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

static void stats_from_row(const PGresult *r, int row, int col, struct db_topic_stats *s)
{
    s->messages = strtoll(PQgetvalue(r, row, col), NULL, 10);
    s->heads = strtoll(PQgetvalue(r, row, col + 1), NULL, 10);
    s->headless_rows = strtoll(PQgetvalue(r, row, col + 2), NULL, 10);
    s->headless_oldest_age_seconds = atof(PQgetvalue(r, row, col + 3));
}

struct get_topic {
    const char *name;
    struct db_topic *out;
    struct db_topic_stats *stats;
    enum db_topic_verdict verdict;
};

static enum db_status get_topic_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct get_topic *a = arg;
    int found = 0;
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, a->name, a->out, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT], cap[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->out->id);
    snprintf(cap, sizeof(cap), "%d", DB_TOPIC_HEADLESS_CAP);
    const char *params[] = {id, cap};
    PGresult *r = NULL;
    st = topic_gone(db_query(c, &st_stats, params, &r, err), err, &a->verdict);
    if (st != DB_OK)
        return st;
    stats_from_row(r, 0, 0, a->stats);
    PQclear(r);
    a->verdict = DB_TOPIC_OK;
    return DB_OK;
}

enum db_status db_topics_get(struct db_pool *pool, const char *name, struct db_topic *out,
                             struct db_topic_stats *stats, enum db_topic_verdict *verdict,
                             struct db_error *err)
{
    struct get_topic a = {name, out, stats, DB_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, get_topic_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

struct list_topics {
    const char *after;
    int limit;
    db_topic_each each;
    void *ctx;
    PGresult *rows;
};

static enum db_status list_topics_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct list_topics *a = arg;
    char limit[DB_INT_TEXT], cap[DB_INT_TEXT];
    snprintf(limit, sizeof(limit), "%d", a->limit);
    snprintf(cap, sizeof(cap), "%d", DB_TOPIC_HEADLESS_CAP);
    const char *params[] = {a->after, limit, cap};
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, &st_list, params, &a->rows, err);
}

enum db_status db_topics_list(struct db_pool *pool, const char *after, int limit,
                              db_topic_each each, void *ctx, struct db_error *err)
{
    struct list_topics a = {.after = after, .limit = limit, .each = each, .ctx = ctx};
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, list_topics_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_topic t;
        struct db_topic_stats s;
        db_topic_from_row(a.rows, i, 0, &t);
        stats_from_row(a.rows, i, TOPIC_NCOLUMNS, &s);
        each(&t, &s, ctx);
    }
    PQclear(a.rows);
    return st;
}

struct delete_topic {
    const char *name;
    enum db_topic_verdict verdict;
};

static enum db_status delete_topic_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct delete_topic *a = arg;
    const char *params[] = {a->name};
    PGresult *r = NULL;
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_query(c, &st_delete_topic, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return DB_OK;
    }
    const char *idp[] = {PQgetvalue(r, 0, 0)};
    /* the row's DELETE waited for every transaction that wrote rows of the topic (their foreign
     * key checks share the row) and took those rows along; DROP waits for every transaction that
     * drew an offset from its sequence */
    st = db_query(c, &st_drop_tables, idp, NULL, err);
    PQclear(r);
    a->verdict = DB_TOPIC_OK;
    return st;
}

enum db_status db_topics_delete(struct db_pool *pool, const char *name,
                                enum db_topic_verdict *verdict, struct db_error *err)
{
    struct delete_topic a = {name, DB_TOPIC_NOT_FOUND};
    db_topic_hint_set(name, 0);
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, delete_topic_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct producer_put {
    const char *topic, *name;
    int schema_version;
    enum db_topic_verdict verdict;
};

static enum db_status producer_put_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct producer_put *a = arg;
    struct db_topic t;
    int found = 0;
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, a->topic, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT], sv[DB_INT_TEXT];
    db_i64(id, sizeof(id), t.id);
    snprintf(sv, sizeof(sv), "%d", a->schema_version);
    const char *params[] = {id, a->name, sv};
    PGresult *r = NULL;
    st = db_query(c, &st_producer_put, params, &r, err);
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23503") == 0)
        return DB_ABORTED; /* the topic was deleted meanwhile */
    if (st != DB_OK)
        return st;
    a->verdict = PQgetvalue(r, 0, 0)[0] == 't' ? DB_TOPIC_CREATED : DB_TOPIC_OK;
    PQclear(r);
    return DB_OK;
}

enum db_status db_topics_producer_put(struct db_pool *pool, const char *topic, const char *name,
                                      int schema_version, enum db_topic_verdict *verdict,
                                      struct db_error *err)
{
    struct producer_put a = {topic, name, schema_version, DB_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, producer_put_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

/* Resolves topic and producer in the caller's transaction; sets *verdict when either is
 * missing (and then the workflow has nothing more to do). */
static enum db_status resolve_producer(struct db_conn *c, const char *topic, const char *producer,
                                       struct db_topic *t, struct db_producer *p,
                                       enum db_topic_verdict *verdict, struct db_error *err)
{
    int found = 0;
    *verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, topic, t, &found, err);
    if (st != DB_OK || !found)
        return st;
    *verdict = DB_TOPIC_PRODUCER_NOT_FOUND;
    st = db_topic_producer(c, t, producer, p, &found, err);
    if (st != DB_OK || !found)
        return st;
    *verdict = DB_TOPIC_OK;
    return DB_OK;
}

struct produce {
    const char *topic, *producer;
    const struct db_message_in *msgs;
    size_t n;
    struct db_message_out *out;
    enum db_topic_verdict verdict;
};

static enum db_status produce_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct produce *a = arg;
    struct db_topic t;
    struct db_producer p;
    enum db_status st = resolve_producer(c, a->topic, a->producer, &t, &p, &a->verdict, err);
    if (st != DB_OK || a->verdict != DB_TOPIC_OK)
        return st;
    int sequences = 0;
    for (size_t i = 0; i < a->n; i++)
        sequences |= a->msgs[i].has_sequence;
    if (!sequences) /* else duplicates may need one more read: COMMIT then goes on its own */
        db_tx_commit_with_next(c);
    return topic_gone(db_producer_produce(c, &p, a->msgs, a->n, a->out, err), err, &a->verdict);
}

enum db_status db_topics_produce_in(struct db_conn *c, const char *topic, const char *producer,
                                    const struct db_message_in *msgs, size_t n,
                                    struct db_message_out *out, enum db_topic_verdict *verdict,
                                    struct db_error *err)
{
    struct db_topic t;
    struct db_producer p;
    enum db_status st = resolve_producer(c, topic, producer, &t, &p, verdict, err);
    if (st != DB_OK || *verdict != DB_TOPIC_OK)
        return st;
    return topic_gone(db_producer_produce(c, &p, msgs, n, out, err), err, verdict);
}

enum db_status db_topics_produce(struct db_pool *pool, const char *topic, const char *producer,
                                 const struct db_message_in *msgs, size_t n,
                                 struct db_message_out *out, enum db_topic_verdict *verdict,
                                 struct db_error *err)
{
    struct produce a = {.topic = topic,
                        .producer = producer,
                        .msgs = msgs,
                        .n = n,
                        .out = out,
                        .verdict = DB_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, produce_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

struct head_get {
    const char *topic, *key;
    struct db_head *out;
    enum db_topic_verdict verdict;
};

static enum db_status head_get_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct head_get *a = arg;
    struct db_topic t;
    struct db_key k;
    int found = 0;
    db_head_clear(a->out);
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, a->topic, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    db_topic_key(&t, a->key, &k);
    a->verdict = DB_TOPIC_OK;
    return topic_gone(db_key_read_head(c, &k, a->out, err), err, &a->verdict);
}

enum db_status db_topics_head_get(struct db_pool *pool, const char *topic, const char *key,
                                  struct db_head *out, enum db_topic_verdict *verdict,
                                  struct db_error *err)
{
    struct head_get a = {topic, key, out, DB_TOPIC_NOT_FOUND};
    memset(out, 0, sizeof(*out));
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, head_get_tx, &a, err);
    *verdict = a.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}

static enum db_status head_write_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct db_head_write *w = arg;
    struct db_topic t;
    struct db_producer p;
    struct db_key k;
    db_head_clear(&w->before);
    w->verdict = DB_TOPIC_NOT_FOUND;
    int64_t hint = db_topic_hint_get(w->topic);
    int locked = 0;
    enum db_status st = DB_OK;
    if (hint > 0) {
        st = db_topic_lock_hinted(c, w, hint, &t, &p, &locked, err);
        if (st != DB_OK)
            return st;
    } else {
        st = resolve_producer(c, w->topic, w->producer, &t, &p, &w->verdict, err);
        if (st != DB_OK || w->verdict != DB_TOPIC_OK)
            return st;
    }
    db_topic_key(&t, w->key, &k);
    if (!locked) {
        st = topic_gone(db_key_lock_head(c, &k, &w->before, err), err, &w->verdict);
        if (st != DB_OK)
            return st;
    }
    char *value = NULL;
    int decision = w->decide(&w->before, &value, w->ctx);
    if (decision < 0)
        return DB_ABORTED;
    if (decision > 0) {
        w->verdict = DB_TOPIC_UNCHANGED; /* the lock (and a headless row) still commits */
        return DB_OK;
    }
    struct db_message_in m = {.key = w->key, .value = value};
    db_tx_commit_with_next(c); /* the produce is the last statement: COMMIT goes with it */
    st = topic_gone(db_producer_produce(c, &p, &m, 1, &w->produced, err), err, &w->verdict);
    free(value);
    return st;
}

enum db_status db_topics_head_write(struct db_pool *pool, struct db_head_write *w,
                                    struct db_error *err)
{
    memset(&w->before, 0, sizeof(w->before));
    w->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, head_write_tx, w, err);
    return st == DB_ABORTED &&
                   (w->verdict == DB_TOPIC_NOT_FOUND || w->verdict == DB_TOPIC_PRODUCER_NOT_FOUND)
               ? DB_OK
               : st;
}

/* What every paged read of a topic carries through its transaction: the topic, the page's byte
 * budget, the rows read last and the verdict. */
struct paged_read {
    const char *topic;
    size_t budget;
    PGresult *rows;
    enum db_topic_verdict verdict;
};

/* The start of a paged read's transaction (which may run more than once): the rows of an
 * earlier attempt forgotten and the topic resolved with the page budget set; the verdict says
 * whether it was found (*found). */
static enum db_status paged_read_start(struct db_conn *c, struct paged_read *p, struct db_topic *t,
                                       int *found, struct db_error *err)
{
    PQclear(p->rows);
    p->rows = NULL;
    p->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve_paged(c, p->topic, p->budget, t, found, err);
    if (st == DB_OK && *found)
        p->verdict = DB_TOPIC_OK;
    return st;
}

/* A paged read's statement on topic's rows, its rows in p->rows (a topic deleted meanwhile is
 * "no such topic"). */
static enum db_status paged_query(struct db_conn *c, struct paged_read *p,
                                  const struct db_stmt *stmt, const char *const *params,
                                  struct db_error *err)
{
    return topic_gone(db_query(c, stmt, params, &p->rows, err), err, &p->verdict);
}

struct read_log {
    struct paged_read p;  /* p.rows: the visible rows read last */
    const char *consumer; /* NULL: read after `after` */
    int64_t after;
    int limit;
    int usable; /* how many of p.rows are safe to show (no unresolved gap before them) */
};

static enum db_status read_log_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct read_log *a = arg;
    struct db_topic t;
    int found = 0;
    a->usable = 0;
    enum db_status st = paged_read_start(c, &a->p, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    if (a->consumer != NULL) {
        a->p.verdict = DB_TOPIC_CONSUMER_NOT_FOUND;
        st = db_consumer_offset(c, t.id, a->consumer, &a->after, &found, err);
        if (st != DB_OK || !found)
            return st;
    }
    a->p.verdict = DB_TOPIC_OK;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), t.id);
    return topic_gone(db_read_log(c, &st_log_read, &st_log_fill, id, a->after, a->limit, &a->p.rows,
                                  &a->usable, err),
                      err, &a->p.verdict);
}

static enum db_status read_log(struct db_pool *pool, struct read_log *a, db_log_each each,
                               void *ctx, int64_t *next, struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, read_log_tx, a, err);
    *next = a->after;
    for (int i = 0; st == DB_OK && i < a->usable; i++) {
        const PGresult *r = a->p.rows;
        int64_t offset = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        if (PQgetvalue(r, i, 1)[0] != 't') { /* else a hole: nothing was committed there */
            struct db_log_message m = {
                .offset = offset,
                .key = PQgetvalue(r, i, 2),
                .value = PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
                .value_len = (size_t)PQgetlength(r, i, 3),
                .producer = PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4),
                .rank = strtoll(PQgetvalue(r, i, 5), NULL, 10),
                .schema_version = atoi(PQgetvalue(r, i, 6)),
                .created_at = PQgetvalue(r, i, 7),
            };
            if (each(&m, ctx) != 0)
                break; /* the page is full: this message starts the next one */
        }
        *next = offset;
    }
    PQclear(a->p.rows);
    return st == DB_ABORTED ? DB_OK : st;
}

enum db_status db_topics_read_log(struct db_pool *pool, const char *topic, int64_t after, int limit,
                                  size_t budget, db_log_each each, void *ctx, int64_t *next,
                                  enum db_topic_verdict *verdict, struct db_error *err)
{
    struct read_log a = {.p = {.topic = topic, .budget = budget, .verdict = DB_TOPIC_NOT_FOUND},
                         .after = after,
                         .limit = limit};
    enum db_status st = read_log(pool, &a, each, ctx, next, err);
    *verdict = a.p.verdict;
    return st;
}

enum db_status db_topics_read_consumer_log(struct db_pool *pool, const char *topic,
                                           const char *consumer, int limit, size_t budget,
                                           db_log_each each, void *ctx, int64_t *after,
                                           int64_t *next, enum db_topic_verdict *verdict,
                                           struct db_error *err)
{
    struct read_log a = {.p = {.topic = topic, .budget = budget, .verdict = DB_TOPIC_NOT_FOUND},
                         .consumer = consumer,
                         .limit = limit};
    enum db_status st = read_log(pool, &a, each, ctx, next, err);
    *verdict = a.p.verdict;
    *after = a.after;
    return st;
}

struct list_keys {
    struct paged_read p;
    const char *after;
    int limit;
};

static enum db_status list_keys_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct list_keys *a = arg;
    struct db_topic t;
    int found = 0;
    enum db_status st = paged_read_start(c, &a->p, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT], limit[DB_INT_TEXT];
    db_i64(id, sizeof(id), t.id);
    snprintf(limit, sizeof(limit), "%d", a->limit);
    const char *params[] = {id, a->after, limit};
    return paged_query(c, &a->p, &st_keys, params, err);
}

enum db_status db_topics_list_keys(struct db_pool *pool, const char *topic, const char *after,
                                   int limit, size_t budget, db_key_each each, void *ctx, int *more,
                                   enum db_topic_verdict *verdict, struct db_error *err)
{
    struct list_keys a = {{topic, budget, NULL, DB_TOPIC_NOT_FOUND}, after, limit};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_keys_tx, &a, err);
    *verdict = a.p.verdict;
    int n = st == DB_OK ? PQntuples(a.p.rows) : 0, i = 0;
    for (; i < n; i++) {
        const PGresult *r = a.p.rows;
        struct db_key_entry k = {
            .key = PQgetvalue(r, i, 0),
            .value = PQgetvalue(r, i, 1),
            .value_len = (size_t)PQgetlength(r, i, 1),
            .offset = strtoll(PQgetvalue(r, i, 2), NULL, 10),
            .rank = strtoll(PQgetvalue(r, i, 3), NULL, 10),
            .schema_version = atoi(PQgetvalue(r, i, 4)),
            .updated_at = PQgetvalue(r, i, 5),
        };
        if (each(&k, ctx) != 0)
            break;
    }
    /* more heads may follow: a page cut short (here or by the budget), or a full one */
    *more = i < n || (n > 0 && PQgetvalue(a.p.rows, n - 1, 6)[0] == 't') || n == limit;
    PQclear(a.p.rows);
    return st == DB_ABORTED ? DB_OK : st;
}

struct headless {
    PGresult *rows;
    char limit[DB_INT_TEXT]; /* topics at most */
};

static enum db_status headless_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct headless *a = arg;
    char cap[DB_INT_TEXT];
    snprintf(cap, sizeof(cap), "%d", DB_TOPIC_HEADLESS_CAP);
    const char *params[] = {cap, a->limit};
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, &st_headless, params, &a->rows, err);
}

struct headless_topic {
    int64_t id;
    PGresult *row;
};

static enum db_status headless_topic_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct headless_topic *a = arg;
    char id[DB_INT_TEXT], cap[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->id);
    snprintf(cap, sizeof(cap), "%d", DB_TOPIC_HEADLESS_CAP);
    const char *params[] = {id, cap};
    PQclear(a->row);
    a->row = NULL;
    return db_query(c, &st_headless_one, params, &a->row, err);
}

static enum db_status topic_ids_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct headless *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    const char *params[] = {a->limit};
    return db_query(c, &st_topic_ids, params, &a->rows, err);
}

/* The gauges topic by topic, one transaction each: what the one-statement form cannot give
 * when one topic fails. */
static enum db_status headless_each_topic(struct db_pool *pool, struct headless *list,
                                          db_headless_each each, db_topic_failed failed, void *ctx,
                                          struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, topic_ids_tx, list, err);
    PGresult *rows = list->rows;
    list->rows = NULL;
    for (int i = 0; st == DB_OK && i < PQntuples(rows); i++) {
        struct headless_topic a = {strtoll(PQgetvalue(rows, i, 0), NULL, 10), NULL};
        struct db_error one_err;
        enum db_status one = db_tx_run(pool, DB_READ_COMMITTED, headless_topic_tx, &a, &one_err);
        if (one == DB_OK)
            each(PQgetvalue(rows, i, 1), strtoll(PQgetvalue(a.row, 0, 0), NULL, 10),
                 atof(PQgetvalue(a.row, 0, 1)), strtoll(PQgetvalue(rows, i, 2), NULL, 10), ctx);
        else if (!(one == DB_ERR_HARD && is_missing_table(&one_err))) /* not deleted meanwhile */
            failed(PQgetvalue(rows, i, 1), one, &one_err, ctx);
        PQclear(a.row);
    }
    PQclear(rows);
    return st;
}

enum db_status db_topics_headless(struct db_pool *pool, int limit, db_headless_each each,
                                  db_topic_failed failed, void *ctx, struct db_error *err)
{
    struct headless a = {NULL, {0}};
    snprintf(a.limit, sizeof(a.limit), "%d", limit);
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, headless_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++)
        each(PQgetvalue(a.rows, i, 0), strtoll(PQgetvalue(a.rows, i, 1), NULL, 10),
             atof(PQgetvalue(a.rows, i, 2)), strtoll(PQgetvalue(a.rows, i, 3), NULL, 10), ctx);
    PQclear(a.rows);
    a.rows = NULL;
    if (st == DB_ERR_HARD) /* one topic may have failed the whole statement */
        st = headless_each_topic(pool, &a, each, failed, ctx, err);
    return st;
}

struct janitor_topic {
    int64_t id, ttl, retention;
    int batch;
    int64_t deleted, compacted;
};

static enum db_status janitor_topic_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct janitor_topic *a = arg;
    char ttl[DB_INT_TEXT], batch[DB_INT_TEXT], id[DB_INT_TEXT];
    db_i64(ttl, sizeof(ttl), a->ttl);
    snprintf(batch, sizeof(batch), "%d", a->batch);
    db_i64(id, sizeof(id), a->id);
    const char *params[] = {ttl, batch, id};
    PGresult *r = NULL;
    a->deleted = a->compacted = 0;
    enum db_status st = db_query(c, &st_janitor, params, &r, err);
    if (st != DB_OK)
        return st;
    a->deleted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    if (a->retention > 0) {
        const char *idp[] = {id};
        st = db_query(c, &st_retention_lock, idp, &r, err);
        if (st != DB_OK)
            return st;
        int ignores = PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
        int gone = PQntuples(r) == 0;
        PQclear(r);
        if (gone) /* deleted meanwhile */
            return DB_OK;
        char ret[DB_INT_TEXT];
        db_i64(ret, sizeof(ret), a->retention);
        const char *rparams[] = {ret, batch, ignores ? NULL : id, id};
        st = db_query(c, &st_retention, rparams, &r, err);
        if (st != DB_OK)
            return st;
        a->compacted = strtoll(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    char ret[DB_INT_TEXT];
    db_i64(ret, sizeof(ret), a->retention);
    const char *full = a->deleted >= a->batch || a->compacted >= a->batch ? "true" : "false";
    const char *dparams[] = {ttl, ret, full, id};
    return db_query(c, &st_next_due, dparams, NULL, err);
}

/* What a janitor pass reports to, and how much a visit does at most. */
struct topics_pass {
    int batch;
    db_janitor_each each;
    db_topic_failed failed;
    void *ctx;
};

/* The upkeep of the topic of row i of st_topics_due's rows. */
static enum db_status topic_visit(struct db_pool *pool, const PGresult *rows, int i, void *arg)
{
    struct topics_pass *p = arg;
    const char *name = PQgetvalue(rows, i, 1);
    struct janitor_topic a = {.id = strtoll(PQgetvalue(rows, i, 0), NULL, 10),
                              .ttl = strtoll(PQgetvalue(rows, i, 2), NULL, 10),
                              .retention = strtoll(PQgetvalue(rows, i, 3), NULL, 10),
                              .batch = p->batch};
    struct db_error err;
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, janitor_topic_tx, &a, &err);
    if (st == DB_OK)
        p->each(name, a.deleted, a.compacted, p->ctx);
    else if (st == DB_ERR_HARD && is_missing_table(&err))
        st = DB_OK; /* deleted meanwhile */
    else
        p->failed(name, st, &err, p->ctx);
    return st;
}

const struct db_upkeep db_topics_upkeep = {
    .family = FAMILY, .claim = &st_topics_due, .visit = topic_visit};

enum db_status db_topics_janitor(struct db_pool *pool, int batch, db_janitor_each each,
                                 db_topic_failed failed, void *ctx, struct db_error *err)
{
    struct topics_pass p = {.batch = batch, .each = each, .failed = failed, .ctx = ctx};
    return db_upkeep_run(pool, &db_topics_upkeep, &p, err);
}

struct key_history {
    struct paged_read p;
    const char *key;
    int64_t before;
    int limit;
};

static enum db_status key_history_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct key_history *a = arg;
    struct db_topic t;
    int found = 0;
    enum db_status st = paged_read_start(c, &a->p, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), t.id);
    if (a->before == 0) {
        const char *idp[] = {id};
        st = paged_query(c, &a->p, &st_log_end, idp, err);
        if (st != DB_OK)
            return st;
        a->before = strtoll(PQgetvalue(a->p.rows, 0, 0), NULL, 10);
        PQclear(a->p.rows);
        a->p.rows = NULL;
    }
    char before[DB_INT_TEXT], limit[DB_INT_TEXT], window[DB_INT_TEXT];
    snprintf(before, sizeof(before), "%" PRId64, a->before);
    snprintf(limit, sizeof(limit), "%d", a->limit);
    snprintf(window, sizeof(window), "%d", DB_TOPIC_HISTORY_WINDOW);
    const char *params[] = {id, a->key, before, limit, window};
    return paged_query(c, &a->p, &st_history, params, err);
}

enum db_status db_topics_key_history(struct db_pool *pool, const char *topic, const char *key,
                                     int64_t before, int limit, size_t budget, db_log_each each,
                                     void *ctx, int64_t *next, enum db_topic_verdict *verdict,
                                     struct db_error *err)
{
    struct key_history a = {{topic, budget, NULL, DB_TOPIC_NOT_FOUND}, key, before, limit};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, key_history_tx, &a, err);
    int n = st == DB_OK && a.p.rows != NULL ? PQntuples(a.p.rows) : 0, i = 0;
    int64_t oldest = 0;
    for (; i < n; i++) {
        const PGresult *r = a.p.rows;
        struct db_log_message m = {
            .offset = strtoll(PQgetvalue(r, i, 0), NULL, 10),
            .key = key,
            .value = PQgetisnull(r, i, 1) ? NULL : PQgetvalue(r, i, 1),
            .value_len = (size_t)PQgetlength(r, i, 1),
            .producer = PQgetisnull(r, i, 2) ? NULL : PQgetvalue(r, i, 2),
            .rank = strtoll(PQgetvalue(r, i, 3), NULL, 10),
            .schema_version = atoi(PQgetvalue(r, i, 4)),
            .created_at = PQgetvalue(r, i, 5),
        };
        if (each(&m, ctx) != 0)
            break; /* the page is full: this message starts the next one */
        oldest = m.offset;
    }
    /* cut short (here, by the budget, or at limit): go on below the oldest given; else the
     * whole window was looked at: go on below it, unless it reached the log's start */
    int64_t total = n > 0 ? strtoll(PQgetvalue(a.p.rows, 0, 6), NULL, 10) : 0;
    int64_t start = a.before - DB_TOPIC_HISTORY_WINDOW;
    if (i > 0 && (i < n || n < total || n == limit))
        *next = oldest;
    else
        *next = start > 1 ? start : 0;
    PQclear(a.p.rows);
    *verdict = a.p.verdict;
    return st == DB_ABORTED ? DB_OK : st;
}
