/* REST routes of leases: claims (long-polling for work), the fenced lease writes (heartbeat,
 * complete, fail, hand back, release) and batched settlements. Each validates, calls one
 * db/leases.c workflow and maps its verdict to a status. Part of the queues family
 * (routes/queues.c holds its route table). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/queues.h"
#include "routes/effects.h"
#include "routes/json_util.h"
#include "routes/queues.h"
#include "service/app.h"
#include "service/buf.h"
#include "service/jpage.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/utf8.h"

/* POST /queues/{queue}/leases: who claims how many, for how long, waiting how long. */
struct claim_req {
    const char *owner;
    long long max_jobs, lease, wait;
};

/* 0, or -1 after replying 400. */
static int claim_parse(struct svc_request *req, struct claim_req *c, enum svc_outcome *out)
{
    struct svc_app *app = svc_req_app(req);
    json_t *b = svc_req_json(req);
    static const char *const allowed[] = {"owner", "max_jobs", "lease_seconds", "wait_seconds",
                                          NULL};
    char why[160] = "the body must be a JSON object";
    if (json_is_object(b) && route_only_members(b, allowed, why, sizeof(why)) &&
        queue_owner_member(b, &c->owner, why, sizeof(why)) &&
        route_int_member(b, "max_jobs", 1, DB_QUEUE_BATCH_MAX, 1, 0, &c->max_jobs, why,
                         sizeof(why)) &&
        route_int_member(b, "lease_seconds", 1, 86400 * 7, 0, 0, &c->lease, why, sizeof(why)) &&
        route_int_member(b, "wait_seconds", 0, app->config->max_wait_s, 0, 0, &c->wait, why,
                         sizeof(why)))
        return 0;
    *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE), "%s", why);
    return -1;
}

/* The claimed jobs, each payload spliced as stored, and the owner; counts the claims. */
static enum svc_outcome claim_render(struct svc_request *req, const char *queue, const char *owner,
                                     const struct db_claimed *claimed, size_t n)
{
    size_t reclaimed = 0;
    struct svc_jpage page;
    svc_jpage_begin(&page, "leases", (size_t)queue_budget(req));
    /* every job claimed is answered: the statement already kept the claim within the budget */
    for (size_t i = 0; i < n; i++) {
        const struct db_claimed *c = &claimed[i];
        reclaimed += c->reclaimed != 0;
        struct svc_jpage_raw payload = {"payload", c->payload, c->payload ? strlen(c->payload) : 0};
        json_t *item =
            json_pack("{s:I, s:I, s:i, s:i, s:s, s:i}", "job_id", (json_int_t)c->id, "fence",
                      (json_int_t)c->fence, "attempt", c->attempt, "priority", c->priority,
                      "lease_expires_at", c->lease_expires_at, "lease_seconds", c->lease_seconds);
        if (c->concurrency_key != NULL)
            item = queue_with(item, "concurrency_key", json_string(c->concurrency_key));
        svc_jpage_item(&page, item, &payload, 1);
    }
    svc_counter_vec_add(queue_m_claims, queue, n);
    if (reclaimed)
        svc_counter_vec_add(queue_m_reclaims, queue, reclaimed);
    return queue_page_reply(req, &page, json_pack("{s:s}", "owner", owner), "the claimed leases");
}

enum svc_outcome route_leases_claim(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct claim_req c;
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL || claim_parse(req, &c, &out) != 0 ||
        svc_poll_admit(req, (double)c.wait, &out))
        return out;
    struct svc_poll poll = svc_poll_begin(req, (double)c.wait);
    struct db_claimed *claimed = calloc((size_t)c.max_jobs, sizeof(*claimed));
    if (claimed == NULL)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
    size_t n = 0;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_leases_claim(app->pool, queue, c.owner, (int)c.max_jobs, (int)c.lease,
                                        app->config->response_budget, claimed, &n, &v, &err);
    char channel[SVC_CHANNEL_MAX];
    if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, queue, v, 0);
    else if (n == 0 && svc_poll_may_wait(req, &poll))
        out = svc_poll_wait(req, &poll, queue_channel(queue, channel, sizeof(channel)));
    else
        out = claim_render(req, queue, c.owner, claimed, n);
    db_claimed_clear(claimed, n);
    free(claimed);
    return out;
}

