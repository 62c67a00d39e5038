/* The leased-queue conformance suite (queue_conformance.c) against the C queue API: struct
 * qc_impl implemented by calling db/queues.h on a struct db_pool over a fresh database whose
 * schema db_schema_apply creates, the case table run on queues that keep finished jobs and on
 * queues that delete them as they end. No rowlock process and no HTTP; the REST twin of this
 * program is test_queue_conformance_http.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "db/queues.h"
#include "harness.h"
#include "harness_db.h"
#include "queue_conformance.h"

#define POOL_SIZE 10 /* the concurrent case runs 8 workers */

/* The protocol outcome of a db/ call; anything else is reported and becomes QC_ERROR. */
static enum qc_outcome outcome_of(const char *what, enum db_status st, enum db_queue_verdict v,
                                  const struct db_error *err)
{
    if (st != DB_OK) {
        fprintf(stderr, "%s: %s (SQLSTATE %s) %s\n", what, db_status_name(st), err->sqlstate,
                err->message);
        return QC_ERROR;
    }
    switch (v) {
    case DB_Q_OK:
    case DB_Q_CREATED:
    case DB_Q_DUPLICATE:
        return QC_OK;
    case DB_Q_OWNER_MISMATCH:
        return QC_OWNER_MISMATCH;
    case DB_Q_FENCE_MISMATCH:
        return QC_FENCE_MISMATCH;
    case DB_Q_LEASE_EXPIRED:
        return QC_LEASE_EXPIRED;
    case DB_Q_JOB_TERMINAL:
        return QC_TERMINAL;
    case DB_Q_JOB_CANCELLED:
        return QC_CANCELLED;
    case DB_Q_JOB_NOT_FOUND:
        return QC_NOT_FOUND;
    default:
        fprintf(stderr, "%s: verdict %s\n", what, db_queue_verdict_name(v));
        return QC_ERROR;
    }
}

/* Kept jobs follow retention_seconds (a day); deleted ones are DB_RETENTION_DELETE in each
 * final state. */
static enum qc_outcome c_create_queue(void *ctx, const char *queue, enum qc_retention retention,
                                      int max_attempts, int lease_seconds,
                                      double backoff_base_seconds, double backoff_max_seconds)
{
    int final = retention == QC_KEPT ? DB_RETENTION_INHERIT : DB_RETENTION_DELETE;
    struct db_queue_config cfg = {.max_attempts = max_attempts,
                                  .lease_seconds = lease_seconds,
                                  .backoff_base_seconds = backoff_base_seconds,
                                  .backoff_max_seconds = backoff_max_seconds,
                                  .retention_seconds = 86400,
                                  .succeeded_retention_seconds = final,
                                  .failed_retention_seconds = final,
                                  .cancelled_retention_seconds = final,
                                  .dedupe_window_seconds = 0};
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queues_put(ctx, queue, &cfg, &q, &v, &err);
    return outcome_of("db_queues_put", st, v, &err);
}

static enum qc_outcome c_enqueue(void *ctx, const char *queue, const char *payload,
                                 const char *dedupe_key, double delay_seconds, int priority,
                                 int64_t *id, int *duplicate)
{
    struct db_job_in in = {.payload = payload,
                           .dedupe_key = dedupe_key,
                           .delay_seconds = delay_seconds,
                           .priority = priority};
    struct db_job_ref ref = {.verdict = DB_Q_OK};
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_jobs_enqueue(ctx, queue, &in, 1, &ref, &v, &err);
    enum qc_outcome o = outcome_of("db_jobs_enqueue", st, v, &err);
    if (o == QC_OK && ref.verdict != DB_Q_CREATED && ref.verdict != DB_Q_DUPLICATE) {
        fprintf(stderr, "db_jobs_enqueue: job verdict %s\n", db_queue_verdict_name(ref.verdict));
        o = QC_ERROR;
    }
    *id = ref.id;
    *duplicate = ref.verdict == DB_Q_DUPLICATE;
    return o;
}

static enum qc_outcome c_claim(void *ctx, const char *queue, const char *owner, int max_jobs,
                               int lease_seconds, struct qc_lease *out, size_t *n)
{
    struct db_claimed *got = calloc((size_t)max_jobs, sizeof(*got));
    enum db_queue_verdict v = DB_Q_OK;
    struct db_error err;
    *n = 0;
    if (got == NULL)
        return QC_ERROR;
    size_t k = 0;
    enum db_status st =
        db_leases_claim(ctx, queue, owner, max_jobs, lease_seconds, 0, got, &k, &v, &err);
    enum qc_outcome o = outcome_of("db_leases_claim", st, v, &err);
    for (size_t i = 0; o == QC_OK && i < k; i++)
        out[i] = (struct qc_lease){got[i].id, got[i].fence, got[i].attempt};
    if (o == QC_OK)
        *n = k;
    db_claimed_clear(got, k);
    free(got);
    return o;
}

