/* Compacted topics (see topics.h): the handles, their statements, and the workflows the REST
 * routes call. Statements on generated tables are templates in which {m}, {h} and {s} stand for
 * the topic's message table, head table and offset sequence (named by the topic id, quoted with
 * PQescapeIdentifier); each is prepared once per connection under a name holding the id. */
#include "db/topics.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/generated.h"
#include "db/tx.h"

/* ---- statements on the catalogue ---- */

#define TOPIC_COLUMNS                                                                              \
    "id, name, headless_ttl_seconds, coalesce(retention_seconds, 0), default_schema_version, "     \
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "                \
    "to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

static const struct db_stmt st_resolve = {
    "topic_resolve", "SELECT " TOPIC_COLUMNS " FROM rowlock.topics WHERE name = $1", 1};
static const struct db_stmt st_insert_topic = {
    "topic_insert",
    "INSERT INTO rowlock.topics (name, headless_ttl_seconds, retention_seconds, "
    "default_schema_version) VALUES ($1, $2, nullif($3::integer, 0), $4) "
    "ON CONFLICT (name) DO NOTHING RETURNING " TOPIC_COLUMNS,
    4};
static const struct db_stmt st_update_topic = {
    "topic_update",
    "UPDATE rowlock.topics SET headless_ttl_seconds = $2, retention_seconds = "
    "nullif($3::integer, 0), default_schema_version = $4, updated_at = now() WHERE name = $1 "
    "RETURNING " TOPIC_COLUMNS,
    4};
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
static const struct db_stmt st_producer = {
    "producer_get",
    "SELECT schema_version FROM rowlock.producers WHERE topic_id = $1 AND name = $2", 2};
static const struct db_stmt st_producer_put = {
    "producer_put",
    "INSERT INTO rowlock.producers AS p (topic_id, name, schema_version) VALUES ($1, $2, $3) "
    "ON CONFLICT (topic_id, name) DO UPDATE SET schema_version = EXCLUDED.schema_version, "
    "updated_at = now() RETURNING (xmax = 0) AS created",
    3};
static const struct db_stmt st_headless = {
    "topics_headless",
    "SELECT name, headless_rows, headless_oldest_age_seconds "
    "FROM rowlock.topics_headless($1)",
    1};
static const struct db_stmt st_topic_ids = {
    "topics_ids",
    "SELECT id, name, headless_ttl_seconds, coalesce(retention_seconds, 0) FROM rowlock.topics", 0};

/* ---- statements on a topic's generated tables ---- */

/* The head of a key joined with its message; headless rows do not join. */
#define HEAD_SELECT                                                                                \
    "SELECT h.head_id, h.compaction_rank, h.schema_version, m.value::text, m.value IS NULL "       \
    "FROM {h} h JOIN {m} m ON m.\"offset\" = h.head_id WHERE h.key = $1"

static const char sql_head_read[] = HEAD_SELECT;
/* The locked read (db_key_lock_head) sends its steps together in one round trip.
 * Locked read, step 1: the row, if any, locked. Only the head row: had the message been joined
 * here, a lock wait ending in a new head would re-read the head row but not the message (READ
 * COMMITTED re-checks only locked rows), and a live head would look like a tombstone. The head's
 * message is read by the next statement, under the lock, with a fresh snapshot. */
static const char sql_head_lock[] = "SELECT head_id IS NOT NULL FROM {h} WHERE key = $1 FOR UPDATE";
/* A headless row found under the lock is refreshed, so the janitor's TTL counts from now. */
static const char sql_head_touch[] = "UPDATE {h} SET updated_at = now() WHERE key = $1";
/* Locked read, step 2: no row; create the headless one unless someone else just did. */
static const char sql_head_insert[] =
    "INSERT INTO {h} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING key";

/* Compacted produce of a batch: $1 keys, $2 values (JSON text, NULL = tombstone), $3 ranks,
 * $4 sequences (NULL entries: none), $5 producer, $6 schema version. Offsets are drawn in
 * input order; a head moves only to a higher rank; heads are upserted in key order so that
 * concurrent batches lock them in the same order; one candidate per key. */
