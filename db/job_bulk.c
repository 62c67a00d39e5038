/* Bulk operator actions (see queues.h): the retry or cancel of one page of a queue's jobs that
 * match a filter, in one transaction and one statement each, composed of the same fragments as
 * the one-job retry and cancel of db/queues.c (db/job_admin_sql.h). Paging is the caller's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/job_admin_sql.h"
#include "db/tx.h"

/* The page's jobs, as the CTE target: those of queue $2 with ids above $1 in state $3 (NULL:
 * any) and with concurrency key $4 (NULL: any) that the action may change (can: its
 * predicate), the first $5 in id order, each locked: a job another transaction holds is waited
 * for and judged again on its latest version (left out when it no longer matches, and the next
 * one taken in its place). Locked in id order, as every page is, so that two pages never
 * deadlock each other. */
#define JOB_PAGE_TARGET(can)                                                                       \
    "target AS (SELECT j.id FROM rowlock.jobs j WHERE j.queue_id = $2 AND j.id > $1 AND " can      \
    " AND ($3::text IS NULL OR j.state = $3) AND ($4::text IS NULL OR j.concurrency_key = $4) "    \
    "ORDER BY j.id LIMIT $5 FOR UPDATE)"
/* Rows: each job changed (id, deleted; done: SQL of a SELECT of them) in id order, each with the
 * next page's cursor: the last job of a full page, else NULL. No job changed: one row, id NULL. */
#define JOB_PAGE_RESULT(done)                                                                      \
    "SELECT d.id, d.deleted, n.next FROM (SELECT CASE WHEN count(*) = $5 THEN max(id) END AS "     \
    "next FROM target) n LEFT JOIN (" done ") d ON true ORDER BY d.id"

/* Retry: $1 after, $2 queue id, $3 state, $4 key, $5 limit. */
/* clang-format off */
static const struct db_stmt st_jobs_retry_page = {
    "jobs_retry_page",
    "WITH " JOB_PAGE_TARGET(JOB_RETRYABLE) ", "
    "w AS (UPDATE rowlock.jobs j SET " JOB_RETRY_SET " FROM target "
    "  WHERE j.id = target.id AND " JOB_RETRYABLE " RETURNING j.id) "
    JOB_PAGE_RESULT("SELECT id, false AS deleted FROM w"),
    5};
/* Cancel: the same parameters. */
static const struct db_stmt st_jobs_cancel_page = {
    "jobs_cancel_page",
    "WITH " JOB_CANCEL_QUEUE("$2") ", " JOB_PAGE_TARGET(JOB_CANCELLABLE) ", " JOBS_CANCEL " "
    JOB_PAGE_RESULT("SELECT id, false AS deleted FROM w UNION ALL SELECT id, true FROM gone"),
    5};
/* clang-format on */

void db_job_page_clear(struct db_job_page *p)
{
    free(p->ids);
    *p = (struct db_job_page){0};
}

struct job_page_op {
    const char *queue;
    const struct db_stmt *stmt;
    const struct db_job_filter *f;
    struct db_job_page *out;
    enum db_queue_verdict verdict;
};

/* The statement's rows into a->out (ids NULL when none changed). */
static enum db_status page_from_rows(const PGresult *r, struct job_page_op *a, struct db_error *err)
{
    int rows = PQntuples(r);
    struct db_job_page *p = a->out;
    if (rows > 0 && !PQgetisnull(r, 0, 2))
        p->next = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
    if (rows == 0 || PQgetisnull(r, 0, 0))
        return DB_OK;
    if ((p->ids = calloc((size_t)rows, sizeof(*p->ids))) == NULL) {
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    for (int i = 0; i < rows; i++) {
        p->ids[p->n++] = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        p->deleted += PQgetvalue(r, i, 1)[0] == 't';
    }
    return DB_OK;
}

static enum db_status job_page_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct job_page_op *a = arg;
    struct db_queue q;
    PGresult *r = NULL;
    int found;
    char after[DB_INT_TEXT], limit[DB_INT_TEXT];
    db_job_page_clear(a->out);
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    db_i64(after, sizeof(after), a->f->after);
    db_i64(limit, sizeof(limit), a->f->limit);
    const char *params[] = {after, NULL, a->f->state, a->f->concurrency_key, limit};
    enum db_status st = db_queue_stmt_in(c, a->queue, a->stmt, params, 1, 1, &q, &found, &r, err);
    if (st == DB_OK && found) {
        a->verdict = DB_Q_OK;
        st = page_from_rows(r, a, err);
    }
    PQclear(r);
    return st;
}

static enum db_status job_page_run(struct db_pool *pool, const char *queue,
                                   const struct db_stmt *stmt, const struct db_job_filter *f,
                                   struct db_job_page *out, enum db_queue_verdict *verdict,
                                   struct db_error *err)
{
    struct job_page_op a = {queue, stmt, f, out, DB_Q_QUEUE_NOT_FOUND};
    *out = (struct db_job_page){0};
    if (f->limit < 1 || f->limit > DB_JOB_PAGE_MAX || f->after < 0) {
        *verdict = DB_Q_BAD_INPUT;
        return DB_OK;
    }
    enum db_status st = finish(db_tx_run(pool, DB_READ_COMMITTED, job_page_tx, &a, err));
    *verdict = a.verdict;
    if (st != DB_OK || a.verdict != DB_Q_OK)
        db_job_page_clear(out);
    return st;
}

enum db_status db_jobs_retry_page(struct db_pool *pool, const char *queue,
                                  const struct db_job_filter *f, struct db_job_page *out,
                                  enum db_queue_verdict *verdict, struct db_error *err)
{
    return job_page_run(pool, queue, &st_jobs_retry_page, f, out, verdict, err);
}

enum db_status db_jobs_cancel_page(struct db_pool *pool, const char *queue,
                                   const struct db_job_filter *f, struct db_job_page *out,
                                   enum db_queue_verdict *verdict, struct db_error *err)
{
    enum db_status st = job_page_run(pool, queue, &st_jobs_cancel_page, f, out, verdict, err);
    if (st == DB_OK && *verdict == DB_Q_OK && out->deleted > 0)
        db_jobs_deleted_add("cancelled", (unsigned long long)out->deleted);
    return st;
}
