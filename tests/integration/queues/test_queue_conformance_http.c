/* The leased-queue conformance suite (queue_conformance.c) against the REST API: struct qc_impl
 * implemented over HTTP against a real rowlock process, the case table run on queues that keep
 * finished jobs and on queues that delete them as they end (the *_retention_seconds members 0).
 * A refused lease write must be a 409 problem with code lease_owner_mismatch,
 * lease_fence_mismatch, lease_expired or job_terminal, or a 404 job_not_found; any other answer
 * is QC_ERROR. Built as test_queue_conformance_previous_release, it runs against the previous
 * release's binary, which knows no retention per state: kept only. The C-API twin is
 * test_queue_conformance_c.c. */
#include <curl/curl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"
#include "queue_conformance.h"
#ifdef CONFORMANCE_PREVIOUS_RELEASE
#include "schema_fixture.h"
#endif

struct http_ctx {
    int port;
};

/* The problem codes of refused lease writes, with the status each must come with. */
static const struct {
    const char *code;
    long status;
    enum qc_outcome outcome;
} refusals[] = {
    {"lease_owner_mismatch", 409, QC_OWNER_MISMATCH},
    {"lease_fence_mismatch", 409, QC_FENCE_MISMATCH},
    {"lease_expired", 409, QC_LEASE_EXPIRED},
    {"job_terminal", 409, QC_TERMINAL},
    {"job_cancelled", 409, QC_CANCELLED},
    {"job_not_found", 404, QC_NOT_FOUND},
};

/* Sends method path with body (stolen, may be NULL) and maps the answer: QC_OK for a 2xx with a
 * JSON body (r holds it: th_response_free it), a protocol refusal, or QC_ERROR. */
static enum qc_outcome call(const struct http_ctx *c, const char *method, const char *path,
                            json_t *body, struct th_response *r)
{
    int rc = th_http_json(c->port, method, path, body, r);
    json_decref(body);
    if (rc != 0)
        return QC_ERROR;
    if (r->status >= 200 && r->status < 300 && r->json != NULL)
        return QC_OK;
    const char *code = th_problem_code(r);
    for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(code, refusals[i].code) == 0 && r->status == refusals[i].status)
            return refusals[i].outcome;
    fprintf(stderr, "%s %s: unexpected %ld %s\n", method, path, r->status, r->body);
    return QC_ERROR;
}

/* Like call, for requests whose answer body is not needed. */
static enum qc_outcome call_only(const struct http_ctx *c, const char *method, const char *path,
                                 json_t *body)
{
    struct th_response r;
    enum qc_outcome o = call(c, method, path, body, &r);
    th_response_free(&r);
    return o;
}

/* Kept jobs follow the service's default retention; deleted ones have 0 (not kept) in each
 * final state's member, which a kept queue's body does not name at all. */
static enum qc_outcome h_create_queue(void *ctx, const char *queue, enum qc_retention retention,
                                      int max_attempts, int lease_seconds,
                                      double backoff_base_seconds, double backoff_max_seconds)
{
    static const char *const finals[] = {"succeeded_retention_seconds", "failed_retention_seconds",
                                         "cancelled_retention_seconds"};
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_t *body = json_pack("{s:i, s:i, s:f, s:f}", "max_attempts", max_attempts, "lease_seconds",
                             lease_seconds, "backoff_base_seconds", backoff_base_seconds,
                             "backoff_max_seconds", backoff_max_seconds);
    for (size_t i = 0; retention == QC_DELETED && i < sizeof(finals) / sizeof(finals[0]); i++)
        json_object_set_new(body, finals[i], json_integer(0));
    return call_only(ctx, "PUT", path, body);
}