static const char sql_produce[] =
    "WITH input AS ("
    "  SELECT i, k, v, r, s, nextval('{s}') AS off FROM ("
    "    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) "
    "      WITH ORDINALITY AS u(k, v, r, s, i) ORDER BY i) o"
    "), ins AS ("
    "  INSERT INTO {m} (\"offset\", key, value, producer, sequence, schema_version, rank) "
    "  SELECT off, k, v::jsonb, $5, s, $6, coalesce(r, off) FROM input ORDER BY i "
    "  ON CONFLICT (producer, sequence) WHERE sequence IS NOT NULL DO NOTHING "
    "  RETURNING \"offset\", key, rank"
    "), cand AS ("
    "  SELECT DISTINCT ON (key) key, \"offset\", rank FROM ins ORDER BY key, rank DESC, \"offset\""
    "), up AS ("
    "  INSERT INTO {h} AS h (key, head_id, schema_version, compaction_rank) "
    "  SELECT key, \"offset\", $6, rank FROM cand ORDER BY key "
    "  ON CONFLICT (key) DO UPDATE SET head_id = EXCLUDED.head_id, "
    "    schema_version = EXCLUDED.schema_version, compaction_rank = EXCLUDED.compaction_rank, "
    "    updated_at = now() "
    "  WHERE h.compaction_rank IS NULL OR h.compaction_rank < EXCLUDED.compaction_rank "
    "  RETURNING key, head_id"
    ") "
    "SELECT input.i, input.off, ins.\"offset\" IS NOT NULL, "
    "  coalesce(up.head_id, (SELECT head_id FROM {h} WHERE key = input.k)) "
    "FROM input LEFT JOIN ins ON ins.\"offset\" = input.off "
    "LEFT JOIN up ON up.key = input.k "
    "ORDER BY input.i";
/* Originals of sequences already used: $1 producer, $2 sequences. */
static const char sql_duplicates[] =
    "SELECT sequence, \"offset\", (SELECT head_id FROM {h} h WHERE h.key = m.key) FROM {m} m "
    "WHERE producer = $1 AND sequence = ANY($2::bigint[])";

static const char sql_log_read[] =
    "SELECT \"offset\", hole, key, value::text, producer, rank, schema_version, "
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
    "FROM {m} WHERE \"offset\" > $1 ORDER BY \"offset\" LIMIT $2";
/* Records offsets $1..$2 that hold no visible row as holes. An offset still held by a
 * transaction in progress makes this wait on it, which the caller bounds with lock_timeout. */
static const char sql_log_fill[] =
    "INSERT INTO {m} (\"offset\", hole) SELECT g, true FROM generate_series($1::bigint, "
    "$2::bigint) g ON CONFLICT (\"offset\") DO NOTHING";

static const char sql_keys[] =
    "SELECT h.key, m.value::text, h.head_id, h.compaction_rank, h.schema_version, "
    "to_char(h.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') "
    "FROM {h} h JOIN {m} m ON m.\"offset\" = h.head_id "
    "WHERE h.key > coalesce($1, '') AND m.value IS NOT NULL ORDER BY h.key LIMIT $2";

/* Janitor: expired headless rows through the partial index; rows locked by a reader are
 * skipped, never waited for. $1 TTL seconds, $2 batch. */
static const char sql_janitor[] =
    "DELETE FROM {h} WHERE key IN ("
    "  SELECT key FROM {h} WHERE head_id IS NULL "
    "  AND updated_at < now() - make_interval(secs => $1::double precision) "
    "  ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED) "
    "AND head_id IS NULL";
/* Retention: superseded messages older than the retention lose their payload and become holes
 * (readers skip them; offsets stay dense). The current head of a key is never touched. */
static const char sql_retention[] =
    "UPDATE {m} SET hole = true, key = NULL, value = NULL, producer = NULL, sequence = NULL, "
    "schema_version = NULL, rank = NULL WHERE \"offset\" IN ("
    "  SELECT m.\"offset\" FROM {m} m WHERE NOT m.hole "
    "  AND m.created_at < now() - make_interval(secs => $1::double precision) "
    "  AND m.\"offset\" IS DISTINCT FROM (SELECT head_id FROM {h} h WHERE h.key = m.key) "
    "  ORDER BY m.\"offset\" LIMIT $2 FOR UPDATE SKIP LOCKED)";

