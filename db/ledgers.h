/* Ledgers: versioned objects and display rows fed by two ingestion paths, optimistic single
 * transactions and checkpoint batches, applying every transaction's effects exactly once and
 * never moving an object or display backwards. Objects and displays are written by one
 * version-guarded upsert (a delete is a tombstone upsert); the execution-status row of each
 * transaction, locked before its effects are written, guards what is not idempotent (its record
 * and its events). JSON stays text here. */
#ifndef DB_LEDGERS_H
#define DB_LEDGERS_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/pool.h"

#define DB_LEDGER_CHECKPOINT_MAX 1000 /* transactions in one checkpoint */
#define DB_LEDGER_EFFECTS_MAX    1000 /* inputs, objects, displays or events of one transaction */
/* The largest checkpoint sequence, object or display version and event offset the API accepts:
 * 2^53 - 1, exact in every JSON reader and far enough below the end of bigint that no
 * arithmetic on them (a watermark's sequence + 1, a reader's after + 1) can overflow. */
#define DB_LEDGER_INT_MAX INT64_C(9007199254740991)

struct db_ledger {
    int64_t id;
    char name[DB_NAME_SIZE];
    int64_t tombstone_retention_seconds;
    int64_t horizon; /* checkpoints at or below it are refused; their tombstones may be purged */
    char created_at[DB_TIME_TEXT];
};

struct db_ledger_counts {
    int64_t objects, tombstones, transactions, events, checkpoints, watermark;
    int64_t pending; /* executed by the optimistic path, not yet carried by a checkpoint */
};

struct db_ledger_input {
    const char *object_id;
    int64_t version;
};

struct db_ledger_object {
    const char *object_id;
    int64_t version;
    int deleted;      /* a delete: type and data unused */
    const char *type; /* writes only */
    const char *data; /* JSON text, writes only */
};

struct db_ledger_display {
    const char *type;
    int64_t version;
    const char *data; /* JSON text */
};

struct db_ledger_event {
    const char *type;
    const char *data; /* JSON text */
};

struct db_ledger_tx {
    const char *digest;
    const struct db_ledger_input *inputs;
    size_t ninputs;
    const struct db_ledger_object *objects; /* writes and deletes */
    size_t nobjects;
    const struct db_ledger_display *displays;
    size_t ndisplays;
    const struct db_ledger_event *events;
    size_t nevents;
};

enum db_ledger_verdict {
    DB_L_OK,
    DB_L_APPLIED,      /* this call executed it */
    DB_L_REPLAY,       /* already executed (or the checkpoint already recorded): nothing changed */
    DB_L_NOT_FOUND,    /* no such ledger */
    DB_L_DEPS_PENDING, /* an input is not yet at its version */
    DB_L_SUPERSEDED,   /* an input is already past its version */
    DB_L_BELOW_HORIZON,
    DB_L_TX_NOT_FOUND,
    DB_L_OBJECT_NOT_FOUND,
    DB_L_OBJECT_DELETED,
    DB_L_DISPLAY_NOT_FOUND,
};

struct db_ledger_status {
    int executed;
    char path[16];      /* "optimistic" or "checkpoint" */
    int64_t checkpoint; /* the checkpoint that carried it, 0 while unknown */
    char executed_at[DB_TIME_TEXT];
};

enum db_status db_ledgers_put(struct db_pool *pool, const char *name, int64_t retention_seconds,
                              struct db_ledger *out, enum db_ledger_verdict *verdict,
                              struct db_error *err);
/* Deletes the ledger and drops its tables in one transaction (DB_L_NOT_FOUND: no such ledger). */
enum db_status db_ledgers_delete(struct db_pool *pool, const char *name,
                                 enum db_ledger_verdict *verdict, struct db_error *err);
enum db_status db_ledgers_get(struct db_pool *pool, const char *name, struct db_ledger *out,
                              struct db_ledger_counts *counts, enum db_ledger_verdict *verdict,
                              struct db_error *err);

/* Ledgers by name after `after` (NULL: from the start), at most limit (DB_LEDGER_LIST_MAX), each
 * with its counts, in one transaction (one snapshot); each is called per ledger after it. */
#define DB_LEDGER_LIST_MAX 1000
typedef void (*db_ledger_each)(const struct db_ledger *l, const struct db_ledger_counts *c,
                               void *ctx);
enum db_status db_ledgers_list(struct db_pool *pool, const char *after, int limit,
                               db_ledger_each each, void *ctx, struct db_error *err);

/* Optimistic ingestion, step 1 (a short read): already executed (DB_L_REPLAY with its status),
 * inputs not there yet (DB_L_DEPS_PENDING), past them (DB_L_SUPERSEDED), or DB_L_OK. */