enum lease_op { OP_HEARTBEAT, OP_COMPLETE, OP_FAIL, OP_HANDBACK, OP_RELEASE };

/* A fenced write on one lease: PATCH /queues/{queue}/leases/{job_id} (heartbeat), or POST to
 * its /complete, /fail, /handback or /release. */
struct lease_req {
    enum lease_op op;
    const char *queue;
    struct db_lease l;
    long long lease;         /* heartbeat: the new lease_seconds (0: the queue's) */
    int retry;               /* fail: back to pending when attempts are left */
    char *text;              /* progress, result or error as JSON text (owned), NULL when absent */
    struct route_effects fx; /* complete: its enqueue and produce (routes/effects.c), owned */
};

/* The body's members of each operation, and the one of them stored as JSON text (by op). */
static const char *const lease_allowed[][7] = {
    [OP_HEARTBEAT] = {"owner", "fence", "lease_seconds", "progress", NULL},
    [OP_COMPLETE] = {"owner", "fence", "result", "enqueue", "produce", NULL},
    [OP_FAIL] = {"owner", "fence", "error", "retry", NULL},
    [OP_HANDBACK] = {"owner", "fence", NULL},
    [OP_RELEASE] = {"owner", "fence", NULL},
};
static const char *const lease_member[] = {"progress", "result", "error", NULL, NULL};

/* Validates the path and body into w (w->text is w's). 0, or -1 after replying. */
static int lease_parse(struct svc_request *req, struct lease_req *w, enum svc_outcome *out)
{
    w->l.job_id = queue_job_params(req, "job_id", &w->queue, out);
    if (w->l.job_id == 0)
        return -1;
    json_t *b = svc_req_json(req);
    long long fence;
    char why[160] = "the body must be a JSON object";
    json_t *retry = json_object_get(b, "retry");
    if (!json_is_object(b) || !route_only_members(b, lease_allowed[w->op], why, sizeof(why)) ||
        !queue_owner_member(b, &w->l.owner, why, sizeof(why)) ||
        !route_int_member(b, "fence", 1, INT64_MAX, 0, 0, &fence, why, sizeof(why)) ||
        !route_int_member(b, "lease_seconds", 1, 86400 * 7, 0, 0, &w->lease, why, sizeof(why)))
        *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE), "%s", why);
    else if (fence == 0)
        *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE),
                                 "\"fence\" (from the claim) is required");
    else if (retry != NULL && !json_is_boolean(retry))
        *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE), "\"retry\" is true or false");
    else if (lease_member[w->op] != NULL &&
             queue_member_text(b, lease_member[w->op], &w->text) != 0)
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the \"%s\"",
                                 lease_member[w->op]);
    else {
        w->l.fence = fence;
        w->retry = retry == NULL || json_is_true(retry);
        return 0;
    }
    return -1;
}

/* Runs the operation's workflow; info (DB_TIME_TEXT bytes) gets the new expiry or state. A
 * completion's effects commit with it, or neither does. */
static enum db_status lease_call(struct db_pool *pool, struct lease_req *w, char *info,
                                 enum db_queue_verdict *v, struct db_error *err)
{
    switch (w->op) {
    case OP_HEARTBEAT:
        return db_leases_heartbeat(pool, w->queue, &w->l, (int)w->lease, w->text, info, v, err);
    case OP_COMPLETE:
        return w->fx.any ? db_leases_complete_fx(pool, w->queue, &w->l, w->text, &w->fx.db, v, err)
                         : db_leases_complete(pool, w->queue, &w->l, w->text, v, err);
    case OP_FAIL:
        return db_leases_fail(pool, w->queue, &w->l, w->text, w->retry, info, v, err);
    case OP_HANDBACK:
        return db_leases_handback(pool, w->queue, &w->l, v, err);
    case OP_RELEASE:
        return db_leases_release(pool, w->queue, &w->l, info, v, err);
    }
    return DB_OK;
}

/* The accepted write: the job and fence, with the new expiry (heartbeat) or state, and what a
 * completion's effects did. */