static const struct db_gen_table topic_tables[] = {{'m', "messages_", ""},
                                                   {'h', "compaction_head_", ""},
                                                   {'s', "messages_", "_offset"},
                                                   {0, 0, 0}};

/* Runs template sql (identified by tag) on topic's tables. */
static enum db_status topic_query(struct db_conn *c, int64_t topic, const char *tag,
                                  const char *sql, int nparams, const char *const *params,
                                  PGresult **out, struct db_error *err)
{
    struct db_gen g = {'t', topic, topic_tables};
    return db_gen_query(c, &g, tag, sql, nparams, params, out, err);
}

static int is_missing_table(const struct db_error *err)
{
    return db_gen_missing(err);
}

static void i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
}

/* ---- topic ids by name, as hints ----
 *
 * A head write that knows its topic's id sends the topic lookup and the key's locked read in
 * one round trip, and checks the lookup's answer before using anything it read. The id of a
 * name is only a hint: correctness never depends on it. A topic keeps its id for life and its
 * tables exist exactly as long as its row, so when the lookup (in the same transaction) gives
 * the hinted id, every statement of the round trip ran on the right topic's tables; when it
 * does not (the topic was deleted, or recreated under a new id by any process), the
 * transaction is rolled back and run again without the hint. */

#define HINT_SLOTS 256

static struct {
    char name[129];
    int64_t id;
} hints[HINT_SLOTS];
static pthread_mutex_t hints_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t hint_slot(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % HINT_SLOTS;
}

/* The hinted id of topic name, or 0. */
static int64_t hint_get(const char *name)
{
    size_t i = hint_slot(name);
    int64_t id = 0;
    pthread_mutex_lock(&hints_mu);
    if (strcmp(hints[i].name, name) == 0)
        id = hints[i].id;
    pthread_mutex_unlock(&hints_mu);
    return id;
}

/* Remembers id for name (id 0 forgets name). */
static void hint_set(const char *name, int64_t id)
{
    if (strlen(name) >= sizeof(hints[0].name))
        return;
    size_t i = hint_slot(name);
    pthread_mutex_lock(&hints_mu);
    if (id != 0)
        snprintf(hints[i].name, sizeof(hints[i].name), "%s", name);
    if (id != 0 || strcmp(hints[i].name, name) == 0) {
        hints[i].id = id;
        if (id == 0)
            hints[i].name[0] = '\0';
    }
    pthread_mutex_unlock(&hints_mu);
}

/* ---- handles ---- */

void db_head_clear(struct db_head *h)
{
    free(h->value);
    memset(h, 0, sizeof(*h));
}

static void topic_from_row(const PGresult *r, int row, int col, struct db_topic *t)
{
    t->id = strtoll(PQgetvalue(r, row, col), NULL, 10);
    snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(r, row, col + 1));
    t->headless_ttl_seconds = strtoll(PQgetvalue(r, row, col + 2), NULL, 10);
    t->retention_seconds = strtoll(PQgetvalue(r, row, col + 3), NULL, 10);
    t->default_schema_version = atoi(PQgetvalue(r, row, col + 4));
    snprintf(t->created_at, sizeof(t->created_at), "%s", PQgetvalue(r, row, col + 5));
    snprintf(t->updated_at, sizeof(t->updated_at), "%s", PQgetvalue(r, row, col + 6));
}

enum db_status db_topic_resolve(struct db_conn *c, const char *name, struct db_topic *out,
                                int *found, struct db_error *err)
{
    PGresult *r = NULL;
    const char *params[] = {name};
    *found = 0;
    enum db_status st = db_query(c, &st_resolve, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        topic_from_row(r, 0, 0, out);
        *found = 1;
        hint_set(name, out->id);
    }
    PQclear(r);
    return DB_OK;
}

void db_topic_key(const struct db_topic *t, const char *key, struct db_key *out)
{
    out->topic = t;
    out->key = key;
}

