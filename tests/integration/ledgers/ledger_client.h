/* The ledger tests' requests on th_svc (harness_svc.h), written once for the programs that feed
 * a ledger transactions and read back its log (test_ledger_races, test_ledger_concurrent_ingest,
 * test_ledger_random_history): building a transaction, creating a ledger, its counts, and a
 * walk over its whole event log. What a test sends and what it expects stay in the test. */
#ifndef TESTS_LEDGER_CLIENT_H
#define TESTS_LEDGER_CLIENT_H

#include <jansson.h>

#include "harness_svc.h"

/* One request on th_svc with body (borrowed, may be NULL) sent as JSON; r is the caller's to
 * free. Returns th_http's result; asserts nothing, so any thread may call it. */
int lc_call(const char *method, const char *path, const json_t *body, struct th_response *r);
/* PUT /ledgers/<l> with {} answers 201. */
void lc_ledger_create(const char *l);
/* GET /ledgers/<l>: its counts with its watermark added (the caller's). */
json_t *lc_ledger_counts(const char *l);

/* A transaction with no effects yet (the caller's); the lc_tx_* helpers add to it and return
 * it. */
json_t *lc_tx_new(const char *digest);
json_t *lc_tx_input(json_t *t, const char *id, json_int_t v);
/* n events of type "moved", each naming its transaction (digest) and index k. */
json_t *lc_tx_events(json_t *t, int n);

/* Calls fn(arg, event) for every event of the ledger's log in order (the event borrowed),
 * paging through GET /ledgers/<l>/events; each page must answer 200. */
void lc_events_each(const char *l, void (*fn)(void *arg, json_t *e), void *arg);
/* For lc_events_each: appends {index, type, data} of event e to the array by[e's digest] (by
 * is a json object, arg). */
void lc_events_by_digest(void *by, json_t *e);

#endif
