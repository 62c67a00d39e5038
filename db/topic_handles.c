/* The handles of compacted topics (see topics.h): the topic lookup, the key handle (plain and
 * locked reads of a key's head) and the producer handle (compacted produce), the statements they
 * run on a topic's generated tables, and the hinted lookup head writes send with the locked read.
 * The workflows composing them, and every other topic statement, are in db/topics.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

const struct db_gen_table db_topic_tables[] = {{'m', "messages_", ""},
                                               {'h', "compaction_head_", ""},
                                               {'s', "messages_", "_offset"},
                                               {0, 0, 0}};

enum db_status db_topic_query(struct db_conn *c, int64_t topic, const char *tag, const char *sql,
                              int nparams, const char *const *params, PGresult **out,
                              struct db_error *err)
{
    struct db_gen g = {'t', topic, db_topic_tables};
    return db_gen_query(c, &g, tag, sql, nparams, params, out, err);
}

/* ---- topic ids by name, as hints (db/hints.h) ----
 *
 * A head write that knows its topic's id sends the topic lookup and the key's locked read in
 * one round trip, and checks the lookup's answer before using anything it read. A topic's
 * tables exist exactly as long as its row, so when the lookup (in the same transaction) gives
 * the hinted id, every statement of the round trip ran on the right topic's tables; when it
 * does not (the topic was deleted, or recreated under a new id by any process), the
 * transaction is rolled back and run again without the hint. */

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
    char b[24];
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
    char id[24];
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
    const char *params[] = {k->key};
    enum db_status st =
        db_topic_query(c, k->topic->id, "head_read", sql_head_read, 1, params, &r, err);
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
        return db_topic_query(c, k->topic->id, "head_touch", sql_head_touch, 1, params, NULL, err);
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
    struct db_gen g = {'t', k->topic->id, db_topic_tables};
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
    char sv[16];
    snprintf(sv, sizeof(sv), "%d", p->schema_version);
    const char *params[] = {a_keys, a_vals, a_ranks, a_seqs, p->name, sv};
    st = db_topic_query(c, p->topic->id, "produce", sql_produce, 6, params, &r, err);
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
        const char *dparams[] = {p->name, a_seqs};
        st = db_topic_query(c, p->topic->id, "duplicates", sql_duplicates, 2, dparams, &r, err);
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
    struct db_gen g = {'t', hint, db_topic_tables};
    char id[24];
    db_i64(id, sizeof(id), hint);
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
    if ((st == DB_OK && !current) || (st == DB_ERR_HARD && db_gen_missing(err))) {
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
    struct db_key k;
    db_topic_key(t, w->key, &k);
    return lock_outcome(c, &k, key_param, &r, &w->before, locked, err);
}
