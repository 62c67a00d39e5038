/* The deadline watchdog of a pool (see db_pool_config.deadline_ms): a thread that shuts down the
 * socket of every connection lent for longer than the deadline, so that the request blocked on
 * it fails instead of waiting on a server that does not answer. Lending and releasing are
 * pool.c's; what a cut connection reports is sqlstate.c's. */
#include <stdio.h>
#include <sys/socket.h>

#include "db/pool_internal.h"

/* Shuts down the socket of every connection lent for longer than the deadline, under the pool's
 * mutex (so the connection cannot be released and closed meanwhile). The blocked libpq call then
 * reads end-of-file and fails; nothing is cancelled on the server. Returns how many it cut. */
static int watchdog_pass(struct db_pool *p)
{
    long long now = (long long)db_clock_now_ms();
    int cut = 0;
    for (int i = 0; i < p->cfg.size; i++) {
        struct db_conn *c = &p->conns[i];
        if (c->busy_since_ms == 0 || now - c->busy_since_ms < p->cfg.deadline_ms ||
            c->watch_fd < 0 || atomic_load(&c->cut))
            continue;
        /* marked first: the worker woken by the shutdown must see a deadline cut, not a server
         * that went away (which would flush the pool and run the attempt again) */
        atomic_store(&c->cut, 1);
        shutdown(c->watch_fd, SHUT_RDWR);
        p->stats.deadlines++;
        cut++;
    }
    return cut;
}

static void *watchdog_main(void *arg)
{
    struct db_pool *p = arg;
    int tick = p->cfg.deadline_ms / 20;
    tick = tick < 5 ? 5 : tick > 100 ? 100 : tick;
    pthread_mutex_lock(&p->mu);
    while (!p->stopping) {
        struct timespec next;
        db_clock_after_ms(&next, tick);
        pthread_cond_timedwait(&p->stop_cv, &p->mu, &next);
        int cut = p->stopping ? 0 : watchdog_pass(p);
        if (cut > 0) {
            pthread_mutex_unlock(&p->mu);
            char n[DB_INT_TEXT], ms[DB_INT_TEXT];
            snprintf(n, sizeof(n), "%d", cut);
            snprintf(ms, sizeof(ms), "%d", p->cfg.deadline_ms);
            const char *fields[] = {DB_LOG_NUM("connections"), n, DB_LOG_NUM("deadline_ms"), ms,
                                    NULL};
            db_pool_log(p, DB_LOG_WARN,
                        "database deadline passed: connection closed (the server may still be "
                        "waiting, for example for a synchronous standby)",
                        fields);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

void db_watchdog_start(struct db_pool *p)
{
    db_pool_cond_init(&p->stop_cv);
    p->watching = pthread_create(&p->watchdog, NULL, watchdog_main, p) == 0;
    if (!p->watching)
        pthread_cond_destroy(&p->stop_cv);
}

void db_watchdog_stop(struct db_pool *p)
{
    if (!p->watching)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_signal(&p->stop_cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->watchdog, NULL);
    pthread_cond_destroy(&p->stop_cv);
    p->watching = 0;
}
