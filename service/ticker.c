/* The ticker: a thread that every TICK_MS resumes the long-polls due (at their deadline, or at
 * their re-check, which finds writes made by other processes) and every DEADLINE_SCAN_S closes
 * the connections whose request did not arrive whole in time (service/conn.c). */
#include <stdio.h>

#include "service/clock.h"
#include "service/conn.h"
#include "service/http_internal.h"
#include "service/log.h"

#define TICK_MS         20
#define DEADLINE_SCAN_S 0.25

/* Shuts down the connections whose request has not arrived whole by its deadline. */
static void deadline_scan(struct svc_server *s, double now)
{
    int cut = svc_conns_cut_late(s->conns, now);
    if (cut > 0) {
        char n[16];
        snprintf(n, sizeof(n), "%d", cut);
        svc_log(SVC_LOG_WARN, "requests did not arrive whole in time; connections closed",
                SVC_NUM("connections"), n, NULL);
    }
}

/* One tick. At most a quarter of the workers' worth of re-checks per tick, so that a thousand
 * waiters cannot crowd the pool: under many waiters each re-checks less often. */
static void tick(struct svc_server *s)
{
    double now = svc_now();
    svc_waiters_resume_due(s, now, s->workers.n / 4 > 0 ? s->workers.n / 4 : 1);
    if (now >= s->ticker.next_deadline_scan) {
        s->ticker.next_deadline_scan = now + DEADLINE_SCAN_S;
        deadline_scan(s, now);
    }
}

static void *ticker_main(void *arg)
{
    struct svc_server *s = arg;
    struct svc_ticker *t = &s->ticker;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec due = svc_clock_after_ms(CLOCK_REALTIME, TICK_MS);
        pthread_cond_timedwait(&t->cv, &t->mu, &due);
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->mu);
        tick(s);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int svc_ticker_start(struct svc_server *s)
{
    struct svc_ticker *t = &s->ticker;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->started = pthread_create(&t->thread, NULL, ticker_main, s) == 0;
    return t->started ? 0 : -1;
}

void svc_ticker_stop(struct svc_server *s)
{
    struct svc_ticker *t = &s->ticker;
    pthread_mutex_lock(&t->mu);
    t->stop = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (t->started)
        pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}