static enum qc_outcome h_enqueue(void *ctx, const char *queue, const char *payload,
                                 const char *dedupe_key, double delay_seconds, int priority,
                                 int64_t *id, int *duplicate)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    json_t *body = json_pack("{s:o, s:i}", "payload", json_loads(payload, JSON_DECODE_ANY, NULL),
                             "priority", priority);
    if (dedupe_key != NULL)
        json_object_set_new(body, "dedupe_key", json_string(dedupe_key));
    if (delay_seconds > 0)
        json_object_set_new(body, "delay_seconds", json_real(delay_seconds));
    struct th_response r;
    enum qc_outcome o = call(ctx, "POST", path, body, &r);
    if (o == QC_OK) {
        *id = json_integer_value(json_object_get(r.json, "id"));
        *duplicate = json_is_true(json_object_get(r.json, "duplicate"));
        if (r.status != (*duplicate ? 200 : 201)) {
            fprintf(stderr, "enqueue: status %ld for duplicate=%d\n", r.status, *duplicate);
            o = QC_ERROR;
        }
    }
    th_response_free(&r);
    return o;
}

static enum qc_outcome h_claim(void *ctx, const char *queue, const char *owner, int max_jobs,
                               int lease_seconds, struct qc_lease *out, size_t *n)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    json_t *body = json_pack("{s:s, s:i}", "owner", owner, "max_jobs", max_jobs);
    if (lease_seconds > 0)
        json_object_set_new(body, "lease_seconds", json_integer(lease_seconds));
    struct th_response r;
    enum qc_outcome o = call(ctx, "POST", path, body, &r);
    *n = 0;
    json_t *leases = json_object_get(r.json, "leases");
    if (o == QC_OK && !json_is_array(leases))
        o = QC_ERROR;
    for (size_t i = 0; o == QC_OK && i < json_array_size(leases); i++) {
        json_t *l = json_array_get(leases, i);
        if (i >= (size_t)max_jobs) {
            fprintf(stderr, "claim: %zu leases for max_jobs %d\n", json_array_size(leases),
                    max_jobs);
            o = QC_ERROR;
            break;
        }
        out[i].job_id = json_integer_value(json_object_get(l, "job_id"));
        out[i].fence = json_integer_value(json_object_get(l, "fence"));
        out[i].attempt = (int)json_integer_value(json_object_get(l, "attempt"));
        *n = i + 1;
    }
    th_response_free(&r);
    return o;
}

/* One lease write: POST (or PATCH for the heartbeat) to /queues/{queue}/leases/{id}[/verb]
 * with owner and fence, plus extra members (stolen, may be NULL). */
static enum qc_outcome lease_write(void *ctx, const char *queue, int64_t job_id, const char *verb,
                                   const char *owner, int64_t fence, json_t *extra)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/leases/%" PRId64 "%s%s", queue, job_id,
             verb ? "/" : "", verb ? verb : "");
    json_t *body = extra ? extra : json_object();
    json_object_set_new(body, "owner", json_string(owner));
    json_object_set_new(body, "fence", json_integer(fence));
    return call_only(ctx, verb ? "POST" : "PATCH", path, body);
}

static enum qc_outcome h_heartbeat(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                   int64_t fence, int lease_seconds)
{
    json_t *extra = json_pack("{s:{s:i}}", "progress", "step", 1);
    if (lease_seconds > 0)
        json_object_set_new(extra, "lease_seconds", json_integer(lease_seconds));
    return lease_write(ctx, queue, job_id, NULL, owner, fence, extra);
}

static enum qc_outcome h_complete(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                  int64_t fence)
{
    return lease_write(ctx, queue, job_id, "complete", owner, fence,
                       json_pack("{s:{s:b}}", "result", "done", 1));
}

static enum qc_outcome h_fail(void *ctx, const char *queue, int64_t job_id, const char *owner,
                              int64_t fence, int retry)
{
    return lease_write(
        ctx, queue, job_id, "fail", owner, fence,
        json_pack("{s:{s:s}, s:b}", "error", "error", "conformance", "retry", retry));
}

