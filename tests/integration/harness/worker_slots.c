/* Worker slots (see worker_slots.h). */
#include "worker_slots.h"

#include <stdio.h>

void worker_slot_start(struct worker_slot *w, void *(*main)(void *), void *arg)
{
    w->life++;
    snprintf(w->owner, sizeof(w->owner), "w%02d-life%d", w->slot, w->life);
    w->seed = (unsigned)(w->slot * 7919 + w->life * 104729);
    atomic_store(&w->dead, 0);
    w->running = pthread_create(&w->thread, NULL, main, arg) == 0;
}

int worker_slot_reap(struct worker_slot *w)
{
    if (!w->running || !atomic_load(&w->dead))
        return 0;
    pthread_join(w->thread, NULL);
    return 1;
}
