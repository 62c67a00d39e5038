/* Per-key gates (see gate.h): counters in hashed slots, guarded by striped mutexes, each slot
 * with its own condition variable so that a holder leaving wakes one waiter of its own key
 * rather than every waiter of the stripe. */
#include "service/gate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define GATE_SLOTS   4096
#define GATE_STRIPES 64

struct svc_gate {
    int limit;
    pthread_mutex_t stripes[GATE_STRIPES];
    pthread_cond_t freed[GATE_SLOTS];
    int holders[GATE_SLOTS];
};

struct svc_gate *svc_gate_new(int limit)
{
    struct svc_gate *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->limit = limit;
    for (int i = 0; i < GATE_STRIPES; i++)
        pthread_mutex_init(&g->stripes[i], NULL);
    for (int i = 0; i < GATE_SLOTS; i++)
        pthread_cond_init(&g->freed[i], NULL);
    return g;
}

void svc_gate_free(struct svc_gate *g)
{
    if (g == NULL)
        return;
    for (int i = 0; i < GATE_STRIPES; i++)
        pthread_mutex_destroy(&g->stripes[i]);
    for (int i = 0; i < GATE_SLOTS; i++)
        pthread_cond_destroy(&g->freed[i]);
    free(g);
}

/* FNV-1a over a, a separator and b. */
static unsigned slot_of(const char *a, const char *b)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        h = (h ^ *p) * 16777619u;
    h = (h ^ 0x1f) * 16777619u;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % GATE_SLOTS;
}

unsigned svc_gate_enter(struct svc_gate *g, const char *a, const char *b, int *waited)
{
    if (waited != NULL)
        *waited = 0;
    unsigned slot = slot_of(a, b);
    if (g == NULL)
        return slot;
    pthread_mutex_t *mu = &g->stripes[slot % GATE_STRIPES];
    int w = 0;
    pthread_mutex_lock(mu);
    while (g->limit > 0 && g->holders[slot] >= g->limit) {
        w = 1;
        pthread_cond_wait(&g->freed[slot], mu);
    }
    g->holders[slot]++;
    pthread_mutex_unlock(mu);
    if (waited != NULL)
        *waited = w;
    return slot;
}

void svc_gate_exit(struct svc_gate *g, unsigned ticket)
{
    if (g == NULL)
        return;
    pthread_mutex_t *mu = &g->stripes[ticket % GATE_STRIPES];
    pthread_mutex_lock(mu);
    g->holders[ticket]--;
    pthread_cond_signal(&g->freed[ticket]); /* one place freed: one waiter of this slot */
    pthread_mutex_unlock(mu);
}