static enum qc_outcome h_handback(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                  int64_t fence)
{
    return lease_write(ctx, queue, job_id, "handback", owner, fence, NULL);
}

static enum qc_outcome h_release(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                 int64_t fence)
{
    return lease_write(ctx, queue, job_id, "release", owner, fence, NULL);
}

static void history_from_json(json_t *h, struct qc_job *out)
{
    out->nhistory = json_array_size(h);
    for (size_t i = 0; i < out->nhistory && i < QC_HISTORY_MAX; i++) {
        json_t *a = json_array_get(h, i);
        const char *owner = json_string_value(json_object_get(a, "owner"));
        const char *outcome = json_string_value(json_object_get(a, "outcome")); /* null: runs */
        out->history[i].attempt = (int)json_integer_value(json_object_get(a, "attempt"));
        out->history[i].fence = json_integer_value(json_object_get(a, "fence"));
        snprintf(out->history[i].owner, sizeof(out->history[i].owner), "%s", owner ? owner : "");
        snprintf(out->history[i].outcome, sizeof(out->history[i].outcome), "%s",
                 outcome ? outcome : "");
    }
}

static enum qc_outcome h_get_job(void *ctx, const char *queue, int64_t job_id, struct qc_job *out)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/jobs/%" PRId64, queue, job_id);
    struct th_response r;
    enum qc_outcome o = call(ctx, "GET", path, NULL, &r);
    const char *state = json_string_value(json_object_get(r.json, "state"));
    json_t *history = json_object_get(r.json, "history");
    if (o == QC_OK && (state == NULL || !json_is_array(history))) {
        fprintf(stderr, "GET %s: no state or history in %s\n", path, r.body);
        o = QC_ERROR;
    }
    if (o == QC_OK) {
        snprintf(out->state, sizeof(out->state), "%s", state);
        out->attempts = (int)json_integer_value(json_object_get(r.json, "attempts"));
        out->fence = json_integer_value(json_object_get(r.json, "fence"));
        out->cancelled =
            json_is_true(json_object_get(json_object_get(r.json, "last_error"), "cancelled"));
        history_from_json(history, out);
    }
    th_response_free(&r);
    return o;
}

/* DELETE /queues/{queue}/jobs/{id}: a 200 must name the job and its new state, failed. */
static enum qc_outcome h_cancel(void *ctx, const char *queue, int64_t job_id)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/jobs/%" PRId64, queue, job_id);
    struct th_response r;
    enum qc_outcome o = call(ctx, "DELETE", path, NULL, &r);
    const char *state = json_string_value(json_object_get(r.json, "state"));
#ifdef CONFORMANCE_PREVIOUS_RELEASE
    const char *want = "failed"; /* before migration 20 */
#else
    const char *want = "cancelled";
#endif
    if (o == QC_OK && (r.status != 200 || state == NULL || strcmp(state, want) != 0 ||
                       json_integer_value(json_object_get(r.json, "id")) != job_id)) {
        fprintf(stderr, "DELETE %s: unexpected %ld %s\n", path, r.status, r.body);
        o = QC_ERROR;
    }
    th_response_free(&r);
    return o;
}

/* An item's status in a settlement answer: "completed", or a refusal's problem code. */
static enum qc_outcome settle_status(const char *status)
{
    if (status != NULL && strcmp(status, "completed") == 0)
        return QC_OK;
    for (size_t i = 0; status != NULL && i < sizeof(refusals) / sizeof(refusals[0]); i++)
        if (strcmp(status, refusals[i].code) == 0)
            return refusals[i].outcome;
    return QC_ERROR;
}

/* POST /queues/{queue}/leases:complete: a 200 whose results answer the items in order, and whose
 * completed counts the completed ones; else QC_ERROR. */
