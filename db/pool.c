/* Connection pool (see pool.h): a mutex-protected stack of free slots and a condition variable
 * on CLOCK_MONOTONIC for bounded waits. Connecting happens outside the mutex. */
#include "db/pool.h"

#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/internal.h"

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
};

struct db_pool *db_pool_create(const struct db_pool_config *cfg)
{
    struct db_pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return NULL;
    p->cfg = *cfg;
    p->conninfo = strdup(cfg->conninfo);
    p->conns = calloc((size_t)cfg->size, sizeof(*p->conns));
    p->free_stack = calloc((size_t)cfg->size, sizeof(int));
    if (p->conninfo == NULL || p->conns == NULL || p->free_stack == NULL) {
        free(p->conninfo);
        free(p->conns);
        free(p->free_stack);
        free(p);
        return NULL;
    }
    p->cfg.conninfo = p->conninfo;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < cfg->size; i++) {
        p->conns[i].pool = p;
        p->free_stack[p->nfree++] = cfg->size - 1 - i;
    }
    p->stats.size = cfg->size;
    return p;
}

void db_conn_close(struct db_conn *c)
{
    if (c->pg != NULL) {
        PQfinish(c->pg);
        atomic_fetch_sub(&c->pool->connected, 1);
    }
    c->pg = NULL;
    c->broken = 0;
    c->nprepared = 0;
    for (size_t i = 0; i < c->ndyn; i++)
        free(c->dyn_names[i]);
    c->ndyn = 0;
}

void db_pool_destroy(struct db_pool *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < p->cfg.size; i++) {
        db_conn_close(&p->conns[i]);
        free(p->conns[i].prepared);
        free(p->conns[i].dyn_names);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->free_stack);
    free(p->conns);
    free(p->conninfo);
    free(p);
}

/* Opens c's connection and sets its session parameters. */
static enum db_status pool_connect(struct db_pool *p, struct db_conn *c, struct db_error *err)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", p->cfg.connect_timeout_s);
    const char *keys[] = {"dbname",     "connect_timeout", "application_name",
                          "keepalives", "keepalives_idle", NULL};
    const char *vals[] = {p->conninfo, timeout, "rowlock", "1", "30", NULL};
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (c->pg != NULL)
        atomic_fetch_add(&p->connected, 1);
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
        const char *msg = c->pg ? PQerrorMessage(c->pg) : "out of memory";
        db_error_set(err, "08006", "%s", msg);
        db_conn_close(c);
        return DB_ERR_UNAVAILABLE;
    }
    char set[128];
    snprintf(set, sizeof(set),
             "SET statement_timeout = %d; SET lock_timeout = %d; SET TIME ZONE 'UTC'",
             p->cfg.statement_timeout_ms, p->cfg.statement_timeout_ms);
    enum db_status st = db_exec(c, set, err);
    if (st != DB_OK) {
        db_conn_close(c);
        return st == DB_ERR_HARD ? DB_ERR_UNAVAILABLE : st;
    }
    return DB_OK;
}

static void deadline_after_ms(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

enum db_status db_pool_acquire(struct db_pool *p, struct db_conn **out, struct db_error *err)
{
    *out = NULL;
    struct timespec deadline;
    deadline_after_ms(&deadline, p->cfg.acquire_timeout_ms);
    pthread_mutex_lock(&p->mu);
    p->stats.acquires++;
    if (p->nfree == 0)
        p->stats.waits++;
    while (p->nfree == 0) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &deadline) == ETIMEDOUT && p->nfree == 0) {
            p->stats.timeouts++;
            pthread_mutex_unlock(&p->mu);
            db_error_set(err, "", "no database connection came free within %d ms (pool size %d)",
                         p->cfg.acquire_timeout_ms, p->cfg.size);
            return DB_ERR_POOL_TIMEOUT;
        }
    }
    struct db_conn *c = &p->conns[p->free_stack[--p->nfree]];
    p->stats.in_use++;
    pthread_mutex_unlock(&p->mu);
    if (c->pg != NULL && PQstatus(c->pg) != CONNECTION_OK)
        db_conn_close(c);
    if (c->pg == NULL) {
        enum db_status st = pool_connect(p, c, err);
        pthread_mutex_lock(&p->mu);
        if (st == DB_OK)
            p->stats.connects++;
        else
            p->stats.connect_failures++;
        pthread_mutex_unlock(&p->mu);
        if (st != DB_OK) {
            db_pool_release(c);
            return st;
        }
    }
    *out = c;
    return DB_OK;
}

void db_pool_release(struct db_conn *c)
{
    if (c == NULL)
        return;
    struct db_pool *p = c->pool;
    if (c->pg != NULL && (c->broken || PQstatus(c->pg) != CONNECTION_OK ||
                          PQtransactionStatus(c->pg) != PQTRANS_IDLE))
        db_conn_close(c);
    pthread_mutex_lock(&p->mu);
    p->free_stack[p->nfree++] = (int)(c - p->conns);
    p->stats.in_use--;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void db_conn_mark_broken(struct db_conn *c)
{
    c->broken = 1;
}

PGconn *db_conn_pg(struct db_conn *c)
{
    return c->pg;
}

void db_pool_get_stats(struct db_pool *p, struct db_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    out->connected = atomic_load(&p->connected);
    pthread_mutex_unlock(&p->mu);
}
