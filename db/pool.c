/* Connection pool (see pool.h): a mutex-protected stack of free slots and a condition variable
 * on CLOCK_MONOTONIC for bounded waits. Connecting happens outside the mutex. Also the idle
 * check at acquire, the flush generation, the deadline watchdog thread, and the notice receiver
 * that sends libpq's notices to the log function instead of stderr. */
#include "db/pool.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

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
    /* the watchdog */
    pthread_t watchdog;
    int watching, stopping;
    pthread_cond_t stop_cv;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Writes one line through log, or to stderr without one. fields: key, value pairs ended by a
 * NULL key (at most DB_LOG_FIELDS pairs). */
static void log_to(db_log_fn log, void *ctx, enum db_log_level level, const char *msg,
                   const char *const *fields)
{
    if (log != NULL) {
        log(ctx, level, msg, fields);
        return;
    }
    if (level == DB_LOG_DEBUG)
        return;
    char line[1024];
    int n = snprintf(line, sizeof(line), "rowlock db: %s", msg);
    for (int i = 0; fields[i] != NULL && n > 0 && (size_t)n < sizeof(line); i += 2)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%s",
                      fields[i] + (fields[i][0] == '#'), fields[i + 1]);
    fprintf(stderr, "%s\n", line);
}

static void pool_log(struct db_pool *p, enum db_log_level level, const char *msg,
                     const char *const *fields)
{
    log_to(p->cfg.log, p->cfg.log_ctx, level, msg, fields);
}

/* A message from libpq or the server, one line, without its trailing newline. */
static void trim_copy(char *out, size_t size, const char *msg)
{
    snprintf(out, size, "%s", msg ? msg : "");
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    for (char *q = out; *q; q++)
        if (*q == '\n' || *q == '\t')
            *q = ' ';
}

/* libpq's notice receiver: server notices and warnings (and errors that arrive on an idle
 * connection, such as "terminating connection") become log lines. */
void db_log_notice(db_log_fn log, void *ctx, const PGresult *res)
{
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    char text[512];
    trim_copy(text, sizeof(text), primary ? primary : PQresultErrorMessage(res));
    enum db_log_level level = DB_LOG_WARN;
    if (sev != NULL && (strcmp(sev, "NOTICE") == 0 || strcmp(sev, "INFO") == 0 ||
                        strcmp(sev, "DEBUG") == 0 || strcmp(sev, "LOG") == 0))
        level = DB_LOG_DEBUG;
    const char *fields[] = {"severity", sev ? sev : "", "sqlstate",      state ? state : "",
                            "detail",   text,           "server_detail", detail ? detail : "",
                            NULL};
    if (detail == NULL)
        fields[6] = NULL;
    log_to(log, ctx, level, "database notice", fields);
}

static void pool_notice(void *arg, const PGresult *res)
{
    struct db_pool *p = arg;
    db_log_notice(p->cfg.log, p->cfg.log_ctx, res);
}

static void *watchdog_main(void *arg);

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
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_cond_init(&p->stop_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < cfg->size; i++) {
        p->conns[i].pool = p;
        p->conns[i].watch_fd = -1;
        p->free_stack[p->nfree++] = cfg->size - 1 - i;
    }
    p->stats.size = cfg->size;
    if (cfg->deadline_ms > 0)
        p->watching = pthread_create(&p->watchdog, NULL, watchdog_main, p) == 0;
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
    if (p->watching) {
        pthread_mutex_lock(&p->mu);
        p->stopping = 1;
        pthread_cond_signal(&p->stop_cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->watchdog, NULL);
    }
    for (int i = 0; i < p->cfg.size; i++) {
        db_conn_close(&p->conns[i]);
        db_stmt_cache_free(p->conns[i].stmts);
        db_stmt_cache_free(p->conns[i].seen);
        free(p->conns[i].inl);
    }
    pthread_cond_destroy(&p->stop_cv);
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
        pool_log(p, DB_LOG_INFO, "database reachable again", fields);
    else
        pool_log(p, c->connected_before ? DB_LOG_INFO : DB_LOG_DEBUG,
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
        pool_log(p, DB_LOG_WARN, "database server is read-only", fields);
    }
    return DB_ERR_UNAVAILABLE;
}

