/* Per-key gates: at most `limit` holders of one key at once in this process; the others wait in
 * svc_gate_enter. Head writes pass through one, so that at most that many requests of a process
 * wait on a key's row lock in PostgreSQL: the rest queue here, holding neither a pool connection
 * nor a place in the lock's queue, where every waiter makes each handover slower. Keys are told
 * apart by a hash: two keys that share a slot share its limit (a slower key, never a wrong one).
 * Correctness never rests on a gate: the row lock decides. */
#ifndef SVC_GATE_H
#define SVC_GATE_H

struct svc_gate;

/* A gate letting limit holders of a key in at once; limit 0 lets everyone in. NULL when out of
 * memory. */
struct svc_gate *svc_gate_new(int limit);
void svc_gate_free(struct svc_gate *g);
/* Waits until key (a, b) has a free place and takes it; returns the ticket for svc_gate_exit.
 * *waited (may be NULL) is set to 1 when it had to wait. A NULL gate lets everyone in. */
unsigned svc_gate_enter(struct svc_gate *g, const char *a, const char *b, int *waited);
void svc_gate_exit(struct svc_gate *g, unsigned ticket);

#endif