enum db_status db_ledgers_check(struct db_pool *pool, const char *name,
                                const struct db_ledger_tx *tx, struct db_ledger_status *status,
                                enum db_ledger_verdict *verdict, struct db_error *err);
/* Optimistic ingestion, step 2: one short transaction with bounded lock waits (lock_timeout_ms):
 * lock the execution-status row, then apply and mark executed (DB_L_APPLIED) unless it already
 * was (DB_L_REPLAY). status gets the row as it ends. */
enum db_status db_ledgers_apply(struct db_pool *pool, const char *name,
                                const struct db_ledger_tx *tx, int lock_timeout_ms,
                                struct db_ledger_status *status, enum db_ledger_verdict *verdict,
                                struct db_error *err);
/* Checkpoint ingestion in one transaction: locks the status rows of all its transactions in
 * digest order, applies every object and display effect (re-applying is a no-op by the version
 * guard), records and events of those not yet executed, marks them, records the checkpoint.
 * DB_L_APPLIED with the counts in applied and skipped, DB_L_REPLAY for a recorded checkpoint, or
 * DB_L_BELOW_HORIZON. */
enum db_status db_ledgers_checkpoint(struct db_pool *pool, const char *name, int64_t sequence,
                                     const struct db_ledger_tx *txs, size_t n, size_t *applied,
                                     size_t *skipped, enum db_ledger_verdict *verdict,
                                     struct db_error *err);

enum db_status db_ledgers_tx_get(struct db_pool *pool, const char *name, const char *digest,
                                 struct db_ledger_status *out, enum db_ledger_verdict *verdict,
                                 struct db_error *err);

/* An object or display as read; text is owned (db_ledger_item_clear). */
struct db_ledger_item {
    int64_t version;
    int deleted;
    char *type, *data;
    char updated_at[DB_TIME_TEXT];
};
void db_ledger_item_clear(struct db_ledger_item *it);
enum db_status db_ledgers_object_get(struct db_pool *pool, const char *name, const char *id,
                                     struct db_ledger_item *out, enum db_ledger_verdict *verdict,
                                     struct db_error *err);
enum db_status db_ledgers_display_get(struct db_pool *pool, const char *name, const char *type,
                                      struct db_ledger_item *out, enum db_ledger_verdict *verdict,
                                      struct db_error *err);

struct db_ledger_event_row {
    int64_t offset;
    const char *digest, *type, *data, *created_at;
    int index;
};
/* Returns 0 to take e, nonzero to end the page before it. */
typedef int (*db_ledger_event_each)(const struct db_ledger_event_row *e, size_t data_len,
                                    void *ctx);
/* Gap-safe read of the event log (see db_gen_read_log), at most limit offsets and, past the
 * first event, at most budget bytes of event data (counted in PostgreSQL, so that no more than
 * budget plus one event ever leaves it). *next is the last offset read (after when none). */
enum db_status db_ledgers_events(struct db_pool *pool, const char *name, int64_t after, int limit,
                                 int64_t budget, db_ledger_event_each each, void *ctx,
                                 int64_t *next, enum db_ledger_verdict *verdict,
                                 struct db_error *err);

/* Janitor: raises each ledger's horizon to its newest contiguous checkpoint older than the
 * tombstone retention, then purges tombstones carried by checkpoints at or below it (at most
 * batch). Each ledger in its own transaction: one that fails is reported and the others go on.
 * each (may be NULL) gets every ledger's counts, or failed (NULL on success) with why. Returns
 * the status of listing the ledgers. */
typedef void (*db_ledger_janitor_each)(const char *ledger, int64_t horizon, int64_t purged,
                                       const struct db_error *failed, void *ctx);
enum db_status db_ledgers_janitor(struct db_pool *pool, int batch, db_ledger_janitor_each each,
                                  void *ctx, struct db_error *err);
/* The ledgers' upkeep (db/upkeep.h), which db_ledgers_janitor runs: named by the family's
 * descriptor. */
struct db_upkeep;
extern const struct db_upkeep db_ledgers_upkeep;

/* Gauges for metrics: watermark and tombstones of the first limit ledgers by name, in one round
 * trip; when that fails on a ledger's data, each ledger on its own, so that one failing ledger
 * (failed set, the gauges 0) costs only its own gauges. budget_ms above 0 cuts the one round trip
 * off after that long: DB_ERR_TIMEOUT, and no ledger on its own (each would take longer still).
 * Returns the status of reading the list of ledgers. */
typedef void (*db_ledger_gauge_each)(const char *ledger, int64_t watermark, int64_t tombstones,
                                     const struct db_error *failed, void *ctx);
enum db_status db_ledgers_gauges(struct db_pool *pool, int limit, int budget_ms,
                                 db_ledger_gauge_each each, void *ctx, struct db_error *err);

#endif