static enum svc_outcome lease_render(struct svc_request *req, const struct lease_req *w,
                                     const char *info)
{
    json_t *res =
        json_pack("{s:I, s:I}", "job_id", (json_int_t)w->l.job_id, "fence", (json_int_t)w->l.fence);
    const char *state = info;
    switch (w->op) {
    case OP_HEARTBEAT:
        return svc_reply_json(req, 200, queue_with(res, "lease_expires_at", json_string(info)));
    case OP_COMPLETE:
        svc_counter_vec_add(queue_m_completions, w->queue, 1);
        state = "succeeded";
        queue_wake_limited(req, w->queue, 1);
        if (w->fx.any) {
            route_effects_done(req, &w->fx);
            res = queue_with(res, "effects", route_effects_json(&w->fx));
        }
        break;
    case OP_FAIL:
        svc_counter_vec_add(queue_m_failures, w->queue, 1);
        queue_wake_limited(req, w->queue, 1);
        break;
    case OP_HANDBACK:
    case OP_RELEASE:
        state = w->op == OP_HANDBACK ? "pending" : info;
        queue_wake(req, w->queue, 1);
        break;
    }
    return svc_reply_json(req, 200, queue_with(res, "state", json_string(state)));
}

static enum svc_outcome lease_write(struct svc_request *req, enum lease_op op)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct lease_req w = {.op = op};
    if (lease_parse(req, &w, &out) != 0)
        return out;
    if (op == OP_COMPLETE && route_effects_parse(req, svc_req_json(req), &w.fx, &out) != 0) {
        route_effects_free(&w.fx);
        free(w.text);
        return out;
    }
    enum db_queue_verdict v = DB_Q_OK;
    struct db_error err;
    char info[DB_TIME_TEXT] = "";
    enum db_status st = lease_call(app->pool, &w, info, &v, &err);
    free(w.text);
    if (st == DB_OK && v != DB_Q_OK)
        queue_count_rejection(w.queue, v);
    if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, w.queue, v, w.l.job_id);
    else if (w.fx.db.refused != DB_FX_OK)
        out = route_effects_refused(req, &w.fx);
    else
        out = lease_render(req, &w, info);
    route_effects_free(&w.fx);
    return out;
}

enum svc_outcome route_lease_heartbeat(struct svc_request *req)
{
    return lease_write(req, OP_HEARTBEAT);
}

enum svc_outcome route_lease_complete(struct svc_request *req)
{
    return lease_write(req, OP_COMPLETE);
}

enum svc_outcome route_lease_fail(struct svc_request *req)
{
    return lease_write(req, OP_FAIL);
}

enum svc_outcome route_lease_handback(struct svc_request *req)
{
    return lease_write(req, OP_HANDBACK);
}

enum svc_outcome route_lease_release(struct svc_request *req)
{
    return lease_write(req, OP_RELEASE);
}

/* Parses item i of a settlement into s[i]; owner defaults to the body's, and a job already in
 * s[0..i) is refused. The result's text is malloc'd into *result (the caller frees it). */
static enum parsed parse_settlement(json_t *it, const char *owner, struct db_settlement *s,
                                    size_t i, char **result, char *why, size_t size)
{
    static const char *const allowed[] = {"job_id", "fence", "owner", "result", NULL};
    long long id, fence;
    *result = NULL;
    if (!json_is_object(it)) {
        snprintf(why, size, "an item is a JSON object");
        return PARSE_INVALID;
    }
    if (!route_only_members(it, allowed, why, size) ||
        !route_int_member(it, "job_id", 1, INT64_MAX, 0, 0, &id, why, size) ||
        !route_int_member(it, "fence", 1, INT64_MAX, 0, 0, &fence, why, size))
        return PARSE_INVALID;
    if (id == 0 || fence == 0) {
        snprintf(why, size, "an item has \"job_id\" and \"fence\"");
        return PARSE_INVALID;
    }
    if (json_object_get(it, "owner") != NULL && !queue_owner_member(it, &owner, why, size))
        return PARSE_INVALID;
    if (owner == NULL) {
        snprintf(why, size, "an item needs an \"owner\" (its own, or the body's)");
        return PARSE_INVALID;
    }
    for (size_t k = 0; k < i; k++) {
        if (s[k].lease.job_id == id) {
            snprintf(why, size, "job %lld appears twice", id);
            return PARSE_INVALID;
        }
    }
    if (queue_member_text(it, "result", result) != 0)
        return PARSE_UNENCODABLE;
    s[i] = (struct db_settlement){{id, owner, fence}, *result, DB_Q_OK};
    return PARSE_OK;
}

