/* The connection pool's slots (see pool.h): a mutex-protected stack of free slots and a condition
 * variable on CLOCK_MONOTONIC for bounded waits, connecting outside the mutex, the idle check at
 * acquire, and the flush generation. Classifying failures is sqlstate.c's, log lines and libpq's
 * notices notice.c's, and the deadline thread watchdog.c's. */
#include "db/pool.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/pool_internal.h"

static void pool_notice(void *arg, const PGresult *res)
{
    struct db_pool *p = arg;
    db_log_notice(p->cfg.log, p->cfg.log_ctx, res);
}

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
    if (p->cfg.statement_cache <= 0)
        p->cfg.statement_cache = DB_STATEMENT_CACHE_DEFAULT;
    int caches_ok = 1;
    for (int i = 0; i < cfg->size; i++) {
        caches_ok &= (p->conns[i].stmts = db_stmt_cache_new(p->cfg.statement_cache)) != NULL;
        caches_ok &= (p->conns[i].seen =
                          db_stmt_cache_new(DB_STMT_SEEN_FACTOR * p->cfg.statement_cache)) != NULL;
    }
    if (!caches_ok) {
        for (int i = 0; i < cfg->size; i++) {
            db_stmt_cache_free(p->conns[i].stmts);
            db_stmt_cache_free(p->conns[i].seen);
        }
        free(p->conninfo);
        free(p->conns);
        free(p->free_stack);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    db_pool_cond_init(&p->cv);
    for (int i = 0; i < cfg->size; i++) {
        p->conns[i].pool = p;
        p->conns[i].watch_fd = -1;
        p->free_stack[p->nfree++] = cfg->size - 1 - i;
    }
    p->stats.size = cfg->size;
    if (cfg->deadline_ms > 0)
        db_watchdog_start(p);
    return p;
}

void db_conn_close(struct db_conn *c)
{
    if (c->pg != NULL) {
        PQfinish(c->pg);
        atomic_fetch_sub(&c->pool->connected, 1);
    }
    if (c->watch_fd >= 0) {
        pthread_mutex_lock(&c->pool->mu); /* the watchdog may be about to shut it down */
        close(c->watch_fd);
        c->watch_fd = -1;
        pthread_mutex_unlock(&c->pool->mu);
    }
    c->pg = NULL;
    atomic_store(&c->backend_pid, 0);
    c->broken = 0;
    atomic_store(&c->cut, 0);
    if (c->stmts != NULL)
        db_stmt_cache_clear(c->stmts);
    if (c->seen != NULL)
        db_stmt_cache_clear(c->seen);
    c->stmt_churn = 0;
    memset(c->rel_seen, 0, sizeof(c->rel_seen));
    c->rel_opened = 0;
}

void db_pool_destroy(struct db_pool *p)
{
    if (p == NULL)
        return;
    db_watchdog_stop(p);
    for (int i = 0; i < p->cfg.size; i++) {
        db_conn_close(&p->conns[i]);
        db_stmt_cache_free(p->conns[i].stmts);
        db_stmt_cache_free(p->conns[i].seen);
        free(p->conns[i].inl);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->free_stack);
    free(p->conns);
    free(p->conninfo);
    free(p);
}

/* Logs a connection opened: a reconnect at info with the server it reached, the first connect
 * of a slot at debug; and a database reachable again after failures. */
static void log_connected(struct db_pool *p, struct db_conn *c)
{
    const char *fields[] = {"host", PQhost(c->pg), DB_LOG_NUM("port"), PQport(c->pg), NULL};
    int was_unreachable = atomic_exchange(&p->unreachable, 0);
    if (was_unreachable)
        db_pool_log(p, DB_LOG_INFO, "database reachable again", fields);
    else
        db_pool_log(p, c->connected_before ? DB_LOG_INFO : DB_LOG_DEBUG,
                    c->connected_before ? "database reconnected" : "database connected", fields);
    c->connected_before = 1;
}

/* Why the server of pg takes no writes ("in_hot_standby": a standby,
 * "default_transaction_read_only": a primary set read-only), from what it reported (PostgreSQL 14
 * and later report both at connect and on every change; older servers are asked). NULL when it
 * takes writes. */
static const char *read_only_reason(PGconn *pg)
{
    static const char *const params[] = {"in_hot_standby", "default_transaction_read_only"};
    int reported = 0;
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        const char *v = PQparameterStatus(pg, params[i]);
        reported |= v != NULL;
        if (v != NULL && strcmp(v, "on") == 0)
            return params[i];
    }
    if (reported)
        return NULL;
    PGresult *res = PQexec(pg, "SHOW transaction_read_only");
    int ro = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
             strcmp(PQgetvalue(res, 0, 0), "on") == 0;
    PQclear(res);
    return ro ? "transaction_read_only" : NULL;
}

/* A connection to a server that takes no writes (a standby, a demoted primary, a primary set
 * read-only) is never lent: counted, logged once until a connection succeeds, and refused as
 * DB_ERR_UNAVAILABLE (a 503, so a client sends again; the next connect may reach the new
 * primary). */