enum db_status db_topic_producer(struct db_conn *c, const struct db_topic *t, const char *name,
                                 struct db_producer *out, int *found, struct db_error *err)
{
    out->topic = t;
    out->name = name;
    out->schema_version = t->default_schema_version;
    *found = 1;
    if (name == NULL)
        return DB_OK;
    char id[24];
    i64(id, sizeof(id), t->id);
    const char *params[] = {id, name};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_producer, params, &r, err);
    if (st != DB_OK)
        return st;
    *found = PQntuples(r) == 1;
    if (*found)
        out->schema_version = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return DB_OK;
}

/* Fills h from a head row (head_id, rank, schema_version, value, value IS NULL). */
static int head_from_row(const PGresult *r, struct db_head *h)
{
    memset(h, 0, sizeof(*h));
    if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0))
        return 0;
    h->has_head = 1;
    h->offset = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    h->rank = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    h->schema_version = atoi(PQgetvalue(r, 0, 2));
    h->deleted = PQgetvalue(r, 0, 4)[0] == 't';
    if (!h->deleted) {
        h->value = strdup(PQgetvalue(r, 0, 3));
        if (h->value == NULL)
            return -1;
    }
    return 0;
}

enum db_status db_key_read_head(struct db_conn *c, const struct db_key *k, struct db_head *out,
                                struct db_error *err)
{
    PGresult *r = NULL;
    const char *params[] = {k->key};
    enum db_status st =
        topic_query(c, k->topic->id, "head_read", sql_head_read, 1, params, &r, err);
    if (st != DB_OK)
        return st;
    int rc = head_from_row(r, out);
    PQclear(r);
    if (rc != 0) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    return DB_OK;
}

/* The locked read's round trip: the lock; the headless insert, which does nothing when the
 * lock found the row (we hold it); the head's read under the lock, with its own snapshot. Each
 * result is used only in the case where the step-by-step protocol would have run it. */
struct lock_round {
    PGresult *locked, *inserted, *head;
};

/* Fills calls (room for 3) with the round's statements on key k; returns how many. */
static size_t lock_calls(const char *const *params, struct lock_round *r, struct db_gen_call *calls)
{
    size_t n = 0;
    calls[n++] = (struct db_gen_call){"head_lock", sql_head_lock, 1, params, &r->locked};
#ifndef ROWLOCK_TEST_SKIP_HEADLESS_INSERT
    calls[n++] = (struct db_gen_call){"head_insert", sql_head_insert, 1, params, &r->inserted};
#endif
    calls[n++] = (struct db_gen_call){"head_read", sql_head_read, 1, params, &r->head};
    return n;
}

/* What a round that ran found: *locked 1 when k's row is now ours (out then says whether it
 * has a head), 0 when the insert lost a race and the caller must go round again. Clears r. */
static enum db_status lock_outcome(struct db_conn *c, const struct db_key *k,
                                   const char *const *params, struct lock_round *r,
                                   struct db_head *out, int *locked, struct db_error *err)
{
    int present = PQntuples(r->locked) == 1;
    int has_head = present && PQgetvalue(r->locked, 0, 0)[0] == 't';
    int created = r->inserted != NULL && PQntuples(r->inserted) == 1;
    int rc = has_head ? head_from_row(r->head, out) : 0;
    PQclear(r->locked);
    PQclear(r->inserted);
    PQclear(r->head);
    memset(r, 0, sizeof(*r));
    *locked = 1;
    if (rc != 0) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    if (has_head)
        return DB_OK;
    if (present)
        return topic_query(c, k->topic->id, "head_touch", sql_head_touch, 1, params, NULL, err);
#ifdef ROWLOCK_TEST_SKIP_HEADLESS_INSERT
    /* Built only into the test binary rowlock-unlocked: the bug the concurrency tests must
     * detect. A key without a row is then not locked at all. */
    (void)sql_head_insert;
    (void)created;
    return DB_OK;
#endif
    /* our own new row is locked until we end; a lost insert race means locking the winner's */
    *locked = created;
    return DB_OK;
}

enum db_status db_key_lock_head(struct db_conn *c, const struct db_key *k, struct db_head *out,
                                struct db_error *err)
{
    const char *params[] = {k->key};
    struct db_gen g = {'t', k->topic->id, topic_tables};
    memset(out, 0, sizeof(*out));
    for (int locked = 0; !locked;) {
        struct lock_round r = {NULL, NULL, NULL};
        struct db_gen_call calls[3];
        size_t n = lock_calls(params, &r, calls);
        enum db_status st = db_gen_pipeline(c, &g, calls, n, err);
        if (st == DB_OK)
            st = lock_outcome(c, k, params, &r, out, &locked, err);
        if (st != DB_OK)
            return st;
    }
    return DB_OK;
}