/* POST /queues/{queue}/leases:complete: the items to settle, as the workflow's input. */
struct settle_req {
    size_t n;
    struct db_settlement *s; /* each item's verdict out */
    char **results;          /* the items' result texts, owned */
};

static void settle_free(struct settle_req *b)
{
    for (size_t i = 0; b->results != NULL && i < b->n; i++)
        free(b->results[i]);
    free(b->results);
    free(b->s);
}

/* The items into b->s. 0, or -1 after replying. */
static int settle_items(struct svc_request *req, json_t *items, const char *owner,
                        struct settle_req *b, enum svc_outcome *out)
{
    char why[200];
    for (size_t i = 0; i < b->n; i++) {
        enum parsed p = parse_settlement(json_array_get(items, i), owner, b->s, i, &b->results[i],
                                         why, sizeof(why));
        if (p == PARSE_UNENCODABLE)
            *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR),
                                     "cannot encode the result of item %zu", i);
        else if (p == PARSE_INVALID)
            *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE), "item %zu: %s", i, why);
        if (p != PARSE_OK)
            return -1;
    }
    return 0;
}

/* Validates the body into b (settle_free frees it either way). 0, or -1 after replying. */
static int settle_parse(struct svc_request *req, struct settle_req *b, enum svc_outcome *out)
{
    json_t *body = svc_req_json(req);
    json_t *items = json_object_get(body, "items");
    const char *owner = NULL;
    char why[200] = "the body is {\"owner\": ..., \"items\": [{\"job_id\", \"fence\"}, ...]}";
    static const char *const allowed[] = {"owner", "items", NULL};
    b->n = json_array_size(items);
    if (!json_is_object(body) || !route_only_members(body, allowed, why, sizeof(why)) ||
        (json_object_get(body, "owner") != NULL &&
         !queue_owner_member(body, &owner, why, sizeof(why))) ||
        b->n == 0)
        *out = svc_reply_problem(req, QUEUE_P(INVALID_LEASE), "%s", why);
    else if (b->n > DB_QUEUE_BATCH_MAX)
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a settlement holds at most %d items; this one has %zu",
                                 DB_QUEUE_BATCH_MAX, b->n);
    else if ((b->s = calloc(b->n, sizeof(*b->s))) == NULL ||
             (b->results = calloc(b->n, sizeof(char *))) == NULL)
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
    else
        return settle_items(req, items, owner, b, out);
    return -1;
}

/* Each item's outcome, "completed" or the refusal's name; counts completions and refusals. */
static enum svc_outcome settle_render(struct svc_request *req, const char *queue,
                                      const struct settle_req *b)
{
    json_t *arr = json_array();
    size_t completed = 0;
    for (size_t i = 0; i < b->n; i++) {
        int ok = b->s[i].verdict == DB_Q_OK;
        completed += ok;
        if (!ok)
            queue_count_rejection(queue, b->s[i].verdict);
        arr = queue_appended(
            arr, json_pack("{s:I, s:s}", "job_id", (json_int_t)b->s[i].lease.job_id, "status",
                           ok ? "completed" : db_queue_verdict_name(b->s[i].verdict)));
    }
    svc_counter_vec_add(queue_m_completions, queue, completed);
    queue_wake_limited(req, queue, (long)completed);
    return svc_reply_json(
        req, 200, json_pack("{s:I, s:o}", "completed", (json_int_t)completed, "results", arr));
}

enum svc_outcome route_leases_complete_batch(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct settle_req b = {0};
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL || settle_parse(req, &b, &out) != 0)
        goto done;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_leases_complete_batch(app->pool, queue, b.s, b.n, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, queue, v, 0);
    else
        out = settle_render(req, queue, &b);
done:
    settle_free(&b);
    return out;
}
