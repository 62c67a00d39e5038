/* struct db_pool, for the two files that make up the pool: pool.c (slots, connecting, lending)
 * and watchdog.c (the thread that cuts a connection lent past the deadline), with the clock
 * and log helpers they share. Nothing else in db/ sees inside a pool. */
#ifndef DB_POOL_INTERNAL_H
#define DB_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "db/clock.h"

#include "db/conn.h"

struct db_pool {
    struct db_pool_config cfg;
    char *conninfo;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct db_conn *conns;
    int *free_stack;
    int nfree;
    struct db_pool_stats stats;
    atomic_int connected;
    atomic_uint generation;  /* bumped by a flush; older idle connections are closed */
    atomic_int unreachable;  /* the last connect attempt failed (logged once until one succeeds) */
    atomic_ullong evictions; /* prepared statements DEALLOCATEd to make room (db/stmt_cache.h) */
    /* the watchdog (watchdog.c) */
    pthread_t watchdog;
    int watching, stopping;
    pthread_cond_t stop_cv;
};

/* Initialises cv to wait on CLOCK_MONOTONIC. */
static inline void db_pool_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* Writes a line through the pool's log function (db/notice.h). */
static inline void db_pool_log(struct db_pool *p, enum db_log_level level, const char *msg,
                               const char *const *fields)
{
    db_log_line(p->cfg.log, p->cfg.log_ctx, level, msg, fields);
}

/* watchdog.c: starts the deadline thread of p (cfg.deadline_ms above 0); p->watching says
 * whether it runs. */
void db_watchdog_start(struct db_pool *p);
/* watchdog.c: stops the deadline thread and waits for it to end; nothing when none runs. */
void db_watchdog_stop(struct db_pool *p);

#endif
