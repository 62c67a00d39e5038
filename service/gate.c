/* Per-key gates (see gate.h): counters in hashed slots, guarded by striped mutexes. */
#include "service/gate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define GATE_SLOTS   4096
#define GATE_STRIPES 64

struct stripe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

struct svc_gate {
    int limit;
    struct stripe stripes[GATE_STRIPES];
    int holders[GATE_SLOTS];
};

struct svc_gate *svc_gate_new(int limit)
{
    struct svc_gate *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->limit = limit;
    for (int i = 0; i < GATE_STRIPES; i++) {
        pthread_mutex_init(&g->stripes[i].mu, NULL);
        pthread_cond_init(&g->stripes[i].cv, NULL);
    }
    return g;
}

void svc_gate_free(struct svc_gate *g)
{
    if (g == NULL)
        return;
    for (int i = 0; i < GATE_STRIPES; i++) {
        pthread_mutex_destroy(&g->stripes[i].mu);
        pthread_cond_destroy(&g->stripes[i].cv);
    }
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
    struct stripe *s = &g->stripes[slot % GATE_STRIPES];
    int w = 0;
    pthread_mutex_lock(&s->mu);
    while (g->limit > 0 && g->holders[slot] >= g->limit) {
        w = 1;
        pthread_cond_wait(&s->cv, &s->mu);
    }
    g->holders[slot]++;
    pthread_mutex_unlock(&s->mu);
    if (waited != NULL)
        *waited = w;
    return slot;
}

void svc_gate_exit(struct svc_gate *g, unsigned ticket)
{
    if (g == NULL)
        return;
    struct stripe *s = &g->stripes[ticket % GATE_STRIPES];
    pthread_mutex_lock(&s->mu);
    g->holders[ticket]--;
    /* the stripe's waiters may wait for other slots: each re-checks its own */
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}