enum db_status db_producer_produce(struct db_conn *c, const struct db_producer *p,
                                   const struct db_message_in *msgs, size_t n,
                                   struct db_message_out *out, struct db_error *err)
{
    enum db_status st = DB_ERR_HARD;
    const char **keys = calloc(n, sizeof(char *)), **vals = calloc(n, sizeof(char *));
    const char **ranks = calloc(n, sizeof(char *)), **seqs = calloc(n, sizeof(char *));
    char(*nums)[2][24] = calloc(n, sizeof(*nums));
    char *a_keys = NULL, *a_vals = NULL, *a_ranks = NULL, *a_seqs = NULL;
    PGresult *r = NULL;
    int dups = 0;
    if (keys == NULL || vals == NULL || ranks == NULL || seqs == NULL || nums == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        keys[i] = msgs[i].key;
        vals[i] = msgs[i].value;
        if (msgs[i].has_rank) {
            i64(nums[i][0], sizeof(nums[i][0]), msgs[i].rank);
            ranks[i] = nums[i][0];
        }
        if (msgs[i].has_sequence) {
            i64(nums[i][1], sizeof(nums[i][1]), msgs[i].sequence);
            seqs[i] = nums[i][1];
        }
    }
    a_keys = db_text_array(keys, n);
    a_vals = db_text_array(vals, n);
    a_ranks = db_text_array(ranks, n);
    a_seqs = db_text_array(seqs, n);
    if (a_keys == NULL || a_vals == NULL || a_ranks == NULL || a_seqs == NULL)
        goto oom;
    char sv[16];
    snprintf(sv, sizeof(sv), "%d", p->schema_version);
    const char *params[] = {a_keys, a_vals, a_ranks, a_seqs, p->name, sv};
    st = topic_query(c, p->topic->id, "produce", sql_produce, 6, params, &r, err);
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23505") == 0)
        st = DB_ERR_RETRY; /* a reader recorded one of our fresh offsets as a hole: redraw */
    if (st != DB_OK)
        goto done;
    for (int i = 0; i < PQntuples(r) && (size_t)i < n; i++) {
        out[i].offset = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        int inserted = PQgetvalue(r, i, 2)[0] == 't';
        out[i].head_offset = strtoll(PQgetvalue(r, i, 3), NULL, 10);
        out[i].effect = !inserted                             ? DB_HEAD_DUPLICATE
                        : out[i].head_offset == out[i].offset ? DB_HEAD_ADVANCED
                                                              : DB_HEAD_RANK_REJECTED;
        dups += !inserted;
    }
    PQclear(r);
    r = NULL;
    if (dups > 0) {
        /* report the originals of the sequences already used */
        const char *dparams[] = {p->name, a_seqs};
        st = topic_query(c, p->topic->id, "duplicates", sql_duplicates, 2, dparams, &r, err);
        if (st != DB_OK)
            goto done;
        for (size_t i = 0; i < n; i++) {
            if (out[i].effect != DB_HEAD_DUPLICATE)
                continue;
            for (int row = 0; row < PQntuples(r); row++) {
                if (strcmp(PQgetvalue(r, row, 0), seqs[i]) != 0)
                    continue;
                out[i].offset = strtoll(PQgetvalue(r, row, 1), NULL, 10);
                out[i].head_offset = strtoll(PQgetvalue(r, row, 2), NULL, 10);
            }
        }
    }
    st = DB_OK;
    goto done;
oom:
    db_error_set(err, "", "out of memory");
    st = DB_ERR_HARD;
done:
    PQclear(r);
    free(keys);
    free(vals);
    free(ranks);
    free(seqs);
    free(nums);
    free(a_keys);
    free(a_vals);
    free(a_ranks);
    free(a_seqs);
    return st;
}

/* ---- workflows ---- */

