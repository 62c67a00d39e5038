/* The janitor thread (see janitor.h): a condition variable on CLOCK_MONOTONIC paces the passes
 * and wakes the thread at once on stop. */
#include "service/janitor.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "service/clock.h"
#include "service/log.h"

struct svc_janitor {
    const char *name;
    long interval_ms;
    svc_janitor_pass pass;
    void *ctx;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
};

static void *janitor_main(void *arg)
{
    struct svc_janitor *j = arg;
    pthread_mutex_lock(&j->mu);
    while (!j->stop) {
        struct timespec ts = svc_clock_after_ms(CLOCK_MONOTONIC, j->interval_ms);
        while (!j->stop && pthread_cond_timedwait(&j->cv, &j->mu, &ts) == 0)
            ;
        if (j->stop)
            break;
        pthread_mutex_unlock(&j->mu);
        j->pass(j->ctx);
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

struct svc_janitor *svc_janitor_start(const char *name, long interval_ms, svc_janitor_pass pass,
                                      void *ctx)
{
    struct svc_janitor *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->name = name;
    j->interval_ms = interval_ms;
    j->pass = pass;
    j->ctx = ctx;
    pthread_mutex_init(&j->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&j->thread, NULL, janitor_main, j) != 0) {
        svc_log(SVC_LOG_ERROR, "cannot start the janitor", "janitor", name, NULL);
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        free(j);
        return NULL;
    }
    return j;
}

void svc_janitor_stop(struct svc_janitor *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = 1;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
