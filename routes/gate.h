/* Per-key gates: at most `limit` holders of one key at once in this process. Head writes pass
 * through one, so that at most that many requests of a process wait on a key's row lock in
 * PostgreSQL; the others suspend their connection (like a long-poll: no thread, no pool
 * connection) until a holder leaves, instead of taking a place in the lock's queue, where every
 * waiter makes each handover slower. Keys are told apart by a hash: two keys that share a slot
 * share its limit (a slower key, never a wrong one). Correctness never rests on a gate: the row
 * lock decides. */
#ifndef ROUTES_GATE_H
#define ROUTES_GATE_H

#include "service/http.h"

struct svc_gate;

/* A gate letting limit holders of a key in at once; limit 0 lets everyone in. NULL when out of
 * memory. */
struct svc_gate *svc_gate_new(int limit);
void svc_gate_free(struct svc_gate *g);
/* The slot of key (a, b). */
unsigned svc_gate_slot(const char *a, const char *b);
/* Takes a place in slot: 1, or 0 when the slot is full (force takes one anyway: for a waiter
 * out of time). retry says the caller was refused before (and has been waiting since): the slot
 * counts its refused callers until they are back in. A NULL gate lets everyone in. */
int svc_gate_try_enter(struct svc_gate *g, unsigned slot, int force, int retry);
/* Gives the place back; 1 when refused callers may be waiting for it (a hint: one that gave up
 * without coming back still counts, which costs a wake and nothing else). */
int svc_gate_exit(struct svc_gate *g, unsigned slot);

/* For a handler: takes a place for key (a, b) and returns 1 (*slot is the place, for
 * svc_gate_req_exit), or suspends req until a place frees and returns 0 (the handler returns
 * *out and runs again when woken). A request older than max_wait_s goes on regardless. */
int svc_gate_req_enter(struct svc_request *req, struct svc_gate *g, const char *a, const char *b,
                       double max_wait_s, unsigned *slot, enum svc_outcome *out);
/* Gives req's place back and wakes the oldest request waiting for it, if any. */
void svc_gate_req_exit(struct svc_request *req, struct svc_gate *g, unsigned slot);

#endif
