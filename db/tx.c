/* Query execution, error classification and the transaction runner (see tx.h and db.h). */
#include "db/tx.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/internal.h"

static atomic_uint_fast64_t tx_commits, tx_rollbacks, tx_retries, tx_failures;

void db_error_set(struct db_error *err, const char *sqlstate, const char *fmt, ...)
{
    if (err == NULL)
        return;
    snprintf(err->sqlstate, sizeof(err->sqlstate), "%s", sqlstate);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    /* one line: libpq's multi-line messages ("...unexpectedly\n\tThis probably means...") */
    size_t n = 0;
    for (const char *p = err->message; *p != '\0'; p++) {
        int space = *p == '\n' || *p == '\t';
        if (!space)
            err->message[n++] = *p;
        else if (n > 0 && err->message[n - 1] != ' ')
            err->message[n++] = ' ';
    }
    err->message[n] = '\0';
    while (n > 0 && err->message[n - 1] == ' ')
        err->message[--n] = '\0';
}

char *db_text_array(const char *const *vals, size_t n)
{
    size_t cap = 3;
    for (size_t i = 0; i < n; i++)
        cap += (vals[i] ? strlen(vals[i]) * 2 + 2 : 4) + 1;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    out[o++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            out[o++] = ',';
        if (vals[i] == NULL) {
            memcpy(out + o, "NULL", 4);
            o += 4;
            continue;
        }
        out[o++] = '"';
        for (const char *p = vals[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                out[o++] = '\\';
            out[o++] = *p;
        }
        out[o++] = '"';
    }
    out[o++] = '}';
    out[o] = '\0';
    return out;
}

void db_arrays_free(struct db_arrays *a)
{
    for (size_t k = 0; a->arr && k < a->ncols; k++)
        free(a->arr[k]);
    free(a->arr);
    a->arr = NULL;
}

int db_arrays_build(struct db_arrays *a, const void *items, size_t n, size_t ncols,
                    db_column_fn get)
{
    a->n = n;
    a->ncols = ncols;
    a->arr = calloc(ncols, sizeof(char *));
    const char **vals = calloc(n ? n : 1, sizeof(char *));
    char(*bufs)[32] = calloc(n ? n : 1, 32);
    int rc = a->arr && vals && bufs ? 0 : -1;
    for (size_t k = 0; rc == 0 && k < ncols; k++) {
        for (size_t i = 0; i < n; i++)
            vals[i] = get(items, i, k, bufs[i], sizeof(bufs[i]));
        a->arr[k] = db_text_array(vals, n);
        rc = a->arr[k] ? 0 : -1;
    }
    free(vals);
    free(bufs);
    return rc;
}

const char *db_status_name(enum db_status s)
{
    static const char *const names[] = {"ok",           "aborted", "retry", "unavailable",
                                        "pool_timeout", "timeout", "error", "outcome_unknown"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
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

static int ok_result(const PGresult *res)
{
    ExecStatusType t = PQresultStatus(res);
    return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
}

/* Sends the BEGIN of c's transaction on its own, if it is still pending. */
static enum db_status flush_begin(struct db_conn *c, struct db_error *err)
{
    const char *const *begin = c->begin;
    c->begin = NULL;
    for (; begin != NULL && *begin != NULL; begin++) {
        PGresult *res = PQexec(c->pg, *begin);
        enum db_status st = (res != NULL && ok_result(res)) ? DB_OK : db_classify(c, res, err);
        PQclear(res);
        if (st != DB_OK) {
            /* BEGIN alone committed nothing: safe to run again unless the deadline cut it */
            if (st == DB_ERR_UNAVAILABLE && c->lost == DB_LOST_NONE)
                c->lost = db_conn_was_cut(c) ? DB_LOST_NOT_COMMITTED : DB_LOST_NOTHING_RAN;
            return st;
        }
    }
    return DB_OK;
}

enum db_status db_exec(struct db_conn *c, const char *sql, struct db_error *err)
{
    enum db_status st = flush_begin(c, err);
    if (st != DB_OK)
        return st;
    PGresult *res = PQexec(c->pg, sql);
    st = (res != NULL && ok_result(res)) ? DB_OK : db_classify(c, res, err);
    PQclear(res);
    return st;
}

/* A dynamic statement (a resource's) seen for the first time on c, or not seen lately: it goes
 * out inline (*inl, its SQL, parsed and planned for this one execution and kept nowhere), and
 * its name is remembered; seen again while remembered, it is prepared. So a connection that
 * serves thousands of topics in turn does not prepare (and evict) a statement per request. */
static int first_sight(struct db_conn *c, const char *name)
{
    if (db_stmt_cache_hit(c->seen, name, c->stmt_stamp))
        return 0;
    char dropped[128];
    db_stmt_cache_evict(c->seen, c->stmt_stamp, dropped, sizeof(dropped));
    db_stmt_cache_add(c->seen, name, c->stmt_stamp);
    db_conn_statement_churned(c);
    return 1;
}

/* Prepares statement name on c unless it already is (sql, or build(ctx) when sql is NULL): the
 * connection's cache holds at most its capacity, and the least recently used statement that this
 * pipeline does not use is DEALLOCATEd to make room. A dynamic statement seen for the first time
 * is not prepared: *inl gets its SQL (malloc'd) to send inline. */
static enum db_status ensure_prepared(struct db_conn *c, const char *name, const char *sql,
                                      db_sql_builder build, const void *ctx, int nparams,
                                      char **inl, struct db_error *err)
{
    if (db_stmt_cache_hit(c->stmts, name, c->stmt_stamp))
        return DB_OK;
    char text[8192], victim[128];
    if (sql == NULL) {
        if (build(text, sizeof(text), ctx) != 0) {
            db_error_set(err, "", "cannot build statement %s", name);
            return DB_ERR_HARD;
        }
        sql = text;
        if (first_sight(c, name)) {
            *inl = strdup(text);
            if (*inl != NULL)
                return DB_OK;
            db_error_set(err, "", "out of memory");
            return DB_ERR_HARD;
        }
    }
    if (db_stmt_cache_evict(c->stmts, c->stmt_stamp, victim, sizeof(victim))) {
        char dealloc[160];
        snprintf(dealloc, sizeof(dealloc), "DEALLOCATE \"%s\"", victim);
        PGresult *res = PQexec(c->pg, dealloc);
        enum db_status s = (res != NULL && ok_result(res)) ? DB_OK : db_classify(c, res, err);
        PQclear(res);
        db_conn_statement_evicted(c);
        db_conn_statement_churned(c);
        if (s != DB_OK) {
            c->broken = 1; /* the server may still hold it: this connection is not reused */
            return s;
        }
    }
    PGresult *res = PQprepare(c->pg, name, sql, nparams, NULL);
    enum db_status s = (res != NULL && ok_result(res)) ? DB_OK : db_classify(c, res, err);
    PQclear(res);
    if (s == DB_OK && db_stmt_cache_add(c->stmts, name, c->stmt_stamp) != 0) {
        c->broken = 1; /* prepared but not recorded */
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    return s;
}

static const char *call_name(const struct db_call *call)
{
    return call->st != NULL ? call->st->name : call->name;
}

static int call_nparams(const struct db_call *call)
{
    return call->st != NULL ? call->st->nparams : call->nparams;
}

/* The first failure of a pipeline: its status, the command (slot) it came with, and whether it
 * was the server's own error report (with a SQLSTATE) rather than libpq's lost connection. */
struct pipe_fail {
    enum db_status st;
    int slot;
    int from_server;
};

static void pipe_fail_set(struct db_conn *c, struct pipe_fail *f, int slot, const PGresult *res,
                          struct db_error *err)
{
    if (f->st != DB_OK)
        return;
    f->st = db_classify(c, res, err);
    f->slot = slot;
    f->from_server =
        res != NULL && PQresultErrorField(res, PG_DIAG_SQLSTATE) != NULL && !db_conn_was_cut(c);
}

/* Reads the results of one pipelined command (slot) into *keep (when keep is not NULL and it
 * succeeded), up to the NULL that ends them. The first failure of the pipeline sets *f. Returns
 * 1 when the command itself succeeded. */
static int pipeline_result(struct db_conn *c, int slot, PGresult **keep, struct pipe_fail *f,
                           struct db_error *err)
{
    PGresult *res = PQgetResult(c->pg);
    if (res == NULL) { /* the connection failed before answering */
        pipe_fail_set(c, f, slot, NULL, err);
        c->broken = 1;
        return 0;
    }
    ExecStatusType t = PQresultStatus(res);
    int ok = ok_result(res);
    if (t != PGRES_PIPELINE_ABORTED && !ok)
        pipe_fail_set(c, f, slot, res, err);
    if (f->st == DB_OK && keep != NULL && ok) {
        *keep = res;
        res = NULL;
    }
    PQclear(res);
    /* the NULL that ends this command's results; anything else means the connection is lost */
    while ((res = PQgetResult(c->pg)) != NULL) {
        PQclear(res);
        if (PQstatus(c->pg) != CONNECTION_OK) {
            c->broken = 1;
            break;
        }
    }
    return ok;
}

/* A lost connection after COMMIT went out: the transaction may or may not have committed. */
static enum db_status commit_unknown(struct db_conn *c, struct db_error *err)
{
    struct db_error was = *err;
    db_error_set(err, was.sqlstate,
                 "the connection was lost after COMMIT was sent: the transaction may or may not "
                 "have committed (%s)",
                 was.message);
    c->broken = 1;
    if (c->lost == DB_LOST_NONE)
        c->lost = DB_LOST_COMMIT_UNKNOWN;
    return DB_ERR_OUTCOME_UNKNOWN;
}

/* How a pipeline that lost its connection (f) leaves the transaction. Only the server's own
 * report of a command before COMMIT proves that COMMIT did not run; a pipeline that sent BEGIN
 * and committed nothing may run again, unless the deadline cut it. */
static enum db_lost pipeline_lost(struct db_conn *c, int sent_begin, int commit_slot,
                                  const struct pipe_fail *f)
{
    if (commit_slot >= 0 && !(f->from_server && f->slot < commit_slot))
        return DB_LOST_COMMIT_UNKNOWN;
    return sent_begin && !db_conn_was_cut(c) ? DB_LOST_NOTHING_RAN : DB_LOST_NOT_COMMITTED;
}

/* Sends the pipeline: BEGIN commands, calls, COMMIT when asked, and the sync. 1 when libpq
 * took it all, 0 when sending failed (nothing of it ran: the server never saw a whole
 * command sequence that ends in COMMIT). */
static int send_pipeline(struct db_conn *c, const char *const *begin, size_t *nbegin,
                         const struct db_call *calls, size_t n, int commit)
{
    int ok = 1;
    for (*nbegin = 0; begin != NULL && begin[*nbegin] != NULL && ok; (*nbegin)++)
        ok = PQsendQueryParams(c->pg, begin[*nbegin], 0, NULL, NULL, NULL, NULL, 0);
    for (size_t i = 0; i < n && ok; i++)
        ok = c->inl[i] != NULL
                 ? PQsendQueryParams(c->pg, c->inl[i], call_nparams(&calls[i]), NULL,
                                     calls[i].params, NULL, NULL, 0)
                 : PQsendQueryPrepared(c->pg, call_name(&calls[i]), call_nparams(&calls[i]),
                                       calls[i].params, NULL, NULL, 0);
    if (commit && ok)
        ok = PQsendQueryParams(c->pg, "COMMIT", 0, NULL, NULL, NULL, NULL, 0);
    if (ok)
        ok = PQpipelineSync(c->pg);
    return ok;
}

/* Sends what is pending on c (the transaction's BEGIN), the calls, and COMMIT when the workflow
 * asked for it, as one pipeline: one round trip. */
static enum db_status run_pipeline(struct db_conn *c, const struct db_call *calls, size_t n,
                                   int commit, struct db_error *err)
{
    const char *const *begin = c->begin;
    c->begin = NULL;
    int sent_begin = begin != NULL;
    size_t nbegin = 0;
    int entered = PQenterPipelineMode(c->pg) == 1;
    if (!entered || !send_pipeline(c, begin, &nbegin, calls, n, commit)) {
        db_error_set(err, "08006", "cannot send: %s", PQerrorMessage(c->pg));
        c->broken = 1;
        /* libpq may have flushed part of the pipeline before the send failed, and the server
         * runs each command without waiting for the sync: with COMMIT in it, it may have run */
        if (entered && commit)
            return commit_unknown(c, err);
        if (c->lost == DB_LOST_NONE)
            c->lost =
                sent_begin && !db_conn_was_cut(c) ? DB_LOST_NOTHING_RAN : DB_LOST_NOT_COMMITTED;
        return DB_ERR_UNAVAILABLE;
    }
    struct pipe_fail f = {DB_OK, -1, 0};
    int slot = 0, commit_ok = 0;
    for (size_t i = 0; i < nbegin && !c->broken; i++)
        pipeline_result(c, slot++, NULL, &f, err);
    for (size_t i = 0; i < n && !c->broken; i++)
        pipeline_result(c, slot++, calls[i].out, &f, err);
    int commit_slot = commit ? (int)(nbegin + n) : -1;
    if (commit && !c->broken)
        commit_ok = pipeline_result(c, commit_slot, NULL, &f, err) && f.st == DB_OK;
    PGresult *res;
    while (!c->broken && (res = PQgetResult(c->pg)) != NULL) {
        int sync = PQresultStatus(res) == PGRES_PIPELINE_SYNC;
        PQclear(res);
        if (sync)
            break;
    }
    if (c->broken || PQexitPipelineMode(c->pg) != 1) {
        c->broken = 1;
        if (f.st == DB_OK && !commit_ok) /* lost without any error report */
            pipe_fail_set(c, &f, slot, NULL, err);
    }
    enum db_status st = commit_ok ? DB_OK : f.st;
    if (st != DB_OK) {
        for (size_t i = 0; i < n; i++) {
            if (calls[i].out != NULL) {
                PQclear(*calls[i].out);
                *calls[i].out = NULL;
            }
        }
        if (st == DB_ERR_UNAVAILABLE && c->lost == DB_LOST_NONE)
            c->lost = pipeline_lost(c, sent_begin, commit_slot, &f);
        if (c->lost == DB_LOST_COMMIT_UNKNOWN)
            st = commit_unknown(c, err);
    }
    c->committed = commit_ok;
    return st;
}

/* Room for n inline statements in c->inl, all NULL: 0, or -1 out of memory. */
static int inline_slots(struct db_conn *c, size_t n)
{
    if (n > c->inl_cap) {
        char **grown = realloc(c->inl, n * sizeof(*grown));
        if (grown == NULL)
            return -1;
        c->inl = grown;
        c->inl_cap = n;
    }
    memset(c->inl, 0, n * sizeof(*c->inl));
    return 0;
}

static void inline_free(struct db_conn *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c->inl[i]);
        c->inl[i] = NULL;
    }
}

static enum db_status run_calls(struct db_conn *c, const struct db_call *calls, size_t n,
                                struct db_error *err);

enum db_status db_query_pipeline(struct db_conn *c, const struct db_call *calls, size_t n,
                                 struct db_error *err)
{
    if (inline_slots(c, n) != 0) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    enum db_status st = run_calls(c, calls, n, err);
    inline_free(c, n);
    return st;
}

/* db_query_pipeline, with c->inl ready for n calls. */
static enum db_status run_calls(struct db_conn *c, const struct db_call *calls, size_t n,
                                struct db_error *err)
{
    if (++c->stmt_stamp == 0) /* 0 is no batch's */
        c->stmt_stamp = 1;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].out != NULL)
            *calls[i].out = NULL;
        const struct db_stmt *st = calls[i].st;
        enum db_status s =
            st != NULL
                ? ensure_prepared(c, st->name, st->sql, NULL, NULL, st->nparams, &c->inl[i], err)
                : ensure_prepared(c, calls[i].name, NULL, calls[i].build, calls[i].ctx,
                                  calls[i].nparams, &c->inl[i], err);
        if (s != DB_OK)
            return s;
    }
    int commit = c->commit_next;
    c->commit_next = 0;
    if (c->begin == NULL && !commit && n == 1) {
        /* nothing to send with it: the plain protocol, one round trip as well */
        PGresult *res = c->inl[0] != NULL
                            ? PQexecParams(c->pg, c->inl[0], call_nparams(calls), NULL,
                                           calls[0].params, NULL, NULL, 0)
                            : PQexecPrepared(c->pg, call_name(calls), call_nparams(calls),
                                             calls[0].params, NULL, NULL, 0);
        if (res == NULL || !ok_result(res)) {
            enum db_status s = db_classify(c, res, err);
            PQclear(res);
            return s;
        }
        if (calls[0].out != NULL)
            *calls[0].out = res;
        else
            PQclear(res);
        return DB_OK;
    }
    return run_pipeline(c, calls, n, commit, err);
}

