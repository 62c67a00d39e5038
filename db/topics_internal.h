/* What db/topics.c (the workflows) and db/topic_handles.c (the handles) share; nothing outside
 * those two files includes it. */
#ifndef DB_TOPICS_INTERNAL_H
#define DB_TOPICS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "db/topics.h"
#include "db/sql.h"

#define TOPIC_COLUMNS                                                                              \
    "id, name, headless_ttl_seconds, coalesce(retention_seconds, 0), "                             \
    "default_schema_version, " DB_TS("created_at") ", " DB_TS(                                     \
        "updated_at") ", "                                                                         \
                      "retention_ignores_consumers"
#define TOPIC_NCOLUMNS 8

/* The name of topic's offset sequence, rowlock.topic_offsets_<id> (its one relation of its
 * own; the log and heads are the shared rowlock.topic_messages and rowlock.topic_heads), as the
 * text of a regclass parameter. */
void db_topic_sequence(int64_t topic, char *out, size_t size);
/* True when err says the topic is gone (deleted meanwhile): its sequence is missing, or a row
 * written for it failed its foreign key. */
int db_topic_missing(const struct db_error *err);
/* The setting that carries a read's page budget (bytes of values) to its statement, which
 * reads it with DB_TOPIC_BUDGET_SQL: set for the transaction by db_topic_resolve_paged. */
#define DB_TOPIC_PAGE_BUDGET "rowlock.page_budget"
#define DB_TOPIC_BUDGET_SQL                                                                        \
    "coalesce(nullif(current_setting('" DB_TOPIC_PAGE_BUDGET "', true), '')::bigint, "             \
    "9223372036854775807)"

/* db_topic_resolve (topics.h), with the page budget of the transaction's reads set in the same
 * round trip. */
enum db_status db_topic_resolve_paged(struct db_conn *c, const char *name, size_t budget,
                                      struct db_topic *out, int *found, struct db_error *err);
/* Fills t from TOPIC_COLUMNS starting at column col of row. */
void db_topic_from_row(const PGresult *r, int row, int col, struct db_topic *t);

/* Topic ids by name, as hints (see db/topic_handles.c): the hinted id of name or 0; remember
 * id for name (0 forgets it). */
int64_t db_topic_hint_get(const char *name);
void db_topic_hint_set(const char *name, int64_t id);
/* A head write's first round trip with a hinted topic id: the topic lookup, the producer lookup
 * and the key's locked read together. Fills *t and *p, w->verdict and w->before; *locked 0 means
 * the insert lost a race and the caller goes on with db_key_lock_head. A producer that is not
 * registered answers DB_ABORTED (verdict PRODUCER_NOT_FOUND: roll back the lock); a stale hint
 * is dropped and answered DB_ERR_REDO. */
enum db_status db_topic_lock_hinted(struct db_conn *c, struct db_head_write *w, int64_t hint,
                                    struct db_topic *t, struct db_producer *p, int *locked,
                                    struct db_error *err);

#endif
