/* The ledgers family's own header: what routes/ledger_tx.c (parsing a transaction) gives
 * routes/ledgers.c. */
#ifndef ROUTES_LEDGERS_H
#define ROUTES_LEDGERS_H

#include <jansson.h>
#include <stddef.h>

#include "db/ledgers.h"
#include "service/family.h"

/* A transaction parsed from JSON; strings borrow from the JSON, data texts are owned. */
struct parsed_tx {
    struct db_ledger_tx tx;
    struct db_ledger_input *inputs;
    struct db_ledger_object *objects;
    struct db_ledger_display *displays;
    struct db_ledger_event *events;
    char **texts;
    size_t ntexts;
    int no_memory; /* the parse failed for want of memory, not because of the transaction */
};

void parsed_tx_free(struct parsed_tx *p);
/* Parses {digest, inputs, writes, deletes, displays, events} (the members allowed). 1 when
 * valid; else 0, with why saying what is wrong unless p->no_memory is set. */
int parse_tx(json_t *j, const char *const *allowed, struct parsed_tx *p, char *why, size_t size);

/* The members of a transaction; a submission also takes wait_seconds. */
extern const char *const tx_members[];
extern const char *const submit_members[];

/* The family (routes/families.c). */
extern const struct svc_family route_ledgers_family;

#endif