static enum qc_outcome h_complete_batch(void *ctx, const char *queue, const char *owner,
                                        struct qc_settle *items, size_t n)
{
    char path[256];
    snprintf(path, sizeof(path), "/queues/%s/leases:complete", queue);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:I, s:I}", "job_id", (json_int_t)items[i].job_id,
                                             "fence", (json_int_t)items[i].fence));
    struct th_response r;
    enum qc_outcome o =
        call(ctx, "POST", path, json_pack("{s:s, s:o}", "owner", owner, "items", arr), &r);
    json_t *results = json_object_get(r.json, "results");
    json_int_t completed = 0;
    if (o == QC_OK && (r.status != 200 || json_array_size(results) != n))
        o = QC_ERROR;
    for (size_t i = 0; o == QC_OK && i < n; i++) {
        json_t *it = json_array_get(results, i);
        items[i].outcome = settle_status(json_string_value(json_object_get(it, "status")));
        completed += items[i].outcome == QC_OK;
        if (json_integer_value(json_object_get(it, "job_id")) != items[i].job_id)
            o = QC_ERROR;
    }
    if (o == QC_OK && json_integer_value(json_object_get(r.json, "completed")) != completed)
        o = QC_ERROR;
    if (o == QC_ERROR)
        fprintf(stderr, "POST %s: unexpected %ld %s\n", path, r.status, r.body);
    th_response_free(&r);
    return o;
}

#ifdef CONFORMANCE_PREVIOUS_RELEASE
/* The rolling-upgrade proof (docs/operations/upgrades.md): a database of the released schema gets
 * every expand migration (7 to 11, as a build of schema version 11 applied them), then the previous
 * release's binary (ROWLOCK_TEST_PREV_BINARY, built by deploy/local.sh test from the commit in
 * db/schema/released/) serves it. Migration 12 is a contract step (serves_from 12): the
 * previous release refuses a database past it (test_upgrade_from_released). 0, or -1 after
 * saying why. */
static int start_service(void)
{
    const char *prev = tsf_prev_binary();
    if (prev == NULL)
        return -1;
    if (tsf_create_released("qconf_prev", th_svc_dburl, sizeof(th_svc_dburl)) != 0) {
        fprintf(stderr, "cannot create the database of the released schema\n");
        return -1;
    }
    PGconn *c = th_pg(th_svc_dburl);
    tsf_migrate_to(c, 11);
    PQfinish(c);
    return th_service_start_binary(&th_svc, prev, th_svc_dburl, NULL);
}
#else
static int start_service(void)
{
    return th_svc_start("qconf_http", NULL);
}
#endif

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL); /* before the concurrent case's threads */
    if (start_service() != 0) {
        fprintf(stderr, "cannot start rowlock\n");
        return 1;
    }
    struct http_ctx ctx = {th_svc.port};
    const struct qc_impl impl = {
        .name = "rest_http",
        .ctx = &ctx,
        .create_queue = h_create_queue,
        .enqueue = h_enqueue,
        .claim = h_claim,
        .heartbeat = h_heartbeat,
        .complete = h_complete,
        .fail_lease = h_fail,
        .handback = h_handback,
        .release = h_release,
        .get_job = h_get_job,
        .cancel = h_cancel,
        .complete_batch = h_complete_batch,
#ifndef CONFORMANCE_PREVIOUS_RELEASE
        .cancelled_state = 1,
#endif
    };
#ifdef CONFORMANCE_PREVIOUS_RELEASE
    int failed = qc_run("queue_conformance_previous_release", &impl, QC_KEPT);
#else
    int kept = qc_run("queue_conformance_rest_http", &impl, QC_KEPT);
    int deleted = qc_run("queue_conformance_rest_http", &impl, QC_DELETED);
    int failed = kept != 0 || deleted != 0;
#endif
    int rc = th_service_stop(&th_svc);
    if (rc != 0)
        fprintf(stderr, "rowlock exited with %d\n", rc);
    curl_global_cleanup();
    return failed != 0 || rc != 0;
}
