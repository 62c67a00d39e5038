/* Compacted topics in the shape of the original design: a topic handle gives key handles and
 * producer handles; the key handle owns head reads (plain, and locked inside the caller's
 * transaction); the producer owns compacted produce inside a transaction. Workflows (one
 * transaction each, via db_tx_run) compose them for the REST routes. JSON stays text here:
 * parsing and merging it belong to routes/ and service/. */
#ifndef DB_TOPICS_H
#define DB_TOPICS_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/pool.h"

#define DB_TOPIC_BATCH_MAX    1000 /* messages in one produce */
#define DB_TOPIC_READ_MAX     1000 /* messages or keys in one read */
#define DB_TOPIC_HEADLESS_CAP 100000
/* Offsets are drawn from a bigint sequence: 1 .. DB_TOPIC_OFFSET_MAX. */
#define DB_TOPIC_OFFSET_MAX INT64_MAX

struct db_topic {
    int64_t id;
    char name[DB_NAME_SIZE];
    int64_t headless_ttl_seconds;
    int64_t retention_seconds; /* 0: keep the whole log */
    int default_schema_version;
    int retention_ignores_consumers; /* compaction may pass consumers' committed offsets */
    char created_at[DB_TIME_TEXT], updated_at[DB_TIME_TEXT];
};

struct db_key {
    const struct db_topic *topic;
    const char *key;
};

struct db_producer {
    const struct db_topic *topic;
    const char *name; /* NULL: the topic's default producer */
    int schema_version;
};

/* A head as read. value is the JSON text of the head message (owned; free with
 * db_head_clear), NULL for a tombstone. */
struct db_head {
    int has_head; /* a materialized head (the row may also be headless or absent) */
    int deleted;  /* the head is a tombstone */
    int64_t offset;
    int64_t rank;
    int schema_version;
    char *value;
};
void db_head_clear(struct db_head *h);

/* ---- handles (inside a caller's transaction) ---- */

/* Resolves a topic by name in the caller's transaction. *found is 0 when there is none. */
enum db_status db_topic_resolve(struct db_conn *c, const char *name, struct db_topic *out,
                                int *found, struct db_error *err);
void db_topic_key(const struct db_topic *t, const char *key, struct db_key *out);
/* Resolves a producer of t (name NULL: the default producer). *found 0 when not registered. */
enum db_status db_topic_producer(struct db_conn *c, const struct db_topic *t, const char *name,
                                 struct db_producer *out, int *found, struct db_error *err);

/* Plain read: no lock. has_head 0 for a key that is absent or headless. */
enum db_status db_key_read_head(struct db_conn *c, const struct db_key *k, struct db_head *out,
                                struct db_error *err);
/* Locked read: SELECT FOR UPDATE the key's row; when absent insert a headless row (ON CONFLICT
 * DO NOTHING) and loop after a lost race; a headless row found refreshes updated_at. On DB_OK
 * the row is locked until the caller's transaction ends; has_head says whether it has a head. */
enum db_status db_key_lock_head(struct db_conn *c, const struct db_key *k, struct db_head *out,
                                struct db_error *err);

struct db_message_in {
    const char *key;
    const char *value; /* JSON text; NULL for a tombstone */
    int has_rank;
    int64_t rank;
    int has_sequence;
    int64_t sequence;
};

enum db_head_effect { DB_HEAD_ADVANCED, DB_HEAD_RANK_REJECTED, DB_HEAD_DUPLICATE };

struct db_message_out {
    int64_t offset; /* for a duplicate: the offset of the original */
    enum db_head_effect effect;
    int64_t head_offset; /* the key's head after this produce */
};

/* Compacted produce of n messages in one statement: log rows and head upserts (a head moves
 * only to a higher rank; default rank: the offset). A sequence the producer already used writes
 * nothing and reports the original offset. out has n entries. */
enum db_status db_producer_produce(struct db_conn *c, const struct db_producer *p,
                                   const struct db_message_in *msgs, size_t n,
                                   struct db_message_out *out, struct db_error *err);

/* ---- workflows (one transaction each) ---- */

