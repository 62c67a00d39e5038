/* The queue verdict (queue_verdict.h): the attempt history read and checked, each job against the
 * rules of exactly-once success or spent failure. Knows the schema's jobs and attempt history,
 * nothing of HTTP or of the workloads. */
#include "queue_verdict.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

#define QV_PRINTED 30 /* problems printed; the rest only counted */

int qv_problem(int64_t id, const char *fmt, ...)
{
    static atomic_int printed;
    if (atomic_fetch_add(&printed, 1) >= QV_PRINTED)
        return 1;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "job %" PRId64 ": ", id);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

/* ---- the history: fences grow, leases never overlap ---- */

static int cmp_attempt(const void *x, const void *y)
{
    const struct qv_attempt *a = x, *b = y;
    if (a->job != b->job)
        return (a->job > b->job) - (a->job < b->job);
    if (a->claimed_us != b->claimed_us)
        return (a->claimed_us > b->claimed_us) - (a->claimed_us < b->claimed_us);
    return (a->fence > b->fence) - (a->fence < b->fence);
}

static int violation(int *count, const struct qv_attempt *a, const char *what)
{
    if ((*count)++ < 8)
        fprintf(stderr, "  job %" PRId64 " fence %" PRId64 " (%s): %s\n", a->job, a->fence,
                a->owner, what);
    return 1;
}

int qv_check_history(struct qv_attempt *a, size_t n)
{
    int bad = 0, completed = 0;
    qsort(a, n, sizeof(*a), cmp_attempt);
    for (size_t i = 0; i < n; i++) {
        int first = i == 0 || a[i - 1].job != a[i].job;
        completed = (first ? 0 : completed) + (strcmp(a[i].outcome, "completed") == 0);
        if (completed == 2)
            violation(&bad, &a[i], "a second completed attempt");
        if (first)
            continue;
        const struct qv_attempt *p = &a[i - 1];
        if (a[i].fence <= p->fence)
            violation(&bad, &a[i], "fence not above the previous claim's");
        if (p->ended_us < 0 || p->ended_us > a[i].claimed_us)
            violation(&bad, &a[i], "claimed while the previous attempt was still leased");
    }
    return bad;
}

