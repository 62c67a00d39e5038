/* Worker slots for the tests that churn a leased queue with workers that die and are replaced
 * (test_queue_claim_exclusive, test_many_processes): each slot runs lives one after another,
 * each life a thread under a new owner id and random seed. A life that dies sets dead and
 * returns; the test's supervisor reaps it and starts the next. A test embeds the slot as the
 * first member of its own worker (its HTTP client beside it). */
#ifndef TESTS_WORKER_SLOTS_H
#define TESTS_WORKER_SLOTS_H

#include <pthread.h>
#include <stdatomic.h>

struct worker_slot {
    pthread_t thread;
    int slot, life, running; /* running: a thread of this life was started */
    atomic_int dead;         /* set by the life that dies */
    char owner[32];          /* "wNN-lifeL" */
    unsigned seed;           /* for rand_r, from slot and life */
};

/* Starts the slot's next life: a new owner and seed, a thread running main(arg). */
void worker_slot_start(struct worker_slot *w, void *(*main)(void *), void *arg);
/* When the slot's life died, joins its thread and returns 1 (the caller renews what the life
 * used and starts the next); else 0. */
int worker_slot_reap(struct worker_slot *w);

#endif