enum db_status db_classify(struct db_conn *c, const PGresult *res, struct db_error *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (msg == NULL || msg[0] == '\0')
        msg = PQerrorMessage(c->pg);
    if (db_conn_was_cut(c)) {
        db_error_set(err, "08006",
                     "no answer from the database within the deadline of %d ms: the connection "
                     "was closed",
                     db_pool_deadline_ms(c->pool));
        c->broken = 1;
        return DB_ERR_UNAVAILABLE;
    }
    db_error_set(err, state ? state : "", "%s", msg);
    /* 25006: a server that became read-only (a demoted primary): reconnect, so that a
     * multi-host connection string finds the new primary */
    if (state == NULL || PQstatus(c->pg) != CONNECTION_OK || strncmp(state, "08", 2) == 0 ||
        strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0 ||
        strcmp(state, "25006") == 0) {
        c->broken = 1;
        return DB_ERR_UNAVAILABLE;
    }
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
        return DB_ERR_RETRY;
    if (strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
        return DB_ERR_TIMEOUT;
    return DB_ERR_HARD;
}

int db_result_ok(const PGresult *res)
{
    ExecStatusType t = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
}

/* Opens c's connection and sets its session parameters. Our TCP settings come before the
 * connection string, so that it may override them (later entries win). */
static enum db_status pool_connect(struct db_pool *p, struct db_conn *c, struct db_error *err)
{
    char timeout[16], idle[16], interval[16], count[16], user_timeout[16];
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
            pool_log(p, DB_LOG_WARN, "database connection failed", fields);
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
     * count over 300,000 jobs: 54-91 ms compiling for a 35 ms scan) gain nothing it could not
     * lose again at every execution */
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

/* Takes a free slot, waiting up to the acquire timeout. NULL after a timeout (err set). */
static struct db_conn *take_slot(struct db_pool *p, struct db_error *err)
{
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
            return NULL;
        }
    }
    struct db_conn *c = &p->conns[p->free_stack[--p->nfree]];
    p->stats.in_use++;
    c->busy_since_ms = now_ms();
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
    char idle[16];
    pthread_mutex_lock(&p->mu);
    p->stats.flushes++;
    snprintf(idle, sizeof(idle), "%d", p->nfree);
    pthread_mutex_unlock(&p->mu);
    const char *fields[] = {"reason", why, DB_LOG_NUM("idle_connections"), idle, NULL};
    pool_log(p, DB_LOG_WARN, "database connection pool flushed", fields);
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

/* Shuts down the socket of every connection lent for longer than the deadline, under the pool's
 * mutex (so the connection cannot be released and closed meanwhile). The blocked libpq call then
 * reads end-of-file and fails; nothing is cancelled on the server. Returns how many it cut. */
static int watchdog_pass(struct db_pool *p)
{
    long long now = now_ms();
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
        deadline_after_ms(&next, tick);
        pthread_cond_timedwait(&p->stop_cv, &p->mu, &next);
        int cut = p->stopping ? 0 : watchdog_pass(p);
        if (cut > 0) {
            pthread_mutex_unlock(&p->mu);
            char n[16], ms[16];
            snprintf(n, sizeof(n), "%d", cut);
            snprintf(ms, sizeof(ms), "%d", p->cfg.deadline_ms);
            const char *fields[] = {DB_LOG_NUM("connections"), n, DB_LOG_NUM("deadline_ms"), ms,
                                    NULL};
            pool_log(p, DB_LOG_WARN,
                     "database deadline passed: connection closed (the server may still be "
                     "waiting, for example for a synchronous standby)",
                     fields);
            pthread_mutex_lock(&p->mu);
        }
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
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