static int64_t col_i64(PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? -1 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* The attempt history of every job of a queue (rowlock.job_attempt_history: the superseded
 * attempts and each job's latest); the caller frees it. */
static struct qv_attempt *load_history(PGconn *c, const char *queue, size_t *n)
{
    const char *params[] = {queue};
    PGresult *r =
        PQexecParams(c,
                     "SELECT a.job_id, a.fence, a.attempt, a.owner, "
                     "(extract(epoch FROM a.claimed_at) * 1000000)::bigint, "
                     "(extract(epoch FROM a.ended_at) * 1000000)::bigint, coalesce(a.outcome, '') "
                     "FROM rowlock.job_attempt_history a JOIN rowlock.jobs j ON j.id = a.job_id "
                     "JOIN rowlock.queues q ON q.id = j.queue_id WHERE q.name = $1",
                     1, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    *n = (size_t)PQntuples(r);
    struct qv_attempt *a = calloc(*n + 1, sizeof(*a));
    assert_non_null(a);
    for (int i = 0; i < PQntuples(r); i++) {
        a[i].job = col_i64(r, i, 0);
        a[i].fence = col_i64(r, i, 1);
        a[i].attempt = (int)col_i64(r, i, 2);
        snprintf(a[i].owner, sizeof(a[i].owner), "%s", PQgetvalue(r, i, 3));
        a[i].claimed_us = col_i64(r, i, 4);
        a[i].ended_us = col_i64(r, i, 5);
        snprintf(a[i].outcome, sizeof(a[i].outcome), "%s", PQgetvalue(r, i, 6));
    }
    PQclear(r);
    return a;
}

/* ---- the logs of completes ---- */

void qv_log_add(struct qv_log *log, int64_t id, int64_t fence, const char *owner)
{
    pthread_mutex_lock(&log->mu);
    if (log->n == log->cap) {
        log->cap = log->cap ? log->cap * 2 : 1024;
        log->v = realloc(log->v, log->cap * sizeof(*log->v));
    }
    struct qv_complete *e = &log->v[log->n++];
    e->id = id;
    e->fence = fence;
    snprintf(e->owner, sizeof(e->owner), "%s", owner);
    pthread_mutex_unlock(&log->mu);
}

void qv_log_free(struct qv_log *log)
{
    free(log->v);
    log->v = NULL;
    log->n = log->cap = 0;
}

static int cmp_complete(const void *x, const void *y)
{
    const struct qv_complete *a = x, *b = y;
    return (a->id > b->id) - (a->id < b->id);
}

/* In a log sorted by job (may be NULL): how many entries name job id (*any) and how many of
 * those carry this fence and owner (returned). */
static int count_completes(const struct qv_log *log, int64_t id, int64_t fence, const char *owner,
                           int *any)
{
    *any = 0;
    if (log == NULL || log->n == 0)
        return 0;
    struct qv_complete key = {.id = id};
    const struct qv_complete *e = bsearch(&key, log->v, log->n, sizeof(key), cmp_complete);
    if (e == NULL)
        return 0;
    while (e > log->v && e[-1].id == id)
        e--;
    int match = 0;
    for (; e < log->v + log->n && e->id == id; e++, (*any)++)
        match += e->fence == fence && strcmp(e->owner, owner) == 0;
    return match;
}

/* ---- one job against the rules ---- */

/* The rules every job keeps whatever its end: one attempt per fence, its attempts counter the
 * highest attempt number, no attempt but the last completed. */
static int check_attempts(const struct qv_job *job, const struct qv_attempt *h, size_t nh)
{
    int bad = 0, top = 0;
    if (h[nh - 1].fence != job->fence || (int64_t)nh != job->fence)
        bad += qv_problem(job->id, "%zu attempts for fence %" PRId64, nh, job->fence);
    for (size_t i = 0; i < nh; i++) {
        top = h[i].attempt > top ? h[i].attempt : top;
        if (i + 1 < nh && strcmp(h[i].outcome, "completed") == 0)
            bad += qv_problem(job->id, "an attempt completed before the last");
    }
    if (top != job->attempts)
        bad += qv_problem(job->id, "%d attempts, history up to attempt %d", job->attempts, top);
    return bad;
}

static int check_succeeded(const struct qv_rules *rules, const struct qv_job *job,
                           const struct qv_attempt *last)
{
    int any_acked, any_lost;
    int acked = count_completes(rules->acked, job->id, last->fence, last->owner, &any_acked);
    int lost = count_completes(rules->lost, job->id, last->fence, last->owner, &any_lost);
    if (strcmp(last->outcome, "completed") != 0 || any_acked > 1 || acked != any_acked ||
        (acked == 0 && lost == 0))
        return qv_problem(job->id,
                          "succeeded: last attempt %s by %s; %d completes accepted (%d for the "
                          "completed attempt), %d lost answers for it",
                          last->outcome, last->owner, any_acked, acked, lost);
    return 0;
}

static int check_failed(const struct qv_rules *rules, const struct qv_job *job,
                        const struct qv_attempt *h, size_t nh)
{
    const struct qv_attempt *last = &h[nh - 1];
    int any_acked, distinct = 0;
    count_completes(rules->acked, job->id, 0, "", &any_acked);
    char *seen = calloc((size_t)rules->max_attempts + 1, 1);
    assert_non_null(seen);
    for (size_t i = 0; i < nh; i++)
        if (h[i].attempt >= 1 && h[i].attempt <= rules->max_attempts && !seen[h[i].attempt]++)
            distinct++;
    free(seen);
    if (any_acked != 0 || job->attempts != rules->max_attempts || distinct != rules->max_attempts ||
        (strcmp(last->outcome, "failed") != 0 && strcmp(last->outcome, "lease_expired") != 0))
        return qv_problem(job->id,
                          "failed: attempts %d (%d distinct), %d completes accepted, last "
                          "outcome %s",
                          job->attempts, distinct, any_acked, last->outcome);
    return 0;
}

static int check_job(const struct qv_rules *rules, const struct qv_job *job,
                     const struct qv_attempt *h, size_t nh)
{
    if (nh == 0)
        return qv_problem(job->id, "no attempt");
    int bad = check_attempts(job, h, nh);
    if (strcmp(job->state, "succeeded") == 0)
        bad += check_succeeded(rules, job, &h[nh - 1]);
    else if (strcmp(job->state, "failed") == 0)
        bad += check_failed(rules, job, h, nh);
    else
        bad += qv_problem(job->id, "still %s", job->state);
    if (rules->job_rules != NULL)
        bad += rules->job_rules(rules->arg, job, h, nh);
    return bad;
}

/* ---- the queue ---- */

static void sort_log(struct qv_log *log)
{
    if (log != NULL && log->n > 0)
        qsort(log->v, log->n, sizeof(*log->v), cmp_complete);
}

struct qv_verdict qv_check_queue(PGconn *c, const struct qv_rules *rules)
{
    struct qv_verdict v = {0};
    struct qv_attempt *h = load_history(c, rules->queue, &v.attempts);
    v.overlaps = qv_check_history(h, v.attempts);
    sort_log(rules->acked);
    sort_log(rules->lost);
    const char *params[] = {rules->queue};
    PGresult *jobs = PQexecParams(
        c,
        "SELECT j.id, j.state, j.attempts, j.fence, b.payload FROM rowlock.jobs j LEFT JOIN "
        "rowlock.job_bodies b ON b.job_id = j.id WHERE j.queue_id = (SELECT id FROM "
        "rowlock.queues WHERE name = $1) ORDER BY j.id",
        1, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(jobs), PGRES_TUPLES_OK);
    v.jobs = PQntuples(jobs);
    size_t k = 0;
    for (int row = 0; row < v.jobs; row++) {
        struct qv_job job = {.id = col_i64(jobs, row, 0),
                             .state = PQgetvalue(jobs, row, 1),
                             .attempts = (int)col_i64(jobs, row, 2),
                             .fence = col_i64(jobs, row, 3)};
        if (rules->job_rules != NULL && !PQgetisnull(jobs, row, 4))
            job.payload = json_loads(PQgetvalue(jobs, row, 4), 0, NULL);
        size_t from = k; /* the history is of this queue's jobs, sorted by job */
        while (k < v.attempts && h[k].job == job.id)
            k++;
        v.bad_jobs += check_job(rules, &job, h + from, k - from);
        v.failed += strcmp(job.state, "failed") == 0;
        json_decref(job.payload);
    }
    fprintf(stderr,
            "queue %s: %d jobs, %zu attempts in the history, %d failed; %d history violations, "
            "%d rules broken\n",
            rules->queue, v.jobs, v.attempts, v.failed, v.overlaps, v.bad_jobs);
    PQclear(jobs);
    free(h);
    return v;
}