/* Maps "the topic's tables are gone" (a concurrent DELETE won) to not found. */
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
    char ttl[24], ret[24], sv[16], id[24];
    i64(ttl, sizeof(ttl), a->cfg->headless_ttl_seconds);
    i64(ret, sizeof(ret), a->cfg->retention_seconds);
    snprintf(sv, sizeof(sv), "%d", a->cfg->default_schema_version);
    const char *params[] = {a->name, ttl, ret, sv};
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_insert_topic, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        topic_from_row(r, 0, 0, a->out);
        PQclear(r);
        a->verdict = DB_TOPIC_CREATED;
        i64(id, sizeof(id), a->out->id);
        const char *idp[] = {id};
        return db_query(c, &st_create_tables, idp, NULL, err);
    }
    PQclear(r);
    st = db_query(c, &st_update_topic, params, &r, err);
    if (st != DB_OK)
        return st;
    a->verdict = PQntuples(r) == 1 ? DB_TOPIC_OK : DB_TOPIC_NOT_FOUND;
    if (PQntuples(r) == 1)
        topic_from_row(r, 0, 0, a->out);
    PQclear(r);
    /* deleted between our insert attempt and update: let the caller retry */
    return a->verdict == DB_TOPIC_OK ? DB_OK : DB_ERR_RETRY;
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
    char id[24], cap[16];
    i64(id, sizeof(id), a->out->id);
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
    char limit[16], cap[16];
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
    struct list_topics a = {after, limit, each, ctx, NULL};
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, list_topics_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_topic t;
        struct db_topic_stats s;
        topic_from_row(a.rows, i, 0, &t);
        stats_from_row(a.rows, i, 7, &s);
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
    /* DROP waits for every transaction that already touched the tables */
    st = db_query(c, &st_drop_tables, idp, NULL, err);
    PQclear(r);
    a->verdict = DB_TOPIC_OK;
    return st;
}