enum db_status db_query(struct db_conn *c, const struct db_stmt *st, const char *const *params,
                        PGresult **out, struct db_error *err)
{
    struct db_call call = {.st = st, .params = params, .out = out};
    return db_query_pipeline(c, &call, 1, err);
}

enum db_status db_query_dyn(struct db_conn *c, const char *name, db_sql_builder build,
                            const void *ctx, int nparams, const char *const *params, PGresult **out,
                            struct db_error *err)
{
    struct db_call call = {
        .name = name, .build = build, .ctx = ctx, .nparams = nparams, .params = params, .out = out};
    return db_query_pipeline(c, &call, 1, err);
}

void db_tx_commit_with_next(struct db_conn *c)
{
    c->commit_next = 1;
}

static void backoff(int attempt)
{
    /* 1-4 ms times the attempt, jittered, so two retrying transactions drift apart */
    unsigned seed = (unsigned)clock();
    long ms = attempt * (1 + (long)(rand_r(&seed) % 4));
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* COMMIT on its own round trip. A COMMIT that could not be sent committed nothing; one sent
 * whose answer never came (the connection lost, or a server going away) may have committed. */
static enum db_status exec_commit(struct db_conn *c, struct db_error *err)
{
    if (!PQsendQuery(c->pg, "COMMIT")) {
        db_error_set(err, "08006", "cannot send COMMIT: %s", PQerrorMessage(c->pg));
        c->broken = 1;
        if (c->lost == DB_LOST_NONE)
            c->lost = DB_LOST_NOT_COMMITTED;
        return DB_ERR_UNAVAILABLE;
    }
    PGresult *res = PQgetResult(c->pg);
    enum db_status st = res != NULL && ok_result(res) ? DB_OK : db_classify(c, res, err);
    PQclear(res);
    while ((res = PQgetResult(c->pg)) != NULL)
        PQclear(res);
    if (st == DB_OK && PQstatus(c->pg) != CONNECTION_OK)
        c->broken = 1; /* committed; the connection went after */
    return st == DB_ERR_UNAVAILABLE ? commit_unknown(c, err) : st;
}

/* One attempt: BEGIN, workflow, COMMIT or ROLLBACK on connection c. BEGIN goes out with the
 * workflow's first statement, and COMMIT with its last when the workflow says which that is
 * (db_tx_commit_with_next); c->lost says how a lost connection left the transaction. */
static enum db_status tx_attempt(struct db_conn *c, enum db_isolation iso, db_workflow_fn fn,
                                 void *arg, struct db_error *err)
{
    static const char *const rc[] = {"BEGIN", NULL};
    static const char *const rr[] = {"BEGIN ISOLATION LEVEL REPEATABLE READ", NULL};
    static const char *const ser[] = {"BEGIN ISOLATION LEVEL SERIALIZABLE", NULL};
    /* generic plans, and no JIT: a generic plan's cost is a guess (a claim's LIMIT a tenth of
     * the backlog) that can pass jit_above_cost, and JIT compiles at every execution (20 ms) */
    static const char *const generic[] = {
        "BEGIN",
        "SELECT set_config('plan_cache_mode', 'force_generic_plan', true), "
        "set_config('jit', 'off', true)",
        NULL};
    static const char *const *const begin[] = {rc, rr, ser, generic};
    c->begin = begin[iso];
    c->commit_next = c->committed = 0;
    c->lost = DB_LOST_NONE;
    enum db_status st = fn(c, arg, err);
    int began = c->begin == NULL, committed = c->committed;
    if (st == DB_ERR_UNAVAILABLE && c->lost == DB_LOST_NONE) /* lost before BEGIN went out? */
        c->lost = !began && !db_conn_was_cut(c) ? DB_LOST_NOTHING_RAN : DB_LOST_NOT_COMMITTED;
    if (c->lost == DB_LOST_COMMIT_UNKNOWN)
        st = DB_ERR_OUTCOME_UNKNOWN; /* whatever the workflow made of it */
    c->begin = NULL;
    c->commit_next = c->committed = 0;
    if (committed || (st == DB_OK && !began)) {
        /* committed with the last statement, or no statement ran at all */
        atomic_fetch_add(&tx_commits, 1);
        return st;
    }
    if (st == DB_OK) {
        st = exec_commit(c, err);
        if (st == DB_OK)
            atomic_fetch_add(&tx_commits, 1);
        return st;
    }
    struct db_error ignored;
    /* (a COMMIT that failed in a pipeline has already ended the transaction) */
    if (!c->broken && began && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        db_exec(c, "ROLLBACK", &ignored);
    atomic_fetch_add(&tx_rollbacks, 1);
    return st;
}

enum db_status db_tx_run(struct db_pool *pool, enum db_isolation iso, db_workflow_fn fn, void *arg,
                         struct db_error *err)
{
    enum db_status st = DB_ERR_RETRY;
    int replaced = 0;
    for (int attempt = 1; attempt <= DB_TX_MAX_ATTEMPTS; attempt++) {
        struct db_conn *c = NULL;
        st = db_pool_acquire(pool, &c, err);
        if (st != DB_OK)
            break;
        st = tx_attempt(c, iso, fn, arg, err);
        enum db_lost lost = c->lost;
        c->lost = DB_LOST_NONE;
        if (lost != DB_LOST_NONE && !db_conn_was_cut(c))
            db_pool_flush(c, err->message); /* the server went away: so did its other sessions */
        db_pool_release(c);
        if (lost == DB_LOST_NOTHING_RAN && !replaced) {
            /* lost before anything could commit (a connection the server had closed): nothing
             * is left of the attempt; run it again on a fresh connection */
            replaced = 1;
            attempt--;
            continue;
        }
        if (st != DB_ERR_RETRY)
            break;
        if (attempt < DB_TX_MAX_ATTEMPTS) {
            atomic_fetch_add(&tx_retries, 1);
            backoff(attempt);
        }
    }
    if (st != DB_OK && st != DB_ABORTED)
        atomic_fetch_add(&tx_failures, 1);
    return st;
}

void db_tx_get_stats(struct db_tx_stats *out)
{
    out->commits = atomic_load(&tx_commits);
    out->rollbacks = atomic_load(&tx_rollbacks);
    out->retries = atomic_load(&tx_retries);
    out->failures = atomic_load(&tx_failures);
}
