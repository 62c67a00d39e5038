/* What db/ledgers.c (ingestion and reads) and db/ledger_upkeep.c (janitor and gauges) share;
 * nothing outside those two files includes it. */
#ifndef DB_LEDGERS_INTERNAL_H
#define DB_LEDGERS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/sql.h"

/* Runs template sql (identified by tag) on the generated tables of ledger: {o} objects,
 * {d} displays, {t} transactions, {e} events, {q} the event offsets, {c} checkpoints. out as
 * for db_query. */
enum db_status db_ledger_query(struct db_conn *c, int64_t ledger, const char *tag, const char *sql,
                               int nparams, const char *const *params, PGresult **out,
                               struct db_error *err);

/* Transactions of ledger executed by the optimistic path that no checkpoint has carried yet, in
 * *pending (one count over the ledger's transactions table). */
enum db_status db_ledger_pending(struct db_conn *c, int64_t ledger, int64_t *pending,
                                 struct db_error *err);

#endif
