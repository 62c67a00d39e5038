/* Consumer cursors of topics: a named consumer's committed position in a topic's log (the last
 * offset it processed, the same number as a log page's `next`), its lag behind the log's readable
 * end, and the compare-and-set that moves it. One transaction per workflow; the catalogue is
 * rowlock.topic_consumers and the SQL functions of migration 008. Knows no HTTP. */
#ifndef DB_TOPIC_CONSUMERS_H
#define DB_TOPIC_CONSUMERS_H

#include <stdint.h>

#include "db/db.h"
#include "db/pool.h"

/* A consumer as read, with its lag: lag_messages counts offsets between its offset and the
 * readable end (holes left by compaction or rollbacks count too), lag_seconds is the age of the
 * first message after its offset (0 when caught up). */
struct db_consumer {
    char name[DB_NAME_SIZE];
    int64_t offset;
    char created_at[DB_TIME_TEXT], committed_at[DB_TIME_TEXT];
    int64_t readable_end, lag_messages;
    double lag_seconds;
};

enum db_consumer_verdict {
    DB_CONSUMER_OK,              /* found (or unchanged by a put of an existing one) */
    DB_CONSUMER_CREATED,         /* a put created it */
    DB_CONSUMER_TOPIC_NOT_FOUND, /* no such topic */
    DB_CONSUMER_NOT_FOUND,       /* the topic has no such consumer */
    DB_CONSUMER_CONFLICT,        /* commit: not at the expected offset, or the offset is lower */
    DB_CONSUMER_BEYOND_END,      /* the offset is past the log's readable end */
};

enum db_consumer_start {
    DB_CONSUMER_START_BEGINNING, /* offset 0 */
    DB_CONSUMER_START_END,       /* the readable end now */
    DB_CONSUMER_START_OFFSET,    /* a given offset, at most the readable end */
};

/* Creates consumer name of topic at start (offset: for DB_CONSUMER_START_OFFSET), or leaves an
 * existing one as it is (verdict OK). out holds the consumer; for BEYOND_END, its readable_end
 * is the log's. */
enum db_status db_consumers_put(struct db_pool *pool, const char *topic, const char *name,
                                enum db_consumer_start start, int64_t offset,
                                struct db_consumer *out, enum db_consumer_verdict *verdict,
                                struct db_error *err);
enum db_status db_consumers_get(struct db_pool *pool, const char *topic, const char *name,
                                struct db_consumer *out, enum db_consumer_verdict *verdict,
                                struct db_error *err);
/* Consumers of topic with a name after `after` (NULL: from the start), in name order, at most
 * limit; each per consumer (borrowed for the call). */
typedef void (*db_consumer_each)(const struct db_consumer *c, void *ctx);
enum db_status db_consumers_list(struct db_pool *pool, const char *topic, const char *after,
                                 int limit, db_consumer_each each, void *ctx,
                                 enum db_consumer_verdict *verdict, struct db_error *err);
enum db_status db_consumers_delete(struct db_pool *pool, const char *topic, const char *name,
                                   enum db_consumer_verdict *verdict, struct db_error *err);

/* A commit: move to offset, only from expect when has_expect (compare-and-set). An offset lower
 * than the committed one is a CONFLICT in any case; the committed offset itself changes
 * nothing. On CONFLICT and BEYOND_END out holds the consumer as it is (nothing written). */
struct db_effects;
struct db_consumer_commit {
    int64_t offset;
    int has_expect;
    int64_t expect;
    /* NULL, or effects (db/effects.h) applied in the commit's transaction when it moves the
     * offset, and only then: a repeated commit, a no-op, applies none (fx->applied says); a
     * refused effect refuses the move too (fx->refused). */
    struct db_effects *fx;
};
enum db_status db_consumers_commit(struct db_pool *pool, const char *topic, const char *name,
                                   const struct db_consumer_commit *commit, struct db_consumer *out,
                                   enum db_consumer_verdict *verdict, struct db_error *err);

/* The committed offset of consumer name of topic topic_id, in the caller's transaction. *found
 * 0 when there is none. */
enum db_status db_consumer_offset(struct db_conn *c, int64_t topic_id, const char *name,
                                  int64_t *offset, int *found, struct db_error *err);

/* Lag of every consumer of every topic, for metrics: one statement for all; when it fails, topic
 * by topic, failed per topic that could not be read (a topic deleted meanwhile is neither).
 * DB_OK when the topics could be listed. */
typedef void (*db_consumer_lag_each)(const char *topic, const char *consumer, int64_t messages,
                                     double seconds, void *ctx);
typedef void (*db_consumer_lag_failed)(const char *topic, enum db_status st,
                                       const struct db_error *err, void *ctx);
enum db_status db_consumers_lag_all(struct db_pool *pool, db_consumer_lag_each each,
                                    db_consumer_lag_failed failed, void *ctx, struct db_error *err);

#endif
