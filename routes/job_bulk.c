/* REST routes of the bulk operator actions on a queue's jobs: POST /queues/{queue}/jobs:retry and
 * POST /queues/{queue}/jobs:cancel. Each call parses a filter, changes one page of jobs through
 * one db/job_bulk.c workflow (one transaction) and answers the jobs it changed with the next
 * page's cursor; the client pages. The route rows and the counter are in routes/queues.c. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "db/queues.h"
#include "routes/json_util.h"
#include "routes/queues.h"
#include "routes/routes.h"
#include "service/app.h"
#include "service/metrics.h"

/* What each action applies to: its states (a filter's state is one of them) and its name. */
struct bulk_action {
    const char *name;      /* "retry", "cancel": the counter's action label */
    const char *changed;   /* the answer's count member */
    const char *states[2]; /* the states a filter may name */
    enum db_status (*page)(struct db_pool *, const char *, const struct db_job_filter *,
                           struct db_job_page *, enum db_queue_verdict *, struct db_error *);
};
static const struct bulk_action bulk_retry = {
    "retry", "retried", {"failed", "cancelled"}, db_jobs_retry_page};
static const struct bulk_action bulk_cancel = {
    "cancel", "cancelled", {"pending", "processing"}, db_jobs_cancel_page};

/* A string member (absent or null: NULL) into *s. 1, or 0 with why. */
static int string_member(json_t *b, const char *name, const char **s, char *why, size_t size)
{
    json_t *v = json_object_get(b, name);
    *s = json_string_value(v);
    if (v == NULL || json_is_null(v) || json_is_string(v))
        return 1;
    snprintf(why, size, "\"%s\" is a string (or null)", name);
    return 0;
}

/* The body's filter into f. 1, or 0 with the broken rule in why. */
static int filter_parse(json_t *b, const struct bulk_action *a, struct db_job_filter *f, char *why,
                        size_t size)
{
    static const char *const allowed[] = {"state", "concurrency_key", "limit", "after", NULL};
    long long limit, after;
    if (!json_is_object(b)) {
        snprintf(why, size,
                 "the body is a JSON object: {\"state\", \"concurrency_key\", "
                 "\"limit\", \"after\"}, each optional");
        return 0;
    }
    if (!route_only_members(b, allowed, why, size) ||
        !route_int_member(b, "limit", 1, DB_JOB_PAGE_MAX, 100, 0, &limit, why, size) ||
        !route_int_member(b, "after", 0, INT64_MAX, 0, 0, &after, why, size) ||
        !string_member(b, "state", &f->state, why, size) ||
        !string_member(b, "concurrency_key", &f->concurrency_key, why, size))
        return 0;
    if (f->state != NULL && strcmp(f->state, a->states[0]) != 0 &&
        strcmp(f->state, a->states[1]) != 0) {
        snprintf(why, size, "\"state\" of jobs:%s is %s or %s (left out: both)", a->name,
                 a->states[0], a->states[1]);
        return 0;
    }
    char kwhy[160];
    if (f->concurrency_key != NULL && !route_key_ok(f->concurrency_key, kwhy, sizeof(kwhy))) {
        snprintf(why, size, "\"concurrency_key\": %s", kwhy);
        return 0;
    }
    f->limit = (int)limit;
    f->after = after;
    return 1;
}

/* {"<changed>": n, "job_ids": [...], "next": cursor or null}; counts the jobs changed. */
static enum svc_outcome bulk_render(struct svc_request *req, const char *queue,
                                    const struct bulk_action *a, const struct db_job_page *p)
{
    json_t *ids = json_array();
    for (size_t i = 0; i < p->n && ids != NULL; i++)
        ids = queue_appended(ids, json_integer(p->ids[i]));
    if (p->n > 0) {
        char labels[200];
        snprintf(labels, sizeof(labels), "%s\x1f%s", queue, a->name);
        svc_counter_vec_add(queue_m_bulk, labels, p->n);
    }
    json_t *next = p->next > 0 ? json_integer(p->next) : json_null();
    return svc_reply_json(
        req, 200,
        json_pack("{s:I, s:o, s:o}", a->changed, (json_int_t)p->n, "job_ids", ids, "next", next));
}

static enum svc_outcome bulk_action(struct svc_request *req, const struct bulk_action *a)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct db_job_filter f = {0};
    char why[200];
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL)
        return out;
    if (!filter_parse(svc_req_json(req), a, &f, why, sizeof(why)))
        return svc_reply_problem(req, QUEUE_P(INVALID_FILTER), "%s", why);
    struct db_job_page p;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = a->page(app->pool, queue, &f, &p, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, queue, v, 0);
    if (a == &bulk_retry && p.n > 0)
        queue_wake(req, queue, (long)p.n);
    else
        queue_wake_limited(req, queue, (long)p.n); /* running jobs cancelled free slots */
    out = bulk_render(req, queue, a, &p);
    db_job_page_clear(&p);
    return out;
}

enum svc_outcome route_jobs_retry_bulk(struct svc_request *req)
{
    return bulk_action(req, &bulk_retry);
}

enum svc_outcome route_jobs_cancel_bulk(struct svc_request *req)
{
    return bulk_action(req, &bulk_cancel);
}