enum db_topic_verdict {
    DB_TOPIC_OK,
    DB_TOPIC_CREATED,
    DB_TOPIC_NOT_FOUND,
    DB_TOPIC_PRODUCER_NOT_FOUND,
    DB_TOPIC_PRECONDITION_FAILED,
    DB_TOPIC_UNCHANGED,
    DB_TOPIC_CONSUMER_NOT_FOUND, /* a log read named a consumer the topic does not have */
};

struct db_topic_config {
    int64_t headless_ttl_seconds;
    int64_t retention_seconds; /* 0: none */
    int default_schema_version;
    int retention_ignores_consumers;
};

struct db_topic_stats {
    int64_t messages, heads, headless_rows;
    double headless_oldest_age_seconds;
};

/* Creates (with its offset sequence, in the same transaction) or updates a topic. */
enum db_status db_topics_put(struct db_pool *pool, const char *name,
                             const struct db_topic_config *cfg, struct db_topic *out,
                             enum db_topic_verdict *verdict, struct db_error *err);
enum db_status db_topics_get(struct db_pool *pool, const char *name, struct db_topic *out,
                             struct db_topic_stats *stats, enum db_topic_verdict *verdict,
                             struct db_error *err);
/* Lists topics by name after `after` (NULL: from the start); callback per topic. */
typedef void (*db_topic_each)(const struct db_topic *t, const struct db_topic_stats *s, void *ctx);
enum db_status db_topics_list(struct db_pool *pool, const char *after, int limit,
                              db_topic_each each, void *ctx, struct db_error *err);
enum db_status db_topics_delete(struct db_pool *pool, const char *name,
                                enum db_topic_verdict *verdict, struct db_error *err);
enum db_status db_topics_producer_put(struct db_pool *pool, const char *topic, const char *name,
                                      int schema_version, enum db_topic_verdict *verdict,
                                      struct db_error *err);

/* db_topics_produce in the caller's transaction, which it never commits (verdict: the topic or
 * producer missing, or the topic deleted meanwhile: DB_ABORTED, the caller rolls back). */
enum db_status db_topics_produce_in(struct db_conn *c, const char *topic, const char *producer,
                                    const struct db_message_in *msgs, size_t n,
                                    struct db_message_out *out, enum db_topic_verdict *verdict,
                                    struct db_error *err);
/* Produce a batch through producer (NULL: default). */
enum db_status db_topics_produce(struct db_pool *pool, const char *topic, const char *producer,
                                 const struct db_message_in *msgs, size_t n,
                                 struct db_message_out *out, enum db_topic_verdict *verdict,
                                 struct db_error *err);

enum db_status db_topics_head_get(struct db_pool *pool, const char *topic, const char *key,
                                  struct db_head *out, enum db_topic_verdict *verdict,
                                  struct db_error *err);

/* A locked write: lock the key's head, then ask decide() what to produce. decide gets the
 * current head (has_head 0 when none) and returns 0 with *value set (malloc'd JSON text, or
 * NULL for a tombstone) to produce, 1 to produce nothing (the lock still commits), or -1 to
 * fail (the transaction rolls back; DB_ABORTED). */
typedef int (*db_head_decide)(const struct db_head *current, char **value, void *ctx);

struct db_head_write {
    const char *topic, *key, *producer;
    db_head_decide decide;
    void *ctx;
    /* results */
    enum db_topic_verdict verdict; /* OK (produced), UNCHANGED, NOT_FOUND, PRODUCER_NOT_FOUND */
    struct db_head before;         /* the head found under the lock */
    struct db_message_out produced;
};
enum db_status db_topics_head_write(struct db_pool *pool, struct db_head_write *w,
                                    struct db_error *err);

/* Reads (DB_TOPIC_READ_MAX items at most) also stop at a budget of value bytes: an item comes
 * while the bytes of the values up to it (JSON text as PostgreSQL sends it) stay within the
 * budget, and the first item always comes (a larger one alone). The cut is made in the statement,
 * so no more than the budget plus one value is ever read from the database. Values are borrowed
 * for the callback only. A callback returning non-zero stops the page before that item. */
struct db_log_message {
    int64_t offset;
    const char *key, *value, *producer, *created_at; /* value NULL: tombstone */
    size_t value_len;
    int64_t rank;
    int schema_version;
};
typedef int (*db_log_each)(const struct db_log_message *m, void *ctx);
/* Gap-safe read of up to limit messages (and budget bytes) after offset `after` (at most
 * DB_TOPIC_OFFSET_MAX - 1), in offset order. Stops before the first offset that a transaction
 * still in progress may yet commit; an offset whose transaction is gone is recorded as a hole and
 * skipped. *next is the offset to pass as `after` next time. */
