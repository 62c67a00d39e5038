/* Per-key gates (see gate.h): counters in hashed slots, guarded by striped mutexes. Waiting is
 * the caller's: a full slot answers 0, and whoever leaves wakes a waiter of its own. */
#include "service/gate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define GATE_SLOTS   4096
#define GATE_STRIPES 64

struct svc_gate {
    int limit;
    pthread_mutex_t stripes[GATE_STRIPES];
    int holders[GATE_SLOTS];
    int waiting[GATE_SLOTS]; /* requests refused and not yet back in (a hint: see gate.h) */
};

struct svc_gate *svc_gate_new(int limit)
{
    struct svc_gate *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->limit = limit;
    for (int i = 0; i < GATE_STRIPES; i++)
        pthread_mutex_init(&g->stripes[i], NULL);
    return g;
}

void svc_gate_free(struct svc_gate *g)
{
    if (g == NULL)
        return;
    for (int i = 0; i < GATE_STRIPES; i++)
        pthread_mutex_destroy(&g->stripes[i]);
    free(g);
}

/* FNV-1a over a, a separator and b. */
unsigned svc_gate_slot(const char *a, const char *b)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        h = (h ^ *p) * 16777619u;
    h = (h ^ 0x1f) * 16777619u;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % GATE_SLOTS;
}

int svc_gate_try_enter(struct svc_gate *g, unsigned slot, int force, int retry)
{
    if (g == NULL)
        return 1;
    pthread_mutex_t *mu = &g->stripes[slot % GATE_STRIPES];
    pthread_mutex_lock(mu);
    int in = force || g->limit <= 0 || g->holders[slot] < g->limit;
    if (in)
        g->holders[slot]++;
    if (in && retry && g->waiting[slot] > 0)
        g->waiting[slot]--;
    else if (!in && !retry)
        g->waiting[slot]++;
    pthread_mutex_unlock(mu);
    return in;
}

int svc_gate_exit(struct svc_gate *g, unsigned slot)
{
    if (g == NULL)
        return 0;
    pthread_mutex_t *mu = &g->stripes[slot % GATE_STRIPES];
    pthread_mutex_lock(mu);
    g->holders[slot]--;
    int waiting = g->waiting[slot] > 0;
    pthread_mutex_unlock(mu);
    return waiting;
}