enum db_status db_topics_delete(struct db_pool *pool, const char *name,
                                enum db_topic_verdict *verdict, struct db_error *err)
{
    struct delete_topic a = {name, DB_TOPIC_NOT_FOUND};
    hint_set(name, 0);
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
    char id[24], sv[16];
    i64(id, sizeof(id), t.id);
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

enum db_status db_topics_produce(struct db_pool *pool, const char *topic, const char *producer,
                                 const struct db_message_in *msgs, size_t n,
                                 struct db_message_out *out, enum db_topic_verdict *verdict,
                                 struct db_error *err)
{
    struct produce a = {topic, producer, msgs, n, out, DB_TOPIC_NOT_FOUND};
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

/* A head write's first round trip when the topic's id is hinted: BEGIN (pending), the topic
 * lookup, the producer lookup, and the key's locked read, together. *locked 0 means the lock
 * is not taken yet (the insert lost a race): the caller goes on with db_key_lock_head. A stale
 * hint is dropped and answered DB_ERR_RETRY: the transaction runs again without it. */
static enum db_status hinted_lock(struct db_conn *c, struct db_head_write *w, int64_t hint,
                                  struct db_topic *t, struct db_producer *p, int *locked,
                                  struct db_error *err)
{
    struct db_gen g = {'t', hint, topic_tables};
    char id[24];
    i64(id, sizeof(id), hint);
    const char *name_param[] = {w->topic}, *producer_params[] = {id, w->producer};
    const char *key_param[] = {w->key};
    PGresult *resolved = NULL, *registered = NULL;
    struct lock_round r = {NULL, NULL, NULL};
    struct db_gen_call lock[3];
    struct db_gen_slot slots[3];
    struct db_call calls[5];
    size_t n = 0, nlock = lock_calls(key_param, &r, lock);
    calls[n++] = (struct db_call){.st = &st_resolve, .params = name_param, .out = &resolved};
    if (w->producer != NULL)
        calls[n++] =
            (struct db_call){.st = &st_producer, .params = producer_params, .out = &registered};
    for (size_t i = 0; i < nlock; i++)
        db_gen_call_make(c, &g, &lock[i], &slots[i], &calls[n++]);
    enum db_status st = db_query_pipeline(c, calls, n, err);
    int current = st == DB_OK && PQntuples(resolved) == 1 &&
                  strtoll(PQgetvalue(resolved, 0, 0), NULL, 10) == hint;
    if (current)
        topic_from_row(resolved, 0, 0, t);
    int known = current && (w->producer == NULL || PQntuples(registered) == 1);
    p->topic = t;
    p->name = w->producer;
    p->schema_version = !known                ? 0
                        : w->producer != NULL ? atoi(PQgetvalue(registered, 0, 0))
                                              : t->default_schema_version;
    PQclear(resolved);
    PQclear(registered);
    if (st == DB_OK && current && !known) {
        /* the lock (and a headless row) must not outlive a 404: roll back */
        PQclear(r.locked);
        PQclear(r.inserted);
        PQclear(r.head);
        w->verdict = DB_TOPIC_PRODUCER_NOT_FOUND;
        return DB_ABORTED;
    }
    if ((st == DB_OK && !current) || (st == DB_ERR_HARD && is_missing_table(err))) {
        PQclear(r.locked);
        PQclear(r.inserted);
        PQclear(r.head);
        hint_set(w->topic, 0);
        db_error_set(err, "", "topic %s is no longer id %" PRId64, w->topic, hint);
        return DB_ERR_RETRY;
    }
    if (st != DB_OK)
        return st;
    w->verdict = DB_TOPIC_OK;
    struct db_key k;
    db_topic_key(t, w->key, &k);
    return lock_outcome(c, &k, key_param, &r, &w->before, locked, err);
}

static enum db_status head_write_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct db_head_write *w = arg;
    struct db_topic t;
    struct db_producer p;
    struct db_key k;
    db_head_clear(&w->before);
    w->verdict = DB_TOPIC_NOT_FOUND;
    int64_t hint = hint_get(w->topic);
    int locked = 0;
    enum db_status st = DB_OK;
    if (hint > 0) {
        st = hinted_lock(c, w, hint, &t, &p, &locked, err);
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
    st = db_producer_produce(c, &p, &m, 1, &w->produced, err);
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

struct read_log {
    const char *topic;
    int64_t after;
    int limit;
    PGresult *rows; /* the visible rows read last */
    int usable;     /* how many of them are safe to show (no unresolved gap before them) */
    enum db_topic_verdict verdict;
};

static enum db_status read_log_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct read_log *a = arg;
    struct db_topic t;
    int found = 0;
    PQclear(a->rows);
    a->rows = NULL;
    a->usable = 0;
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, a->topic, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    a->verdict = DB_TOPIC_OK;
    struct db_gen g = {'t', t.id, topic_tables};
    return topic_gone(db_gen_read_log(c, &g, sql_log_read, sql_log_fill, a->after, a->limit,
                                      &a->rows, &a->usable, err),
                      err, &a->verdict);
}

enum db_status db_topics_read_log(struct db_pool *pool, const char *topic, int64_t after, int limit,
                                  db_log_each each, void *ctx, int64_t *next,
                                  enum db_topic_verdict *verdict, struct db_error *err)
{
    struct read_log a = {topic, after, limit, NULL, 0, DB_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, read_log_tx, &a, err);
    *verdict = a.verdict;
    *next = after;
    for (int i = 0; st == DB_OK && i < a.usable; i++) {
        const PGresult *r = a.rows;
        *next = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        if (PQgetvalue(r, i, 1)[0] == 't')
            continue; /* a hole: nothing was committed there */
        struct db_log_message m = {
            .offset = *next,
            .key = PQgetvalue(r, i, 2),
            .value = PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
            .producer = PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4),
            .rank = strtoll(PQgetvalue(r, i, 5), NULL, 10),
            .schema_version = atoi(PQgetvalue(r, i, 6)),
            .created_at = PQgetvalue(r, i, 7),
        };
        each(&m, ctx);
    }
    PQclear(a.rows);
    return st == DB_ABORTED ? DB_OK : st;
}

struct list_keys {
    const char *topic, *after;
    int limit;
    PGresult *rows;
    enum db_topic_verdict verdict;
};

static enum db_status list_keys_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct list_keys *a = arg;
    struct db_topic t;
    int found = 0;
    PQclear(a->rows);
    a->rows = NULL;
    a->verdict = DB_TOPIC_NOT_FOUND;
    enum db_status st = db_topic_resolve(c, a->topic, &t, &found, err);
    if (st != DB_OK || !found)
        return st;
    a->verdict = DB_TOPIC_OK;
    char limit[16];
    snprintf(limit, sizeof(limit), "%d", a->limit);
    const char *params[] = {a->after, limit};
    return topic_gone(topic_query(c, t.id, "keys", sql_keys, 2, params, &a->rows, err), err,
                      &a->verdict);
}

