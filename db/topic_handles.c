/* The handles of compacted topics (see topics.h): the topic lookup, the key handle (plain and
 * locked reads of a key's head) and the producer handle (compacted produce), the statements they
 * run on the topics' shared tables, and the hinted lookup head writes send with the locked read.
 * The workflows composing them, and every other topic statement, are in db/topics.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/conn.h"
#include "db/hints.h"
#include "db/topics_internal.h"
#include "db/tx.h"

/* ---- statements ---- */

static const struct db_stmt st_resolve = {
    "topic_resolve", "SELECT " TOPIC_COLUMNS " FROM rowlock.topics WHERE name = $1", 1};
/* The byte budget of the pages this transaction reads (db_topic_resolve_paged). */
static const struct db_stmt st_page_budget = {
    "topic_page_budget", "SELECT set_config('" DB_TOPIC_PAGE_BUDGET "', $1, true)", 1};
static const struct db_stmt st_producer = {
    "producer_get",
    "SELECT schema_version FROM rowlock.producers WHERE topic_id = $1 AND name = $2", 2};

/* ---- statements on the topics' shared tables ----
 *
 * Every topic's log is rowlock.topic_messages and its heads rowlock.topic_heads (migration 12),
 * so each statement names its topic by a topic_id parameter and is prepared once per connection
 * whatever the topic. */

/* The head of a key joined with its message; headless rows do not join. $1 topic, $2 key. */
#define HEAD_SELECT                                                                                \
    "SELECT h.head_id, h.compaction_rank, h.schema_version, m.value::text, m.value IS NULL "       \
    "FROM rowlock.topic_heads h JOIN rowlock.topic_messages m "                                    \
    "ON m.topic_id = h.topic_id AND m.\"offset\" = h.head_id "                                     \
    "WHERE h.topic_id = $1::bigint AND h.key = $2"

static const struct db_stmt st_head_read = {"topic_head_read", HEAD_SELECT, 2};
/* The locked read (db_key_lock_head) sends its steps together in one round trip.
 * Locked read, step 1: the row, if any, locked. Only the head row: had the message been joined
 * here, a lock wait ending in a new head would re-read the head row but not the message (READ
 * COMMITTED re-checks only locked rows), and a live head would look like a tombstone. The head's
 * message is read by the next statement, under the lock, with a fresh snapshot. */
static const struct db_stmt st_head_lock = {
    "topic_head_lock",
    "SELECT head_id IS NOT NULL FROM rowlock.topic_heads WHERE topic_id = $1::bigint AND key = $2 "
    "FOR UPDATE",
    2};
/* A headless row found under the lock is refreshed, so the janitor's TTL counts from now. */
static const struct db_stmt st_head_touch = {
    "topic_head_touch",
    "UPDATE rowlock.topic_heads SET updated_at = now() WHERE topic_id = $1::bigint AND key = $2",
    2};
/* Locked read, step 2: no row; create the headless one unless someone else just did. */
static const struct db_stmt st_head_insert = {
    "topic_head_insert",
    "INSERT INTO rowlock.topic_heads (topic_id, key) VALUES ($1::bigint, $2) "
    "ON CONFLICT (topic_id, key) DO NOTHING RETURNING key",
    2};

/* Compacted produce of a batch: $1 keys, $2 values (JSON text, NULL = tombstone), $3 ranks,
 * $4 sequences (NULL entries: none), $5 producer, $6 schema version, $7 the topic, $8 its offset
 * sequence (a regclass, read once when the statement is bound). Offsets are drawn in input
 * order; a head moves only to a higher rank; heads are upserted in key order so that
 * concurrent batches lock them in the same order; one candidate per key. */