static enum db_status refuse_read_only(struct db_pool *p, struct db_conn *c, struct db_error *err)
{
    const char *why = read_only_reason(c->pg);
    if (why == NULL)
        return DB_OK;
    db_error_set(err, "25006",
                 "the database server %s port %s is read-only (%s is on): connection closed",
                 PQhost(c->pg), PQport(c->pg), why);
    pthread_mutex_lock(&p->mu);
    p->stats.read_only++;
    pthread_mutex_unlock(&p->mu);
    if (!atomic_exchange(&p->unreachable, 1)) {
        const char *fields[] = {"detail", err->message, "setting", why, NULL};
        db_pool_log(p, DB_LOG_WARN, "database server is read-only", fields);
    }
    return DB_ERR_UNAVAILABLE;
}

/* Opens c's connection and sets its session parameters. Our TCP settings come before the
 * connection string, so that it may override them (later entries win). */
static enum db_status pool_connect(struct db_pool *p, struct db_conn *c, struct db_error *err)
{
    char timeout[DB_INT_TEXT], idle[DB_INT_TEXT], interval[DB_INT_TEXT], count[DB_INT_TEXT],
        user_timeout[DB_INT_TEXT];
    snprintf(timeout, sizeof(timeout), "%d", p->cfg.connect_timeout_s);
    snprintf(idle, sizeof(idle), "%d", DB_KEEPALIVES_IDLE_S);
    snprintf(interval, sizeof(interval), "%d", DB_KEEPALIVES_INTERVAL_S);
    snprintf(count, sizeof(count), "%d", DB_KEEPALIVES_COUNT);
    snprintf(user_timeout, sizeof(user_timeout), "%d", DB_TCP_USER_TIMEOUT_MS);
    /* target_session_attrs: a connection string naming several hosts (or one name that a
     * failover moves) reaches the writable one; a string may ask for another value */
    const char *keys[] = {"application_name",     "keepalives",
                          "keepalives_idle",      "keepalives_interval",
                          "keepalives_count",     "tcp_user_timeout",
                          "target_session_attrs", "dbname",
                          "connect_timeout",      NULL};
    const char *vals[] = {"rowlock",    "1",          idle,        interval, count,
                          user_timeout, "read-write", p->conninfo, timeout,  NULL};
    c->generation = atomic_load(&p->generation);
    c->pg = PQconnectdbParams(keys, vals, 1);
    if (c->pg != NULL)
        atomic_fetch_add(&p->connected, 1);
    if (c->pg == NULL || PQstatus(c->pg) != CONNECTION_OK) {
        const char *msg = c->pg ? PQerrorMessage(c->pg) : "out of memory";
        db_error_set(err, "08006", "%s", msg);
        if (!atomic_exchange(&p->unreachable, 1)) {
            const char *fields[] = {"detail", err->message, NULL};
            db_pool_log(p, DB_LOG_WARN, "database connection failed", fields);
        }
        db_conn_close(c);
        return DB_ERR_UNAVAILABLE;
    }
    PQsetNoticeReceiver(c->pg, pool_notice, p);
    atomic_store(&c->backend_pid, PQbackendPID(c->pg));
    pthread_mutex_lock(&p->mu);
    c->watch_fd = dup(PQsocket(c->pg));
    pthread_mutex_unlock(&p->mu);
    /* no JIT: rowlock's statements are short, and the ones that read many rows (the queue gauges'
     * count over every job) spend longer compiling than the scan it would speed up, and would
     * compile again at every execution */
    char set[128];
    snprintf(
        set, sizeof(set),
        "SET statement_timeout = %d; SET lock_timeout = %d; SET TIME ZONE 'UTC'; SET jit = off",
        p->cfg.statement_timeout_ms, p->cfg.statement_timeout_ms);
    /* (PQexec, not db_exec: query.c calls the pool, never the other way; no BEGIN is pending) */
    PGresult *res = PQexec(c->pg, set);
    enum db_status st = db_result_ok(res) ? DB_OK : db_classify(c, res, err);
    PQclear(res);
    if (st == DB_OK)
        st = refuse_read_only(p, c, err);
    if (st != DB_OK) {
        db_conn_close(c);
        return st == DB_ERR_HARD ? DB_ERR_UNAVAILABLE : st;
    }
    log_connected(p, c);
    return DB_OK;
}

/* True when idle connection c may not be lent: libpq knows it is broken, it was opened before
 * the last flush, or its socket is readable. An idle connection has nothing to read: readable
 * means the server closed it (EOF) or sent a FATAL before closing, which is read here so that
 * the notice receiver logs it. */
