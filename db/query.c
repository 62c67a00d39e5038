/* Statements on a connection (db.h's db_exec, db_query, db_query_dyn, db_query_pipeline):
 * lazy preparation, pipelining, and the transaction's BEGIN and COMMIT riding with statements
 * as tx.c asks (struct db_conn's begin and commit_next). Knows no transaction runner: tx.c calls
 * it, never the other way. */
#include "db/db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/conn.h"

/* Sends the BEGIN of c's transaction on its own, if it is still pending. */
static enum db_status flush_begin(struct db_conn *c, struct db_error *err)
{
    const char *const *begin = c->begin;
    c->begin = NULL;
    for (; begin != NULL && *begin != NULL; begin++) {
        PGresult *res = PQexec(c->pg, *begin);
        enum db_status st = (res != NULL && db_result_ok(res)) ? DB_OK : db_classify(c, res, err);
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
    st = (res != NULL && db_result_ok(res)) ? DB_OK : db_classify(c, res, err);
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
        enum db_status s = (res != NULL && db_result_ok(res)) ? DB_OK : db_classify(c, res, err);
        PQclear(res);
        db_conn_statement_evicted(c);
        db_conn_statement_churned(c);
        if (s != DB_OK) {
            c->broken = 1; /* the server may still hold it: this connection is not reused */
            return s;
        }
    }
    PGresult *res = PQprepare(c->pg, name, sql, nparams, NULL);
    enum db_status s = (res != NULL && db_result_ok(res)) ? DB_OK : db_classify(c, res, err);
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
    int ok = db_result_ok(res);
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
        if (res == NULL || !db_result_ok(res)) {
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

/* COMMIT on its own round trip. A COMMIT that could not be sent committed nothing; one sent
 * whose answer never came (the connection lost, or a server going away) may have committed. */
enum db_status db_conn_commit(struct db_conn *c, struct db_error *err)
{
    if (!PQsendQuery(c->pg, "COMMIT")) {
        db_error_set(err, "08006", "cannot send COMMIT: %s", PQerrorMessage(c->pg));
        c->broken = 1;
        if (c->lost == DB_LOST_NONE)
            c->lost = DB_LOST_NOT_COMMITTED;
        return DB_ERR_UNAVAILABLE;
    }
    PGresult *res = PQgetResult(c->pg);
    enum db_status st = res != NULL && db_result_ok(res) ? DB_OK : db_classify(c, res, err);
    PQclear(res);
    while ((res = PQgetResult(c->pg)) != NULL)
        PQclear(res);
    if (st == DB_OK && PQstatus(c->pg) != CONNECTION_OK)
        c->broken = 1; /* committed; the connection went after */
    return st == DB_ERR_UNAVAILABLE ? commit_unknown(c, err) : st;
}