static const struct db_stmt st_produce = {
    "topic_produce",
    "WITH input AS ("
    "  SELECT i, k, v, r, s, nextval($8::regclass) AS off FROM ("
    "    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) "
    "      WITH ORDINALITY AS u(k, v, r, s, i) ORDER BY i) o"
    "), ins AS ("
    "  INSERT INTO rowlock.topic_messages (topic_id, \"offset\", key, value, producer, sequence, "
    "    schema_version, rank) "
    "  SELECT $7::bigint, off, k, v::jsonb, $5, s, $6, coalesce(r, off) FROM input ORDER BY i "
    "  ON CONFLICT (topic_id, producer, sequence) WHERE sequence IS NOT NULL DO NOTHING "
    "  RETURNING \"offset\", key, rank"
    "), cand AS ("
    "  SELECT DISTINCT ON (key) key, \"offset\", rank FROM ins ORDER BY key, rank DESC, \"offset\""
    "), up AS ("
    "  INSERT INTO rowlock.topic_heads AS h (topic_id, key, head_id, schema_version, "
    "    compaction_rank) "
    "  SELECT $7::bigint, key, \"offset\", $6, rank FROM cand ORDER BY key "
    "  ON CONFLICT (topic_id, key) DO UPDATE SET head_id = EXCLUDED.head_id, "
    "    schema_version = EXCLUDED.schema_version, compaction_rank = EXCLUDED.compaction_rank, "
    "    updated_at = now() "
    "  WHERE h.compaction_rank IS NULL OR h.compaction_rank < EXCLUDED.compaction_rank "
    "  RETURNING key, head_id"
    ") "
    "SELECT input.i, input.off, ins.\"offset\" IS NOT NULL, "
    "  coalesce(up.head_id, (SELECT head_id FROM rowlock.topic_heads "
    "    WHERE topic_id = $7::bigint AND key = input.k)) "
    "FROM input LEFT JOIN ins ON ins.\"offset\" = input.off "
    "LEFT JOIN up ON up.key = input.k "
    "ORDER BY input.i",
    8};
/* Originals of sequences already used: $1 topic, $2 producer, $3 sequences. */
static const struct db_stmt st_duplicates = {
    "topic_duplicates",
    "SELECT sequence, \"offset\", (SELECT head_id FROM rowlock.topic_heads h "
    "  WHERE h.topic_id = $1::bigint AND h.key = m.key) "
    "FROM rowlock.topic_messages m "
    "WHERE m.topic_id = $1::bigint AND producer = $2 AND sequence = ANY($3::bigint[])",
    3};

void db_topic_sequence(int64_t topic, char *out, size_t size)
{
    snprintf(out, size, "rowlock.topic_offsets_%" PRId64, topic);
}

int db_topic_missing(const struct db_error *err)
{
    /* 42P01: the topic's sequence is gone; 23503: a row's topic is gone (its foreign key). A
     * produce whose nextval waited on the lock of a DELETE that then dropped the sequence finds
     * the relation gone after the wait, which PostgreSQL reports as an internal error (XX000):
     * the sequence was named by its OID, bound before the wait. */
    return strcmp(err->sqlstate, "42P01") == 0 || strcmp(err->sqlstate, "23503") == 0 ||
           (strcmp(err->sqlstate, "XX000") == 0 &&
            strstr(err->message, "could not open relation with OID") != NULL);
}

/* ---- topic ids by name, as hints (db/hints.h) ----
 *
 * A head write that knows its topic's id sends the topic lookup and the key's locked read in
 * one round trip, and checks the lookup's answer before using anything it read. A topic's rows
 * carry its id and exist only while its row does (a foreign key, ON DELETE CASCADE), so when the
 * lookup (in the same transaction) gives the hinted id, every statement of the round trip ran on
 * the right topic's rows; when it does not (the topic was deleted, or recreated under a new id
 * by any process), or a headless row's foreign key found the hinted topic gone, the transaction
 * is rolled back and run again without the hint. */

static struct db_hints topic_hints = DB_HINTS_INIT;

int64_t db_topic_hint_get(const char *name)
{
    return db_hint_get(&topic_hints, name);
}