enum db_status db_topics_read_log(struct db_pool *pool, const char *topic, int64_t after, int limit,
                                  size_t budget, db_log_each each, void *ctx, int64_t *next,
                                  enum db_topic_verdict *verdict, struct db_error *err);
/* The same read after the committed offset of consumer (read in the same transaction; *after is
 * set to it, and *next starts there). Verdict CONSUMER_NOT_FOUND when the topic has none. */
enum db_status db_topics_read_consumer_log(struct db_pool *pool, const char *topic,
                                           const char *consumer, int limit, size_t budget,
                                           db_log_each each, void *ctx, int64_t *after,
                                           int64_t *next, enum db_topic_verdict *verdict,
                                           struct db_error *err);

/* Offsets of the log one history read examines at most (see db_topics_key_history). */
#define DB_TOPIC_HISTORY_WINDOW 10000
/* A key's messages (tombstones too, as value NULL), newest first, among the offsets in
 * [before - DB_TOPIC_HISTORY_WINDOW, before) (before 0: past the end of the log), read backwards
 * through the log's primary key: at most limit messages and budget bytes as db_topics_read_log,
 * and never more than the window's offsets examined, however rare the key (the log has no index
 * by key). *next is the offset to pass as before for older messages: the oldest one given when
 * the page was cut, else the window's start; 0 when the log's start was reached. A page may hold
 * fewer than limit messages, or none, with *next not 0. */
enum db_status db_topics_key_history(struct db_pool *pool, const char *topic, const char *key,
                                     int64_t before, int limit, size_t budget, db_log_each each,
                                     void *ctx, int64_t *next, enum db_topic_verdict *verdict,
                                     struct db_error *err);

struct db_key_entry {
    const char *key, *value, *updated_at;
    size_t value_len;
    int64_t offset, rank;
    int schema_version;
};
typedef int (*db_key_each)(const struct db_key_entry *k, void *ctx);
/* Materialized, live heads with key > after (NULL: from the start), in key order, up to limit
 * and budget bytes. *more is 1 when heads may follow the last one given. */
enum db_status db_topics_list_keys(struct db_pool *pool, const char *topic, const char *after,
                                   int limit, size_t budget, db_key_each each, void *ctx, int *more,
                                   enum db_topic_verdict *verdict, struct db_error *err);

/* A topic whose work of a metrics or janitor pass failed (st, err): the pass went on with the
 * others. */
typedef void (*db_topic_failed)(const char *topic, enum db_status st, const struct db_error *err,
                                void *ctx);

/* Headless counts of the first limit topics by name, for metrics: each per topic read (with the
 * topic's headless TTL, the age the janitor lets a headless row reach), failed per topic that could
 * not be (a topic deleted meanwhile is neither). DB_OK when the topics could be listed. */
typedef void (*db_headless_each)(const char *topic, int64_t rows, double oldest_age_s,
                                 int64_t ttl_s, void *ctx);
enum db_status db_topics_headless(struct db_pool *pool, int limit, db_headless_each each,
                                  db_topic_failed failed, void *ctx, struct db_error *err);

/* Janitor pass: for every topic, deletes headless rows older than its TTL (at most batch per
 * topic, through the partial index, skipping rows locked by anyone: FOR UPDATE SKIP LOCKED), and
 * compacts superseded messages older than the topic's retention into holes, never past the
 * lowest offset a consumer committed (unless the topic's retention_ignores_consumers). One
 * transaction per topic; safe in many processes at once. each gets the counts of every topic
 * cleaned, failed every topic that could not be (the pass goes on). DB_OK when the topics could be
 * listed. */
typedef void (*db_janitor_each)(const char *topic, int64_t headless_deleted, int64_t compacted,
                                void *ctx);
enum db_status db_topics_janitor(struct db_pool *pool, int batch, db_janitor_each each,
                                 db_topic_failed failed, void *ctx, struct db_error *err);
/* The topics' upkeep (db/upkeep.h), which db_topics_janitor runs: named by the family's
 * descriptor. */
struct db_upkeep;
extern const struct db_upkeep db_topics_upkeep;

#endif