enum db_status db_topics_list_keys(struct db_pool *pool, const char *topic, const char *after,
                                   int limit, db_key_each each, void *ctx,
                                   enum db_topic_verdict *verdict, struct db_error *err)
{
    struct list_keys a = {topic, after, limit, NULL, DB_TOPIC_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_keys_tx, &a, err);
    *verdict = a.verdict;
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        const PGresult *r = a.rows;
        struct db_key_entry k = {
            .key = PQgetvalue(r, i, 0),
            .value = PQgetvalue(r, i, 1),
            .offset = strtoll(PQgetvalue(r, i, 2), NULL, 10),
            .rank = strtoll(PQgetvalue(r, i, 3), NULL, 10),
            .schema_version = atoi(PQgetvalue(r, i, 4)),
            .updated_at = PQgetvalue(r, i, 5),
        };
        each(&k, ctx);
    }
    PQclear(a.rows);
    return st == DB_ABORTED ? DB_OK : st;
}

struct headless {
    PGresult *rows;
};

static enum db_status headless_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct headless *a = arg;
    char cap[16];
    snprintf(cap, sizeof(cap), "%d", DB_TOPIC_HEADLESS_CAP);
    const char *params[] = {cap};
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, &st_headless, params, &a->rows, err);
}

enum db_status db_topics_headless(struct db_pool *pool, db_headless_each each, void *ctx,
                                  struct db_error *err)
{
    struct headless a = {NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, headless_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++)
        each(PQgetvalue(a.rows, i, 0), strtoll(PQgetvalue(a.rows, i, 1), NULL, 10),
             atof(PQgetvalue(a.rows, i, 2)), ctx);
    PQclear(a.rows);
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
    char ttl[24], batch[16];
    i64(ttl, sizeof(ttl), a->ttl);
    snprintf(batch, sizeof(batch), "%d", a->batch);
    const char *params[] = {ttl, batch};
    PGresult *r = NULL;
    a->deleted = a->compacted = 0;
    enum db_status st = topic_query(c, a->id, "janitor", sql_janitor, 2, params, &r, err);
    if (st != DB_OK)
        return st;
    a->deleted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    if (a->retention <= 0)
        return DB_OK;
    i64(ttl, sizeof(ttl), a->retention);
    st = topic_query(c, a->id, "retention", sql_retention, 2, params, &r, err);
    if (st != DB_OK)
        return st;
    a->compacted = strtoll(PQcmdTuples(r), NULL, 10);
    PQclear(r);
    return DB_OK;
}

static enum db_status topic_ids_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    PGresult **rows = arg;
    PQclear(*rows);
    *rows = NULL;
    return db_query(c, &st_topic_ids, NULL, rows, err);
}

enum db_status db_topics_janitor(struct db_pool *pool, int batch, db_janitor_each each, void *ctx,
                                 struct db_error *err)
{
    PGresult *rows = NULL;
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, topic_ids_tx, &rows, err);
    /* one short transaction per topic: a slow topic never holds up the others' locks */
    for (int i = 0; st == DB_OK && i < PQntuples(rows); i++) {
        struct janitor_topic a = {strtoll(PQgetvalue(rows, i, 0), NULL, 10),
                                  strtoll(PQgetvalue(rows, i, 2), NULL, 10),
                                  strtoll(PQgetvalue(rows, i, 3), NULL, 10),
                                  batch,
                                  0,
                                  0};
        enum db_status one = db_tx_run(pool, DB_READ_COMMITTED, janitor_topic_tx, &a, err);
        if (one == DB_ERR_HARD && is_missing_table(err))
            continue; /* deleted meanwhile */
        if (one != DB_OK)
            st = one;
        else if (each != NULL)
            each(PQgetvalue(rows, i, 1), a.deleted, a.compacted, ctx);
    }
    PQclear(rows);
    return st;
}