void db_topic_hint_set(const char *name, int64_t id)
{
    db_hint_set(&topic_hints, name, id);
}

/* ---- handles ---- */

void db_head_clear(struct db_head *h)
{
    free(h->value);
    memset(h, 0, sizeof(*h));
}

void db_topic_from_row(const PGresult *r, int row, int col, struct db_topic *t)
{
    t->id = strtoll(PQgetvalue(r, row, col), NULL, 10);
    snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(r, row, col + 1));
    t->headless_ttl_seconds = strtoll(PQgetvalue(r, row, col + 2), NULL, 10);
    t->retention_seconds = strtoll(PQgetvalue(r, row, col + 3), NULL, 10);
    t->default_schema_version = atoi(PQgetvalue(r, row, col + 4));
    snprintf(t->created_at, sizeof(t->created_at), "%s", PQgetvalue(r, row, col + 5));
    snprintf(t->updated_at, sizeof(t->updated_at), "%s", PQgetvalue(r, row, col + 6));
    t->retention_ignores_consumers = PQgetvalue(r, row, col + 7)[0] == 't';
}

/* Fills out from a resolve result r (cleared here); *found 0 when it has no row. */
static void resolved(PGresult *r, const char *name, struct db_topic *out, int *found)
{
    *found = r != NULL && PQntuples(r) == 1;
    if (*found) {
        db_topic_from_row(r, 0, 0, out);
        db_topic_hint_set(name, out->id);
    }
    PQclear(r);
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
    resolved(r, name, out, found);
    return DB_OK;
}

enum db_status db_topic_resolve_paged(struct db_conn *c, const char *name, size_t budget,
                                      struct db_topic *out, int *found, struct db_error *err)
{
    char b[DB_INT_TEXT];
    snprintf(b, sizeof(b), "%zu", budget);
    const char *bparams[] = {b}, *params[] = {name};
    PGresult *r = NULL;
    struct db_call calls[] = {{.st = &st_page_budget, .params = bparams},
                              {.st = &st_resolve, .params = params, .out = &r}};
    *found = 0;
    enum db_status st = db_query_pipeline(c, calls, 2, err);
    if (st != DB_OK)
        return st;
    resolved(r, name, out, found);
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
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), t->id);
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
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), k->topic->id);
    const char *params[] = {id, k->key};
    enum db_status st = db_query(c, &st_head_read, params, &r, err);
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

/* Fills calls (room for 3) with the round's statements on the key of params (topic id, key);
 * returns how many. */
static size_t lock_calls(const char *const *params, struct lock_round *r, struct db_call *calls)
{
    size_t n = 0;
    calls[n++] = (struct db_call){.st = &st_head_lock, .params = params, .out = &r->locked};
#ifndef ROWLOCK_TEST_SKIP_HEADLESS_INSERT
    calls[n++] = (struct db_call){.st = &st_head_insert, .params = params, .out = &r->inserted};
#endif
    calls[n++] = (struct db_call){.st = &st_head_read, .params = params, .out = &r->head};
    return n;
}

/* What a round that ran found: *locked 1 when the row of the key of params (topic id, key) is
 * now ours (out then says whether it has a head), 0 when the insert lost a race and the caller
 * must go round again. Clears r. */
static enum db_status lock_outcome(struct db_conn *c, const char *const *params,
                                   struct lock_round *r, struct db_head *out, int *locked,
                                   struct db_error *err)
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
        return db_query(c, &st_head_touch, params, NULL, err);
