/* Per-key gates (see gate.h): counters in hashed slots, guarded by striped mutexes. A refused
 * request waits as a long-poll does, on its slot's wake channel; whoever leaves wakes one. */
#include "routes/gate.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
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

/* The wake channel of a slot. */
static void channel_of(unsigned slot, char *out, size_t size)
{
    snprintf(out, size, "gate:%u", slot);
}

int svc_gate_req_enter(struct svc_request *req, struct svc_gate *g, const char *a, const char *b,
                       double max_wait_s, unsigned *slot, enum svc_outcome *out)
{
    *slot = svc_gate_slot(a, b);
    int retry = svc_req_resumes(req) > 0; /* it has been refused before, and waited */
    if (svc_gate_try_enter(g, *slot, 0, retry))
        return 1;
    /* The second try, after reading the wake generation, catches a place freed in between; a
     * place freed later wakes the wait at once. */
    struct svc_poll poll = svc_poll_begin(req, max_wait_s);
    if (svc_gate_try_enter(g, *slot, !svc_poll_may_wait(req, &poll), 1))
        return 1;
    char channel[SVC_CHANNEL_MAX];
    channel_of(*slot, channel, sizeof(channel));
    *out = svc_poll_wait(req, &poll, channel);
    return 0;
}

void svc_gate_req_exit(struct svc_request *req, struct svc_gate *g, unsigned slot)
{
    if (!svc_gate_exit(g, slot))
        return;
    char channel[SVC_CHANNEL_MAX];
    channel_of(slot, channel, sizeof(channel));
    svc_req_wake_n(req, channel, 1);
}
