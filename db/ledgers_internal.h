/* What db/ledgers.c (ingestion and reads) and db/ledger_upkeep.c (janitor and gauges) share;
 * nothing outside those two files includes it. */
#ifndef DB_LEDGERS_INTERNAL_H
#define DB_LEDGERS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"

/* A timestamp column as the API shows it: UTC, microseconds, "Z". */
#define DB_LEDGER_TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

/* Writes v in decimal into buf. */
void db_ledger_i64(char *buf, size_t size, int64_t v);
/* Copies src into dst (size bytes), cut to fit, always terminated. */
void db_ledger_copy(char *dst, size_t size, const char *src);
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