static enum qc_outcome c_heartbeat(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                   int64_t fence, int lease_seconds)
{
    struct db_lease l = {job_id, owner, fence};
    char expires[DB_TIME_TEXT];
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st =
        db_leases_heartbeat(ctx, queue, &l, lease_seconds, "{\"step\": 1}", expires, &v, &err);
    return outcome_of("db_leases_heartbeat", st, v, &err);
}

static enum qc_outcome c_complete(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                  int64_t fence)
{
    struct db_lease l = {job_id, owner, fence};
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_leases_complete(ctx, queue, &l, "{\"done\": true}", &v, &err);
    return outcome_of("db_leases_complete", st, v, &err);
}

static enum qc_outcome c_fail(void *ctx, const char *queue, int64_t job_id, const char *owner,
                              int64_t fence, int retry)
{
    struct db_lease l = {job_id, owner, fence};
    char state[DB_JOB_STATE_TEXT];
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st =
        db_leases_fail(ctx, queue, &l, "{\"error\": \"conformance\"}", retry, state, &v, &err);
    return outcome_of("db_leases_fail", st, v, &err);
}

static enum qc_outcome c_handback(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                  int64_t fence)
{
    struct db_lease l = {job_id, owner, fence};
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_leases_handback(ctx, queue, &l, &v, &err);
    return outcome_of("db_leases_handback", st, v, &err);
}

static enum qc_outcome c_release(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                 int64_t fence)
{
    struct db_lease l = {job_id, owner, fence};
    char state[DB_JOB_STATE_TEXT];
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_leases_release(ctx, queue, &l, state, &v, &err);
    return outcome_of("db_leases_release", st, v, &err);
}

/* Whether a job's last error (JSON text or NULL) is a cancel's: {"cancelled": true}. */
static int last_error_cancelled(const char *last_error)
{
    json_t *e = last_error ? json_loads(last_error, JSON_DECODE_ANY, NULL) : NULL;
    int cancelled = json_is_true(json_object_get(e, "cancelled"));
    json_decref(e);
    return cancelled;
}

static enum qc_outcome c_get_job(void *ctx, const char *queue, int64_t job_id, struct qc_job *out)
{
    struct db_job j;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_jobs_get(ctx, queue, job_id, &j, &v, &err);
    enum qc_outcome o = outcome_of("db_jobs_get", st, v, &err);
    if (o == QC_OK) {
        snprintf(out->state, sizeof(out->state), "%s", j.state);
        out->attempts = j.attempts;
        out->fence = j.fence;
        out->nhistory = j.nhistory;
        out->cancelled = last_error_cancelled(j.last_error);
        for (size_t i = 0; i < j.nhistory && i < QC_HISTORY_MAX; i++) {
            struct qc_attempt *a = &out->history[i];
            a->attempt = j.history[i].attempt;
            a->fence = j.history[i].fence;
            snprintf(a->owner, sizeof(a->owner), "%s", j.history[i].owner);
            snprintf(a->outcome, sizeof(a->outcome), "%s", j.history[i].outcome);
        }
    }
    db_job_clear(&j);
    return o;
}

static enum qc_outcome c_cancel(void *ctx, const char *queue, int64_t job_id)
{
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_jobs_cancel(ctx, queue, job_id, &v, &err);
    return outcome_of("db_jobs_cancel", st, v, &err);
}

/* Each item's verdict becomes its outcome; the call's own is the request's. */
static enum qc_outcome c_complete_batch(void *ctx, const char *queue, const char *owner,
                                        struct qc_settle *items, size_t n)
{
    struct db_settlement *s = calloc(n, sizeof(*s));
    enum db_queue_verdict v = DB_Q_OK;
    struct db_error err;
    if (s == NULL)
        return QC_ERROR;
    for (size_t i = 0; i < n; i++)
        s[i] = (struct db_settlement){
            {items[i].job_id, owner, items[i].fence}, "{\"done\": true}", DB_Q_OK};
    enum db_status st = db_leases_complete_batch(ctx, queue, s, n, &v, &err);
    enum qc_outcome o = outcome_of("db_leases_complete_batch", st, v, &err);
    for (size_t i = 0; o == QC_OK && i < n; i++)
        items[i].outcome = outcome_of("db_leases_complete_batch item", DB_OK, s[i].verdict, &err);
    free(s);
    return o;
}

int main(void)
{
    struct db_pool *pool = NULL;
    int failed = 1;
    if (th_db_open("qconf_c", POOL_SIZE, &pool, NULL) == 0) {
        const struct qc_impl impl = {
            .name = "c_api",
            .ctx = pool,
            .create_queue = c_create_queue,
            .enqueue = c_enqueue,
            .claim = c_claim,
            .heartbeat = c_heartbeat,
            .complete = c_complete,
            .fail_lease = c_fail,
            .handback = c_handback,
            .release = c_release,
            .get_job = c_get_job,
            .cancel = c_cancel,
            .complete_batch = c_complete_batch,
            .cancelled_state = 1,
        };
        int kept = qc_run("queue_conformance_c_api", &impl, QC_KEPT);
        int deleted = qc_run("queue_conformance_c_api", &impl, QC_DELETED);
        failed = kept != 0 || deleted != 0;
    }
    th_db_close(pool, NULL);
    return failed;
}