#ifdef ROWLOCK_TEST_SKIP_HEADLESS_INSERT
    /* Built only into the test binary rowlock-unlocked: the bug the concurrency tests must
     * detect. A key without a row is then not locked at all. */
    (void)st_head_insert;
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
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), k->topic->id);
    const char *params[] = {id, k->key};
    memset(out, 0, sizeof(*out));
    for (int locked = 0; !locked;) {
        struct lock_round r = {NULL, NULL, NULL};
        struct db_call calls[3];
        size_t n = lock_calls(params, &r, calls);
        enum db_status st = db_query_pipeline(c, calls, n, err);
        if (st == DB_OK)
            st = lock_outcome(c, params, &r, out, &locked, err);
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
            db_i64(nums[i][0], sizeof(nums[i][0]), msgs[i].rank);
            ranks[i] = nums[i][0];
        }
        if (msgs[i].has_sequence) {
            db_i64(nums[i][1], sizeof(nums[i][1]), msgs[i].sequence);
            seqs[i] = nums[i][1];
        }
    }
    a_keys = db_text_array(keys, n);
    a_vals = db_text_array(vals, n);
    a_ranks = db_text_array(ranks, n);
    a_seqs = db_text_array(seqs, n);
    if (a_keys == NULL || a_vals == NULL || a_ranks == NULL || a_seqs == NULL)
        goto oom;
    char sv[DB_INT_TEXT], id[DB_INT_TEXT], seq[64];
    snprintf(sv, sizeof(sv), "%d", p->schema_version);
    db_i64(id, sizeof(id), p->topic->id);
    db_topic_sequence(p->topic->id, seq, sizeof(seq));
    const char *params[] = {a_keys, a_vals, a_ranks, a_seqs, p->name, sv, id, seq};
    st = db_query(c, &st_produce, params, &r, err);
    db_conn_relation_opened(c, p->topic->id); /* nextval opened the topic's sequence */
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23505") == 0)
        st = DB_ERR_REDO; /* a reader recorded one of our fresh offsets as a hole: redraw */
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
        const char *dparams[] = {id, p->name, a_seqs};
        st = db_query(c, &st_duplicates, dparams, &r, err);
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

/* A head write's first round trip when the topic's id is hinted: BEGIN (pending), the topic
 * lookup, the producer lookup, and the key's locked read, together. *locked 0 means the lock
 * is not taken yet (the insert lost a race): the caller goes on with db_key_lock_head. A stale
 * hint is dropped and answered DB_ERR_REDO: the transaction runs again without it. */
enum db_status db_topic_lock_hinted(struct db_conn *c, struct db_head_write *w, int64_t hint,
                                    struct db_topic *t, struct db_producer *p, int *locked,
                                    struct db_error *err)
{
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), hint);
    const char *name_param[] = {w->topic}, *producer_params[] = {id, w->producer};
    const char *key_params[] = {id, w->key};
    PGresult *resolved = NULL, *registered = NULL;
    struct lock_round r = {NULL, NULL, NULL};
    struct db_call calls[5];
    size_t n = 0;
    calls[n++] = (struct db_call){.st = &st_resolve, .params = name_param, .out = &resolved};
    if (w->producer != NULL)
        calls[n++] =
            (struct db_call){.st = &st_producer, .params = producer_params, .out = &registered};
    n += lock_calls(key_params, &r, calls + n);
    enum db_status st = db_query_pipeline(c, calls, n, err);
    int current = st == DB_OK && PQntuples(resolved) == 1 &&
                  strtoll(PQgetvalue(resolved, 0, 0), NULL, 10) == hint;
    if (current)
        db_topic_from_row(resolved, 0, 0, t);
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
    if ((st == DB_OK && !current) || (st == DB_ERR_HARD && db_topic_missing(err))) {
        PQclear(r.locked);
        PQclear(r.inserted);
        PQclear(r.head);
        db_topic_hint_set(w->topic, 0);
        db_error_set(err, "", "topic %s is no longer id %" PRId64, w->topic, hint);
        return DB_ERR_REDO;
    }
    if (st != DB_OK)
        return st;
    w->verdict = DB_TOPIC_OK;
    return lock_outcome(c, key_params, &r, &w->before, locked, err);
}