static int idle_conn_stale(struct db_pool *p, struct db_conn *c)
{
    if (PQstatus(c->pg) != CONNECTION_OK || c->generation != atomic_load(&p->generation))
        return 1;
    if (PQparameterStatus(c->pg, "in_hot_standby") != NULL && read_only_reason(c->pg) != NULL) {
        /* the server reported it became read-only (default_transaction_read_only set) */
        pthread_mutex_lock(&p->mu);
        p->stats.read_only++;
        pthread_mutex_unlock(&p->mu);
        return 1;
    }
    struct pollfd pfd = {.fd = PQsocket(c->pg), .events = POLLIN};
    if (poll(&pfd, 1, 0) == 0)
        return 0;
    if (PQconsumeInput(c->pg))
        PQisBusy(c->pg); /* parses what came: a FATAL goes to the notice receiver */
    pthread_mutex_lock(&p->mu);
    p->stats.stale++;
    pthread_mutex_unlock(&p->mu);
    db_pool_flush(c, "an idle connection was closed by the server");
    return 1;
}

/* Takes a free slot, waiting up to the acquire timeout. NULL after a timeout (err set). */
static struct db_conn *take_slot(struct db_pool *p, struct db_error *err)
{
    struct timespec deadline;
    db_clock_after_ms(&deadline, p->cfg.acquire_timeout_ms);
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
            return NULL;
        }
    }
    struct db_conn *c = &p->conns[p->free_stack[--p->nfree]];
    p->stats.in_use++;
    c->busy_since_ms = (long long)db_clock_now_ms();
    pthread_mutex_unlock(&p->mu);
    return c;
}

enum db_status db_pool_acquire(struct db_pool *p, struct db_conn **out, struct db_error *err)
{
    *out = NULL;
    struct db_conn *c = take_slot(p, err);
    if (c == NULL)
        return DB_ERR_POOL_TIMEOUT;
    if (c->pg != NULL && idle_conn_stale(p, c))
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
    pthread_mutex_lock(&p->mu); /* from here the watchdog leaves c alone */
    c->busy_since_ms = 0;
    pthread_mutex_unlock(&p->mu);
    /* one budget for both (db/conn.h): a statement churned weighs as much as the sequences of
     * DB_REL_RETIRE_FACTOR / DB_STMT_RETIRE_FACTOR topics */
    int retire = c->stmt_churn * (DB_REL_RETIRE_FACTOR / DB_STMT_RETIRE_FACTOR) + c->rel_opened >=
                 DB_REL_RETIRE_FACTOR * p->cfg.statement_cache;
    if (c->pg != NULL && retire) {
        pthread_mutex_lock(&p->mu);
        p->stats.retired++;
        pthread_mutex_unlock(&p->mu);
    }
    if (c->pg != NULL &&
        (retire || c->broken || atomic_load(&c->cut) || PQstatus(c->pg) != CONNECTION_OK ||
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

void db_pool_flush(struct db_conn *c, const char *why)
{
    struct db_pool *p = c->pool;
    unsigned gen = c->generation;
    if (!atomic_compare_exchange_strong(&p->generation, &gen, gen + 1))
        return; /* already flushed since c connected */
    char idle[DB_INT_TEXT];
    pthread_mutex_lock(&p->mu);
    p->stats.flushes++;
    snprintf(idle, sizeof(idle), "%d", p->nfree);
    pthread_mutex_unlock(&p->mu);
    const char *fields[] = {"reason", why, DB_LOG_NUM("idle_connections"), idle, NULL};
    db_pool_log(p, DB_LOG_WARN, "database connection pool flushed", fields);
}

void db_conn_lift_deadline(struct db_conn *c)
{
    pthread_mutex_lock(&c->pool->mu);
    c->busy_since_ms = 0; /* the watchdog skips it, as it does a free one */
    pthread_mutex_unlock(&c->pool->mu);
}

int db_conn_was_cut(struct db_conn *c)
{
    return atomic_load(&c->cut);
}

int db_pool_deadline_ms(struct db_pool *p)
{
    return p->cfg.deadline_ms;
}

PGconn *db_conn_pg(struct db_conn *c)
{
    return c->pg;
}

void db_conn_statement_evicted(struct db_conn *c)
{
    atomic_fetch_add(&c->pool->evictions, 1);
}

void db_conn_statement_churned(struct db_conn *c)
{
    c->stmt_churn++;
}

void db_conn_relation_opened(struct db_conn *c, int64_t id)
{
    uint64_t h = (uint64_t)id * 0x9E3779B97F4A7C15u; /* Fibonacci hashing: ids are dense */
    uint32_t bit = (uint32_t)(h >> 48) % DB_REL_SEEN_BITS;
    uint64_t mask = (uint64_t)1 << (bit % 64);
    if ((c->rel_seen[bit / 64] & mask) == 0) {
        c->rel_seen[bit / 64] |= mask;
        c->rel_opened++;
    }
}

int db_conn_statements(struct db_conn *c)
{
    return db_stmt_cache_count(c->stmts);
}

int db_pool_has_backend(struct db_pool *p, int pid)
{
    if (p == NULL || pid == 0)
        return 0;
    for (int i = 0; i < p->cfg.size; i++)
        if (atomic_load(&p->conns[i].backend_pid) == pid)
            return 1;
    return 0;
}

void db_pool_get_stats(struct db_pool *p, struct db_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    out->connected = atomic_load(&p->connected);
    out->statement_evictions = atomic_load(&p->evictions);
    out->statement_cache = p->cfg.statement_cache;
    pthread_mutex_unlock(&p->mu);
}
