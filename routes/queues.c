/* REST routes of leased work queues: /queues, jobs (enqueue, read, list, operator retry and
 * cancel), leases (claim with long-poll, heartbeat, complete, fail, hand-back, release, batch
 * completion). Each handler parses its request (into a struct when it has several parts), calls
 * one db/queues.c workflow and renders the result; the refusal of a fenced write becomes a 409
 * whose code says why, and a value that cannot be encoded a 500 (never a dropped member). Also
 * queue metrics and the janitor pass. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/listener.h"
#include "db/queues.h"
#include "routes/job_graph.h"
#include "routes/json_util.h"
#include "routes/queues.h"
#include "routes/routes.h"
#include "service/app.h"
#include "service/buf.h"
#include "service/gauge_cache.h"
#include "service/jpage.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/utf8.h"

/* The codes only queues answer (registered through the family; listed in openapi.json). */
const struct svc_problem_info queue_problems[QUEUE_PC_COUNT] = {
    [QUEUE_PC_INVALID_JOB] = {"invalid_job", 400, "Invalid job"},
    [QUEUE_PC_INVALID_LEASE] = {"invalid_lease", 400, "Invalid lease request"},
    [QUEUE_PC_QUEUE_NOT_FOUND] = {"queue_not_found", 404, "No such queue"},
    [QUEUE_PC_JOB_NOT_FOUND] = {"job_not_found", 404, "No such job"},
    [QUEUE_PC_LEASE_OWNER_MISMATCH] = {"lease_owner_mismatch", 409, "Lease held by another owner"},
    [QUEUE_PC_LEASE_FENCE_MISMATCH] = {"lease_fence_mismatch", 409, "Stale lease fence"},
    [QUEUE_PC_LEASE_EXPIRED] = {"lease_expired", 409, "Lease expired"},
    [QUEUE_PC_JOB_TERMINAL] = {"job_terminal", 409, "Job already finished"},
    [QUEUE_PC_JOB_CANCELLED] = {"job_cancelled", 409, "Job cancelled"},
    [QUEUE_PC_JOB_NOT_FAILED] = {"job_not_failed", 409, "Job is not failed"},
    [QUEUE_PC_QUEUE_BUSY] = {"queue_busy", 409, "Queue has jobs in processing"},
    [QUEUE_PC_QUEUE_HAS_SCHEDULES] = {"queue_has_schedules", 409, "Schedules target the queue"},
    [QUEUE_PC_KEY_NOT_FOUND] = {"key_not_found", 404, "No limits of its own for this key"},
    [QUEUE_PC_INVALID_FILTER] = {"invalid_filter", 400, "Invalid job filter"},
    [QUEUE_PC_INVALID_DEPENDENCIES] = {"invalid_dependencies", 400, "Invalid dependencies"},
    [QUEUE_PC_DEPENDENCY_CYCLE] = {"dependency_cycle", 400, "Dependencies form a cycle"},
    [QUEUE_PC_UNKNOWN_PARENT] = {"unknown_parent", 400, "No such parent job"},
    [QUEUE_PC_PARENT_FAILED] = {"parent_failed", 409, "Parent failed or cancelled"},
    [QUEUE_PC_TOO_MANY_CHILDREN] = {"too_many_children", 409, "Parent has too many children"},
    [QUEUE_PC_EFFECT_REFUSED] = {"effect_refused", 409, "Effect refused"},
};

static struct svc_counter_vec *m_enqueued, *m_rejections, *m_expired, *m_purged,
    *m_janitor_failures, *m_metrics_failures, *m_janitor_visits;
struct svc_counter_vec *queue_m_claims, *queue_m_reclaims, *queue_m_completions, *queue_m_failures;
struct svc_counter_vec *queue_m_bulk;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
    m_enqueued = svc_counter_vec_new("rowlock_queue_jobs_enqueued_total", "Jobs enqueued", "queue");
    queue_m_claims = svc_counter_vec_new("rowlock_queue_claims_total", "Jobs claimed", "queue");
    queue_m_reclaims = svc_counter_vec_new("rowlock_queue_expired_lease_reclaims_total",
                                           "Jobs claimed from an expired lease", "queue");
    queue_m_completions =
        svc_counter_vec_new("rowlock_queue_completions_total", "Jobs completed", "queue");
    queue_m_failures = svc_counter_vec_new("rowlock_queue_failures_total",
                                           "Fail calls accepted (retried or final)", "queue");
    m_rejections = svc_counter_vec_new("rowlock_queue_fence_rejections_total",
                                       "Lease writes refused, by reason", "queue,reason");
    m_expired =
        svc_counter_vec_new("rowlock_queue_janitor_expired_total",
                            "Expired leases without attempts left moved to failed (or deleted, "
                            "when the queue keeps no failed jobs)",
                            "queue");
    m_purged = svc_counter_vec_new("rowlock_queue_janitor_purged_total",
                                   "Finished jobs purged after their retention", "queue");
    m_janitor_failures = svc_counter_vec_new(
        "rowlock_queue_janitor_failures_total",
        "Janitor purges of a queue that failed (the pass went on with the other queues)", "queue");
    m_janitor_visits = svc_counter_vec_new(
        "rowlock_queue_janitor_visits_total",
        "Queues this process's janitor purged, by outcome: only queues whose upkeep was due "
        "(rowlock.upkeep), claimed so that no other process does the same (expired leases "
        "are found across all queues by one statement a pass, and visit none)",
        "outcome");
    m_metrics_failures = svc_counter_vec_new(
        "rowlock_queue_metrics_failures_total",
        "Scrapes that could not read a queue's gauges (left out; the other queues' were read)",
        "queue");
    queue_m_bulk = svc_counter_vec_new(
        "rowlock_queue_bulk_jobs_total",
        "Jobs changed by bulk operator actions (jobs:retry, jobs:cancel), by action",
        "queue,action");
}

static int route_queues_init(const struct svc_app *app)
{
    (void)app;
    pthread_once(&metrics_once, metrics_init);
    /* one series per queue, up to ROWLOCK_METRICS_MAX_RESOURCES queues (then queue="_other") */
    struct svc_counter_vec *per_queue[] = {
        m_enqueued,   queue_m_claims, queue_m_reclaims, queue_m_completions, queue_m_failures,
        m_rejections, m_expired,      m_purged,         m_janitor_failures,  m_metrics_failures};
    for (size_t i = 0; i < sizeof(per_queue) / sizeof(per_queue[0]); i++)
        svc_counter_vec_bound(per_queue[i]);
    svc_counter_vec_bound(queue_m_bulk);
    return 0;
}

const char *queue_channel(const char *queue, char *buf, size_t size)
{
    return svc_family_channel(&route_queues_family, queue, buf, size);
}

/* Wakes n claims waiting on the queue (-1: every one). */
void queue_wake(struct svc_request *req, const char *queue, long n)
{
    char channel[SVC_CHANNEL_MAX];
    svc_req_wake_n(req, queue_channel(queue, channel, sizeof(channel)), n);
}

/* A settlement freed a slot: in a queue with a limit, a claim waiting on it may now take a
 * job (one that waits for a full key or queue is answered when a slot frees, not at its next
 * re-check). Elsewhere nothing waits for a slot. */
void queue_wake_limited(struct svc_request *req, const char *queue, long n)
{
    if (n > 0 && db_queue_limited_hint(queue))
        queue_wake(req, queue, n);
}

/* ---- validation ---- */

/* The {id} or {job_id} path parameter as a positive integer; 0 after replying 400. */
static int64_t id_param(struct svc_request *req, const char *name, enum svc_outcome *out)
{
    const char *v = svc_req_param(req, name);
    char *end = NULL;
    errno = 0;
    long long id = strtoll(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || id <= 0 || errno == ERANGE) {
        *out =
            svc_reply_problem(req, SVC_P(INVALID_PARAMETER), "%s must be a positive integer", name);
        return 0;
    }
    return id;
}

/* The {queue} path parameter into *queue and the job id parameter name; 0 after replying 400. */
int64_t queue_job_params(struct svc_request *req, const char *name, const char **queue,
                         enum svc_outcome *out)
{
    *queue = route_name_param(req, "queue", out);
    return *queue != NULL ? id_param(req, name, out) : 0;
}

/* "owner": non-empty UTF-8 up to 255 bytes. 1, or 0 with why. */
int queue_owner_member(json_t *b, const char **owner, char *why, size_t size)
{
    *owner = json_string_value(json_object_get(b, "owner"));
    if (*owner == NULL || (*owner)[0] == '\0' || strlen(*owner) > DB_OWNER_MAX ||
        !svc_utf8_valid(*owner, strlen(*owner))) {
        snprintf(why, size, "\"owner\" is a non-empty string of at most %d bytes", DB_OWNER_MAX);
        return 0;
    }
    return 1;
}

/* The JSON text of j's member name into *text (malloc'd, the caller frees it; NULL when the
 * member is absent). 0, or -1 when it cannot be encoded. */
int queue_member_text(json_t *j, const char *name, char **text)
{
    json_t *m = json_object_get(j, name);
    *text = m != NULL ? json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    return m != NULL && *text == NULL ? -1 : 0;
}

/* ---- answers ---- */

/* o with its member name set to v (both stolen). A NULL v (a json_pack or copy that failed)
 * fails the whole value: NULL, which svc_reply_json answers with 500 internal_error. */
json_t *queue_with(json_t *o, const char *name, json_t *v)
{
    if (json_object_set_new(o, name, v) == 0)
        return o;
    json_decref(o);
    return NULL;
}

/* The same for an array's element. */
json_t *queue_appended(json_t *arr, json_t *v)
{
    if (json_array_append_new(arr, v) == 0)
        return arr;
    json_decref(arr);
    return NULL;
}

static enum svc_outcome verdict_problem(struct svc_request *req, const char *queue,
                                        enum db_queue_verdict v, int64_t id)
{
    switch (v) {
    case DB_Q_QUEUE_NOT_FOUND:
        return svc_reply_problem(req, QUEUE_P(QUEUE_NOT_FOUND), "there is no queue %s", queue);
    case DB_Q_JOB_NOT_FOUND:
        return svc_reply_problem(req, QUEUE_P(JOB_NOT_FOUND), "queue %s has no job %" PRId64, queue,
                                 id);
    case DB_Q_OWNER_MISMATCH:
        return svc_reply_problem(req, QUEUE_P(LEASE_OWNER_MISMATCH),
                                 "job %" PRId64 " is not leased to this owner", id);
    case DB_Q_FENCE_MISMATCH:
        return svc_reply_problem(req, QUEUE_P(LEASE_FENCE_MISMATCH),
                                 "job %" PRId64 " was claimed again since this lease (stale fence)",
                                 id);
    case DB_Q_LEASE_EXPIRED:
        return svc_reply_problem(req, QUEUE_P(LEASE_EXPIRED),
                                 "the lease on job %" PRId64 " has expired", id);
    case DB_Q_JOB_TERMINAL:
        return svc_reply_problem(req, QUEUE_P(JOB_TERMINAL), "job %" PRId64 " is already finished",
                                 id);
    case DB_Q_JOB_CANCELLED:
        return svc_reply_problem(req, QUEUE_P(JOB_CANCELLED),
                                 "job %" PRId64 " was cancelled by an operator; stop working on it",
                                 id);
    case DB_Q_NOT_FAILED:
        return svc_reply_problem(req, QUEUE_P(JOB_NOT_FAILED),
                                 "job %" PRId64 " is neither failed nor cancelled; only those are "
                                 "retried",
                                 id);
    case DB_Q_QUEUE_BUSY:
        return svc_reply_problem(req, QUEUE_P(QUEUE_BUSY),
                                 "queue %s has jobs in processing; DELETE with ?force=true "
                                 "deletes them too",
                                 queue);
    case DB_Q_KEY_NOT_FOUND:
        return svc_reply_problem(req, QUEUE_P(KEY_NOT_FOUND),
                                 "this key of queue %s has no limits of its own (it has the "
                                 "queue's key_limits)",
                                 queue);
    case DB_Q_QUEUE_REFERENCED:
        return svc_reply_problem(req, QUEUE_P(QUEUE_HAS_SCHEDULES),
                                 "schedules target queue %s; delete them (or point them at "
                                 "another queue) first",
                                 queue);
    default:
        return svc_reply_problem(req, QUEUE_P(INVALID_JOB), "the database refused a value");
    }
}

/* The answer to a workflow that did not succeed: its database failure (st), else its verdict v
 * on the queue (and job id, 0 when none). */
enum svc_outcome queue_refused(struct svc_request *req, enum db_status st,
                               const struct db_error *err, const char *queue,
                               enum db_queue_verdict v, int64_t id)
{
    return st != DB_OK ? route_db_problem(req, st, err) : verdict_problem(req, queue, v, id);
}

/* Counts a refused lease write by its reason. */
void queue_count_rejection(const char *queue, enum db_queue_verdict v)
{
    if (v != DB_Q_JOB_NOT_FOUND && (v < DB_Q_OWNER_MISMATCH || v > DB_Q_JOB_CANCELLED))
        return;
    char labels[200];
    snprintf(labels, sizeof(labels), "%s\x1f%s", queue, db_queue_verdict_name(v));
    svc_counter_vec_add(m_rejections, labels, 1);
}

/* ---- queues ---- */

/* A retention as the API says it: seconds, 0 for not kept. */
static int kept_seconds(int retention)
{
    return retention == DB_RETENTION_DELETE ? 0 : retention;
}

/* A per-state retention member as parsed (-1: absent) as the workflow takes it. */
static int retention_in(long long v)
{
    return v < 0 ? DB_RETENTION_INHERIT : v == 0 ? DB_RETENTION_DELETE : (int)v;
}

static json_t *queue_json(const struct db_queue *q, const struct db_queue_stats *s)
{
    json_t *j =
        json_pack("{s:s, s:i, s:i, s:f, s:f, s:i, s:i, s:i, s:i, s:i, s:s, s:s}", "name", q->name,
                  "max_attempts", q->cfg.max_attempts, "lease_seconds", q->cfg.lease_seconds,
                  "backoff_base_seconds", q->cfg.backoff_base_seconds, "backoff_max_seconds",
                  q->cfg.backoff_max_seconds, "retention_seconds", q->cfg.retention_seconds,
                  "succeeded_retention_seconds", kept_seconds(q->cfg.succeeded_retention_seconds),
                  "failed_retention_seconds", kept_seconds(q->cfg.failed_retention_seconds),
                  "cancelled_retention_seconds", kept_seconds(q->cfg.cancelled_retention_seconds),
                  "dedupe_window_seconds", q->cfg.dedupe_window_seconds, "created_at",
                  q->created_at, "updated_at", q->updated_at);
    j = queue_with(j, "paused", json_boolean(q->paused_at[0] != '\0'));
    j = queue_with(j, "paused_at", q->paused_at[0] ? json_string(q->paused_at) : json_null());
    j = queue_with(j, "limits", queue_limits_json(&q->cfg.limits));
    j = queue_with(j, "key_limits", queue_limits_json(&q->cfg.key_limits));
    if (s == NULL)
        return j;
    json_t *held = json_object();
    for (int i = 0; i < DB_LIMIT_KINDS; i++)
        held = queue_with(held, db_limit_kind_names[i], json_integer((json_int_t)s->held_back[i]));
    j = queue_with(j, "limits_held_back", held);
    return queue_with(
        j, "counts",
        json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:I}", "waiting", (json_int_t)s->waiting,
                  "pending", (json_int_t)s->pending, "processing", (json_int_t)s->processing,
                  "succeeded", (json_int_t)s->succeeded, "failed", (json_int_t)s->failed,
                  "cancelled", (json_int_t)s->cancelled, "oldest_pending_age_seconds",
                  s->oldest_pending_age_seconds, "dedupe_keys", (json_int_t)s->dedupe_keys));
}

json_t *queue_limits_json(const struct db_queue_limits *l)
{
    json_t *rate = json_null();
    if (l->rate > 0)
        rate =
            json_pack("{s:i, s:f, s:i}", "limit", l->rate, "period_seconds", l->rate_period_seconds,
                      "burst", l->rate_burst > 0 ? l->rate_burst : l->rate);
    json_t *j = json_object();
    j = queue_with(j, "concurrency",
                   l->concurrency > 0 ? json_integer(l->concurrency) : json_null());
    return queue_with(j, "rate", rate);
}

int queue_limits_parse(json_t *obj, const char *name, struct db_queue_limits *l, char *why,
                       size_t size)
{
    memset(l, 0, sizeof(*l));
    json_t *v = json_object_get(obj, name);
    if (v == NULL || json_is_null(v))
        return 1;
    static const char *const allowed[] = {"concurrency", "rate", NULL};
    static const char *const rate_allowed[] = {"limit", "period_seconds", "burst", NULL};
    long long conc, rate, burst;
    double period;
    if (!json_is_object(v)) {
        snprintf(why, size,
                 "\"%s\" is an object: {\"concurrency\": N, \"rate\": {\"limit\": N, "
                 "\"period_seconds\": S, \"burst\": N}}",
                 name);
        return 0;
    }
    if (!route_only_members(v, allowed, why, size) ||
        !route_int_member(v, "concurrency", 1, DB_LIMIT_MAX, 0, 1, &conc, why, size))
        return 0;
    l->concurrency = (int)conc;
    json_t *r = json_object_get(v, "rate");
    if (r == NULL || json_is_null(r))
        return 1;
    if (!json_is_object(r)) {
        snprintf(why, size,
                 "\"%s\".\"rate\" is an object: {\"limit\": N, \"period_seconds\": S, "
                 "\"burst\": N}",
                 name);
        return 0;
    }
    if (!route_only_members(r, rate_allowed, why, size))
        return 0;
    if (json_object_get(r, "limit") == NULL || json_object_get(r, "period_seconds") == NULL) {
        snprintf(why, size, "a rate in \"%s\" has a \"limit\" and a \"period_seconds\"", name);
        return 0;
    }
    if (!route_int_member(r, "limit", 1, DB_LIMIT_MAX, 0, 0, &rate, why, size) ||
        !route_num_member(r, "period_seconds", DB_RATE_PERIOD_MIN, DB_RATE_PERIOD_MAX, 0, &period,
                          why, size) ||
        !route_int_member(r, "burst", 1, DB_LIMIT_MAX, 0, 0, &burst, why, size))
        return 0;
    l->rate = (int)rate;
    l->rate_period_seconds = period;
    l->rate_burst = (int)burst;
    return 1;
}

/* PUT /queues/{queue}'s body: the queue's configuration. 0, or -1 after replying 400. */
static int queue_config_parse(struct svc_request *req, struct db_queue_config *cfg,
                              enum svc_outcome *out)
{
    json_t *b = svc_req_json(req);
    static const char *const allowed[] = {"max_attempts",
                                          "lease_seconds",
                                          "backoff_base_seconds",
                                          "backoff_max_seconds",
                                          "retention_seconds",
                                          "succeeded_retention_seconds",
                                          "failed_retention_seconds",
                                          "cancelled_retention_seconds",
                                          "dedupe_window_seconds",
                                          "limits",
                                          "key_limits",
                                          NULL};
    long long ma, ls, rs, sr, fr, cr, dw;
    struct db_queue_limits limits, key_limits;
    double bb, bm;
    char why[160] = "the body must be a JSON object";
    if (!json_is_object(b) || !route_only_members(b, allowed, why, sizeof(why)) ||
        !route_int_member(b, "max_attempts", 1, 1000000, 5, 0, &ma, why, sizeof(why)) ||
        !route_int_member(b, "lease_seconds", 1, 86400 * 7, 30, 0, &ls, why, sizeof(why)) ||
        !route_num_member(b, "backoff_base_seconds", 0, 86400, 1, &bb, why, sizeof(why)) ||
        !route_num_member(b, "backoff_max_seconds", 0, 86400 * 7, 300, &bm, why, sizeof(why)) ||
        !route_int_member(b, "retention_seconds", 1, DB_RETENTION_MAX, 7 * 86400, 0, &rs, why,
                          sizeof(why)) ||
        /* absent (-1): retention_seconds */
        !route_int_member(b, "succeeded_retention_seconds", 0, DB_RETENTION_MAX, -1, 0, &sr, why,
                          sizeof(why)) ||
        !route_int_member(b, "failed_retention_seconds", 0, DB_RETENTION_MAX, -1, 0, &fr, why,
                          sizeof(why)) ||
        !route_int_member(b, "cancelled_retention_seconds", 0, DB_RETENTION_MAX, -1, 0, &cr, why,
                          sizeof(why)) ||
        !route_int_member(b, "dedupe_window_seconds", 0, DB_DEDUPE_WINDOW_MAX, 0, 0, &dw, why,
                          sizeof(why)) ||
        !queue_limits_parse(b, "limits", &limits, why, sizeof(why)) ||
        !queue_limits_parse(b, "key_limits", &key_limits, why, sizeof(why))) {
        *out = svc_reply_problem(req, ROUTE_P(INVALID_CONFIG), "%s", why);
        return -1;
    }
    *cfg = (struct db_queue_config){.max_attempts = (int)ma,
                                    .lease_seconds = (int)ls,
                                    .backoff_base_seconds = bb,
                                    .backoff_max_seconds = bm,
                                    .retention_seconds = (int)rs,
                                    .succeeded_retention_seconds = retention_in(sr),
                                    .failed_retention_seconds = retention_in(fr),
                                    .cancelled_retention_seconds = retention_in(cr),
                                    .dedupe_window_seconds = (int)dw,
                                    .limits = limits,
                                    .key_limits = key_limits};
    return 0;
}

static enum svc_outcome route_queue_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct db_queue_config cfg;
    const char *name = route_name_param(req, "queue", &out);
    if (name == NULL || queue_config_parse(req, &cfg, &out) != 0)
        return out;
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queues_put(app->pool, name, &cfg, &q, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    return svc_reply_json(req, v == DB_Q_CREATED ? 201 : 200, queue_json(&q, NULL));
}

static enum svc_outcome route_queue_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "queue", &out);
    if (name == NULL)
        return out;
    struct db_queue q;
    struct db_queue_stats s;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queues_get(app->pool, name, &q, &s, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, name, v, 0);
    return svc_reply_json(req, 200, queue_json(&q, &s));
}

/* DELETE /queues/{queue}[?force=true]: the queue and all it held; refused while a job is in
 * processing unless forced. Waiting claims are woken, to answer 404. */
static enum svc_outcome route_queue_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "queue", &out);
    if (name == NULL)
        return out;
    const char *force = svc_req_query(req, "force");
    if (force != NULL && strcmp(force, "true") != 0 && strcmp(force, "false") != 0)
        return svc_reply_problem(req, SVC_P(INVALID_PARAMETER), "force must be true or false");
    int64_t processing = 0;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st =
        db_queues_delete(app->pool, name, force != NULL && force[0] == 't', &processing, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, name, v, 0);
    queue_wake(req, name, -1);
    return svc_reply_json(req, 200,
                          json_pack("{s:s, s:b, s:I}", "name", name, "deleted", 1,
                                    "processing_deleted", (json_int_t)processing));
}

/* POST /queues/{queue}/pause and /resume: while a queue is paused, enqueues go on and claims
 * hand out nothing (a waiting claim keeps waiting); leases already held go on. Both answer the
 * queue as it is; pausing a paused queue keeps when it was first paused. A resume wakes the
 * claims waiting on the queue, in every process. */
static enum svc_outcome queue_pause(struct svc_request *req, int pause)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "queue", &out);
    if (name == NULL)
        return out;
    struct db_queue q;
    int changed = 0;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queues_pause(app->pool, name, pause, &q, &changed, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, name, v, 0);
    if (!pause && changed)
        queue_wake(req, name, -1);
    return svc_reply_json(req, 200, queue_json(&q, NULL));
}

static enum svc_outcome route_queue_pause(struct svc_request *req)
{
    return queue_pause(req, 1);
}

static enum svc_outcome route_queue_resume(struct svc_request *req)
{
    return queue_pause(req, 0);
}

static void queue_one(const struct db_queue *q, const struct db_queue_stats *s, void *ctx)
{
    json_t **arr = ctx;
    *arr = queue_appended(*arr, queue_json(q, s));
}

static enum svc_outcome route_queues_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    long long limit;
    const char *after = NULL;
    if (route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    json_t *arr = json_array();
    struct db_error err;
    enum db_status st = db_queues_list(app->pool, after, (int)limit, queue_one, &arr, &err);
    if (st != DB_OK) {
        json_decref(arr);
        return route_db_problem(req, st, &err);
    }
    size_t n = json_array_size(arr);
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(arr, n - 1), "name"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "queues", arr, "next", next));
}

/* ---- jobs ---- */

/* Parses one job object. The payload's text is malloc'd into *payload (the caller frees it). */
static enum parsed parse_job(json_t *j, struct db_job_in *out, char **payload, char *why,
                             size_t size)
{
    static const char *const allowed[] = {"payload",
                                          "dedupe_key",
                                          "run_at",
                                          "delay_seconds",
                                          "priority",
                                          "max_attempts",
                                          "dedupe_window_seconds",
                                          "concurrency_key",
                                          "ref",
                                          "parents",
                                          "on_parent_failure",
                                          NULL};
    long long prio, ma, win;
    double delay;
    memset(out, 0, sizeof(*out));
    *payload = NULL;
    if (!json_is_object(j)) {
        snprintf(why, size, "a job is a JSON object");
        return PARSE_INVALID;
    }
    if (!route_only_members(j, allowed, why, size) ||
        !route_int_member(j, "priority", -1000000, 1000000, 0, 0, &prio, why, size) ||
        !route_int_member(j, "max_attempts", 1, 1000000, 0, 0, &ma, why, size) ||
        !route_num_member(j, "delay_seconds", 0, 86400.0 * 3650, 0, &delay, why, size) ||
        !route_int_member(j, "dedupe_window_seconds", 0, DB_DEDUPE_WINDOW_MAX, -1, 0, &win, why,
                          size))
        return PARSE_INVALID;
    if (json_object_get(j, "payload") == NULL) {
        snprintf(why, size, "a job has a \"payload\" (any JSON)");
        return PARSE_INVALID;
    }
    json_t *dk = json_object_get(j, "dedupe_key"), *ra = json_object_get(j, "run_at");
    if (dk != NULL && (!json_is_string(dk) || !route_key_ok(json_string_value(dk), why, size))) {
        if (!json_is_string(dk))
            snprintf(why, size, "\"dedupe_key\" is a string");
        return PARSE_INVALID;
    }
    json_t *ck = json_object_get(j, "concurrency_key");
    if (ck != NULL && !json_is_null(ck) &&
        (!json_is_string(ck) || !route_key_ok(json_string_value(ck), why, size))) {
        if (!json_is_string(ck))
            snprintf(why, size, "\"concurrency_key\" is a string");
        return PARSE_INVALID;
    }
    if (ra != NULL && (!json_is_string(ra) || !route_rfc3339_ok(json_string_value(ra)))) {
        snprintf(why, size, "\"run_at\" is an RFC 3339 timestamp string");
        return PARSE_INVALID;
    }
    if (win >= 0 && dk == NULL) {
        snprintf(why, size, "\"dedupe_window_seconds\" holds a \"dedupe_key\": give both");
        return PARSE_INVALID;
    }
    if (ra != NULL && json_object_get(j, "delay_seconds") != NULL) {
        snprintf(why, size, "give \"run_at\" or \"delay_seconds\", not both");
        return PARSE_INVALID;
    }
    if (queue_member_text(j, "payload", payload) != 0)
        return PARSE_UNENCODABLE;
    *out = (struct db_job_in){.payload = *payload,
                              .dedupe_key = json_string_value(dk),
                              .run_at = json_string_value(ra),
                              .delay_seconds = delay,
                              .priority = (int)prio,
                              .max_attempts = (int)ma,
                              .dedupe_window = win < 0    ? 0 /* the queue's */
                                               : win == 0 ? DB_NO_DEDUPE_WINDOW
                                                          : (int)win,
                              .concurrency_key = json_string_value(ck)};
    return PARSE_OK;
}

/* POST /queues/{queue}/jobs: one job, or a batch {"jobs": [...]}, as the workflow's input. */

void queue_enqueue_free(struct queue_enqueue *e)
{
    for (size_t i = 0; e->payloads != NULL && i < e->n; i++)
        free(e->payloads[i]);
    free(e->payloads);
    free(e->jobs);
    free(e->refs);
    free(e->parents);
    route_job_graph_free(&e->graph);
}

/* The jobs' dependencies (routes/job_graph.c) into e->jobs. 0, or -1 after replying. */
static int enqueue_graph(struct svc_request *req, json_t *body, struct queue_enqueue *e,
                         enum svc_outcome *out)
{
    struct route_job_graph_error gerr = {"", NULL};
    switch (route_job_graph_check(e->batch ? e->batch : body, &e->graph, &gerr)) {
    case ROUTE_JOB_GRAPH_OK:
        break;
    case ROUTE_JOB_GRAPH_INVALID:
        *out = svc_reply_problem_ext(req, QUEUE_P(INVALID_DEPENDENCIES), gerr.ext, "%s%s", e->what,
                                     gerr.detail);
        return -1;
    case ROUTE_JOB_GRAPH_CYCLE:
        *out = svc_reply_problem_ext(req, QUEUE_P(DEPENDENCY_CYCLE), gerr.ext, "%s%s", e->what,
                                     gerr.detail);
        return -1;
    default:
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    if (e->graph.nedges == 0)
        return 0;
    if ((e->parents = calloc(e->graph.nedges, sizeof(*e->parents))) == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    for (size_t k = 0; k < e->graph.nedges; k++)
        e->parents[k] = (struct db_job_parent){
            e->graph.edges[k].id, e->graph.edges[k].id ? -1 : (int)e->graph.edges[k].index};
    for (size_t i = 0; i < e->n; i++) {
        const struct route_job_deps *d = &e->graph.jobs[i];
        /* a waiting job is in no dedupe index (its key would be taken twice by its release) */
        if (d->nparents > 0 && e->jobs[i].dedupe_key != NULL) {
            *out = svc_reply_problem_ext(req, QUEUE_P(INVALID_DEPENDENCIES),
                                         json_pack("{s:I}", "job", (json_int_t)i),
                                         "%sjob %zu: a job with parents cannot carry a "
                                         "dedupe_key (give it to a job without parents)",
                                         e->what, i);
            return -1;
        }
        e->jobs[i].nparents = d->nparents;
        e->jobs[i].parents = d->nparents ? e->parents + (d->parents - e->graph.edges) : NULL;
        e->jobs[i].run_on_parent_failure = d->policy == ROUTE_PARENT_RUN;
    }
    return 0;
}

/* Each job of the body (the one, or the batch's) into e. 0, or -1 after replying. */
static int enqueue_jobs(struct svc_request *req, json_t *body, struct queue_enqueue *e,
                        enum svc_outcome *out)
{
    char why[200];
    for (size_t i = 0; i < e->n; i++) {
        json_t *j = e->batch ? json_array_get(e->batch, i) : body;
        enum parsed p = parse_job(j, &e->jobs[i], &e->payloads[i], why, sizeof(why));
        if (p == PARSE_UNENCODABLE)
            *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR),
                                     "cannot encode the payload of job %zu", i);
        else if (p == PARSE_INVALID && e->batch != NULL)
            *out = svc_reply_problem(req, QUEUE_P(INVALID_JOB), "%sjob %zu: %s", e->what, i, why);
        else if (p == PARSE_INVALID)
            *out = svc_reply_problem(req, QUEUE_P(INVALID_JOB), "%s", why);
        if (p != PARSE_OK)
            return -1;
    }
    return 0;
}

/* e->n jobs of e->batch (or the one, body) into e, with their dependencies. 0, or -1 after
 * replying. */
static int enqueue_alloc_parse(struct svc_request *req, json_t *body, struct queue_enqueue *e,
                               enum svc_outcome *out)
{
    if ((e->jobs = calloc(e->n, sizeof(*e->jobs))) == NULL ||
        (e->refs = calloc(e->n, sizeof(*e->refs))) == NULL ||
        (e->payloads = calloc(e->n, sizeof(char *))) == NULL)
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
    else if (enqueue_jobs(req, body, e, out) == 0)
        return enqueue_graph(req, body, e, out);
    return -1;
}

int queue_enqueue_parse_jobs(struct svc_request *req, json_t *jobs, const char *what,
                             struct queue_enqueue *e, enum svc_outcome *out)
{
    e->what = what;
    e->batch = jobs;
    e->n = json_array_size(jobs);
    if (e->n > DB_QUEUE_BATCH_MAX) {
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE), "%sat most %d jobs; these are %zu",
                                 what, DB_QUEUE_BATCH_MAX, e->n);
        return -1;
    }
    return enqueue_alloc_parse(req, NULL, e, out);
}

/* Validates the body into e (queue_enqueue_free frees it either way). 0, or -1 after replying. */
static int enqueue_parse(struct svc_request *req, struct queue_enqueue *e, enum svc_outcome *out)
{
    json_t *body = svc_req_json(req);
    e->what = "";
    e->batch = json_object_get(body, "jobs");
    e->n = json_is_array(e->batch) ? json_array_size(e->batch) : 1;
    if (!json_is_object(body))
        *out = svc_reply_problem(req, QUEUE_P(INVALID_JOB), "the body is a JSON object");
    else if (e->batch != NULL &&
             (!json_is_array(e->batch) || e->n == 0 || json_object_size(body) != 1))
        *out = svc_reply_problem(req, QUEUE_P(INVALID_JOB),
                                 "a batch body is {\"jobs\": [job, ...]} with at least one job");
    else if (e->n > DB_QUEUE_BATCH_MAX)
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a batch holds at most %d jobs; this one has %zu",
                                 DB_QUEUE_BATCH_MAX, e->n);
    else
        return enqueue_alloc_parse(req, body, e, out);
    return -1;
}

/* The enqueued jobs' ids: the one job's {"id", "duplicate"}, or a batch's {"jobs": [...]}; 201
 * when any was created. */
static enum svc_outcome enqueue_render(struct svc_request *req, const struct queue_enqueue *e,
                                       size_t created)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < e->n; i++) {
        const struct db_job_ref *r = &e->refs[i];
        json_t *one = json_pack("{s:I, s:b}", "id", (json_int_t)r->id, "duplicate",
                                r->verdict == DB_Q_DUPLICATE);
        /* a duplicate says what became of its job: its state, and whether it is still kept */
        if (one != NULL && r->verdict == DB_Q_DUPLICATE)
            one = queue_with(
                queue_with(one, "state", r->state[0] ? json_string(r->state) : json_null()), "kept",
                json_boolean(r->kept));
        /* a batch with dependencies says which jobs wait for their parents */
        else if (one != NULL && e->graph.nedges > 0)
            one = queue_with(one, "state", json_string(r->waiting ? "waiting" : "pending"));
        arr = queue_appended(arr, one);
    }
    json_t *res =
        e->batch != NULL ? json_pack("{s:o}", "jobs", arr) : json_incref(json_array_get(arr, 0));
    if (e->batch == NULL)
        json_decref(arr);
    return svc_reply_json(req, created ? 201 : 200, res);
}

void queue_enqueued(struct svc_request *req, const char *queue, size_t n)
{
    svc_counter_vec_add(m_enqueued, queue, n);
    if (n > 0)
        queue_wake(req, queue, (long)n);
}

int queue_enqueue_refusal(enum db_queue_verdict v)
{
    return v == DB_Q_BAD_INPUT || v == DB_Q_UNKNOWN_PARENT || v == DB_Q_PARENT_FAILED ||
           v == DB_Q_TOO_MANY_CHILDREN;
}

enum svc_outcome queue_enqueue_refused(struct svc_request *req, const struct queue_enqueue *e,
                                       enum db_queue_verdict v, const struct db_error *err)
{
    if (v == DB_Q_BAD_INPUT)
        return svc_reply_problem_ext(req, QUEUE_P(INVALID_JOB), route_sqlstate_ext(err),
                                     "the database refused a value of the job (a run_at it "
                                     "cannot read, say)");
    else if (v == DB_Q_UNKNOWN_PARENT)
        return svc_reply_problem_ext(req, QUEUE_P(UNKNOWN_PARENT),
                                     json_pack("{s:I}", "parent", (json_int_t)e->refusal.parent),
                                     "parent %" PRId64 " names no job", e->refusal.parent);
    else if (v == DB_Q_PARENT_FAILED)
        return svc_reply_problem_ext(
            req, QUEUE_P(PARENT_FAILED),
            json_pack("{s:I, s:s}", "parent", (json_int_t)e->refusal.parent, "parent_state",
                      e->refusal.state),
            "parent %" PRId64 " is %s, and a job whose on_parent_failure is \"cancel\" would "
            "only be cancelled: nothing was enqueued",
            e->refusal.parent, e->refusal.state);
    else if (v == DB_Q_TOO_MANY_CHILDREN)
        return svc_reply_problem_ext(req, QUEUE_P(TOO_MANY_CHILDREN),
                                     json_pack("{s:I}", "parent", (json_int_t)e->refusal.parent),
                                     "parent %" PRId64 " would have more than %d children",
                                     e->refusal.parent, DB_JOB_CHILDREN_MAX);
    return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "an enqueue refused as %s",
                             db_queue_verdict_name(v));
}

static enum svc_outcome route_jobs_enqueue(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct queue_enqueue e = {0};
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL || enqueue_parse(req, &e, &out) != 0)
        goto done;
    enum db_queue_verdict v;
    struct db_error err;
    /* after a quiet spell the other processes' claimers hear of it from this transaction */
    char channel[SVC_CHANNEL_MAX], notify[DB_LISTENER_MAX_PAYLOAD + 32];
    queue_channel(queue, channel, sizeof(channel));
    int inline_wake = svc_req_wake_inline(req, channel, (long)e.n, notify, sizeof(notify));
    int notified = 0;
    enum db_status st =
        db_jobs_enqueue_notify(app->pool, queue, e.jobs, e.n, e.refs, inline_wake ? notify : NULL,
                               &notified, &e.refusal, &v, &err);
    size_t created = 0;
    if (st == DB_OK && v == DB_Q_OK)
        for (size_t i = 0; i < e.n; i++)
            created += e.refs[i].verdict == DB_Q_CREATED;
    if (inline_wake) /* the transaction told the other processes, or did not */
        svc_req_wake_inlined(req, channel, (long)created, notified);
    else if (created > 0)
        svc_req_wake_n(req, channel, (long)created);
    if (st == DB_OK && queue_enqueue_refusal(v))
        out = queue_enqueue_refused(req, &e, v, &err);
    else if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, queue, v, 0);
    else {
        svc_counter_vec_add(m_enqueued, queue, created);
        out = enqueue_render(req, &e, created);
    }
done:
    queue_enqueue_free(&e);
    return out;
}

static json_t *str_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? json_string(s) : json_null();
}

/* The ids of a PostgreSQL array's text ("{1,2}"; NULL: none) as a JSON array. */
static json_t *queue_ids_json(const char *text)
{
    json_t *arr = json_array();
    for (const char *p = text; p != NULL && *p != '\0' && arr != NULL;) {
        char *end = NULL;
        long long id = strtoll(p + 1, &end, 10);
        if (end == p + 1)
            break;
        json_array_append_new(arr, json_integer((json_int_t)id));
        p = end;
    }
    return arr;
}

/* A job's members but its stored JSON (payload, progress, result, last_error): see JOB_RAW. */
static json_t *job_env(const struct db_job *j)
{
    json_t *env = json_pack(
        "{s:I, s:s, s:i, s:i, s:i, s:I, s:o, s:o, s:s, s:s, s:s, s:o, s:o}", "id",
        (json_int_t)j->id, "state", j->state, "priority", j->priority, "attempts", j->attempts,
        "max_attempts", j->max_attempts, "fence", (json_int_t)j->fence, "owner",
        str_or_null(j->owner), "lease_expires_at", str_or_null(j->lease_expires_at), "run_at",
        j->run_at, "created_at", j->created_at, "updated_at", j->updated_at, "finished_at",
        str_or_null(j->finished_at), "dedupe_key", str_or_null(j->dedupe_key));
    env = queue_with(env, "concurrency_key", str_or_null(j->concurrency_key));
    env = queue_with(env, "parents", queue_ids_json(j->parents));
    env = queue_with(env, "children", queue_ids_json(j->children));
    env = queue_with(env, "waiting_on", json_integer(j->waiting_on));
    return queue_with(env, "on_parent_failure", str_or_null(j->on_parent_failure));
}

#define JOB_RAW 4

/* The stored JSON texts of a job (payload, progress, result, last_error), spliced after job_env. */
static void job_raw(const struct db_job *j, struct svc_jpage_raw raw[JOB_RAW])
{
    static const char *const names[JOB_RAW] = {"payload", "progress", "result", "last_error"};
    const char *texts[JOB_RAW] = {j->payload, j->progress, j->result, j->last_error};
    for (int i = 0; i < JOB_RAW; i++)
        raw[i] = (struct svc_jpage_raw){names[i], texts[i], texts[i] ? strlen(texts[i]) : 0};
}

static json_t *attempt_json(const struct db_attempt *a)
{
    return json_pack("{s:i, s:I, s:s, s:s, s:o, s:o}", "attempt", a->attempt, "fence",
                     (json_int_t)a->fence, "owner", a->owner, "claimed_at", a->claimed_at,
                     "ended_at", str_or_null(a->ended_at), "outcome", str_or_null(a->outcome));
}

/* A job as GET shows it, as JSON text (the caller frees it; its length in *len), or NULL when out
 * of memory. Its stored JSON is spliced in as PostgreSQL returned it, as in the listing, never
 * parsed: jansson refuses the long runs of digits jsonb writes for numbers such as 1e19. */
static char *job_text(const struct db_job *j, size_t *len)
{
    json_t *h = json_array();
    for (size_t i = 0; i < j->nhistory; i++)
        h = queue_appended(h, attempt_json(&j->history[i]));
    char *history = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    struct svc_jpage_raw raw[JOB_RAW + 1];
    job_raw(j, raw);
    raw[JOB_RAW] = (struct svc_jpage_raw){"history", history, history ? strlen(history) : 0};
    char *text = history ? svc_jpage_object(job_env(j), raw, JOB_RAW + 1, len) : NULL;
    free(history);
    return text;
}

long long queue_budget(struct svc_request *req)
{
    return ((struct svc_app *)svc_req_app(req))->config->response_budget;
}

/* The final states a queue keeps no job of (retention 0), as a phrase into buf: 0 when it keeps
 * jobs of every final state. */
static int not_kept(const struct db_queue_config *q, char *buf, size_t size)
{
    const char *names[] = {"succeeded", "failed", "cancelled"};
    const int ret[] = {q->succeeded_retention_seconds, q->failed_retention_seconds,
                       q->cancelled_retention_seconds};
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < 3; i++)
        if (ret[i] == DB_RETENTION_DELETE && off < size)
            off += (size_t)snprintf(buf + off, size - off, "%s%s", off ? ", " : "", names[i]);
    if (off > 0 && off < size)
        snprintf(buf + off, size - off, " jobs are deleted as they end");
    return off > 0;
}

static enum svc_outcome route_job_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue = NULL;
    int64_t id = queue_job_params(req, "id", &queue, &out);
    if (id == 0)
        return out;
    struct db_job j;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_jobs_get(app->pool, queue, id, &j, &v, &err);
    char *text = NULL;
    size_t len = 0;
    char kept[96];
    if (st == DB_OK && v == DB_Q_JOB_NOT_FOUND && not_kept(&j.queue, kept, sizeof(kept)))
        out = svc_reply_problem(req, QUEUE_P(JOB_NOT_FOUND),
                                "queue %s has no job %" PRId64 ": it never existed, or it "
                                "finished and was not kept (%s)",
                                queue, id, kept);
    else if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, queue, v, id);
    else if ((text = job_text(&j, &len)) == NULL)
        out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the job");
    else
        out = svc_reply_raw(req, 200, "application/json", text, len);
    db_job_clear(&j);
    return out;
}

/* A listing's page: each job's stored JSON spliced as PostgreSQL returned it (svc_jpage). */
struct job_page {
    struct svc_jpage page;
    int64_t last;
};

static void job_one(const struct db_job *j, void *ctx)
{
    struct job_page *p = ctx;
    struct svc_jpage_raw raw[JOB_RAW];
    job_raw(j, raw);
    svc_jpage_item(&p->page, job_env(j), raw, JOB_RAW);
    p->last = j->id;
}

/* Closes a page with the top-level members of tail (stolen) and replies with it; 500 when the
 * page or tail (a json_pack that failed) could not be encoded. */
enum svc_outcome queue_page_reply(struct svc_request *req, struct svc_jpage *page, json_t *tail,
                                  const char *what)
{
    size_t len = 0;
    char *text = tail != NULL ? svc_jpage_finish(page, tail, &len) : NULL;
    if (tail == NULL)
        svc_jpage_free(page);
    if (text == NULL)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode %s", what);
    return svc_reply_raw(req, 200, "application/json", text, len);
}

/* ?state= of a job listing: NULL (any) or one of the states. 0, or -1 after replying. */
static int state_query(struct svc_request *req, const char **state, enum svc_outcome *out)
{
    *state = svc_req_query(req, "state");
    if (*state == NULL || strcmp(*state, "waiting") == 0 || strcmp(*state, "pending") == 0 ||
        strcmp(*state, "processing") == 0 || strcmp(*state, "succeeded") == 0 ||
        strcmp(*state, "failed") == 0 || strcmp(*state, "cancelled") == 0)
        return 0;
    *out =
        svc_reply_problem(req, SVC_P(INVALID_PARAMETER),
                          "state is waiting, pending, processing, succeeded, failed or cancelled");
    return -1;
}

static enum svc_outcome route_jobs_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *state = NULL;
    long long after, limit;
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL || state_query(req, &state, &out) != 0 ||
        route_int_query(req, "after", 0, INT64_MAX, 0, &after, &out) != 0 ||
        route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0)
        return out;
    struct job_page p = {.last = 0};
    svc_jpage_begin(&p.page, "jobs", (size_t)queue_budget(req));
    enum db_queue_verdict v;
    struct db_error err;
    int more = 0;
    enum db_status st = db_jobs_list(app->pool, queue, state, after, (int)limit, queue_budget(req),
                                     job_one, &p, &more, &v, &err);
    if (st != DB_OK || v != DB_Q_OK) {
        svc_jpage_free(&p.page);
        return queue_refused(req, st, &err, queue, v, 0);
    }
    /* a page ends at the limit or at the byte budget; either way the next starts after it */
    json_t *next = p.page.items == (size_t)limit || more ? json_integer(p.last) : json_null();
    return queue_page_reply(req, &p.page, json_pack("{s:o}", "next", next), "the page");
}

/* A page of a job's parents: each with its state and result (spliced as stored). */
struct parent_page {
    struct svc_jpage page;
    int64_t last;
    int full; /* the byte budget ended the page */
};

static void parent_one(const struct db_job_parent_row *p, void *ctx)
{
    struct parent_page *pp = ctx;
    size_t bytes = p->result ? strlen(p->result) : 0;
    if (pp->full || (pp->page.items > 0 && svc_jpage_full(&pp->page, bytes))) {
        pp->full = 1;
        return;
    }
    json_t *env = json_pack("{s:I, s:I, s:o, s:o, s:o}", "position", (json_int_t)p->position, "id",
                            (json_int_t)p->id, "queue", str_or_null(p->queue), "state",
                            str_or_null(p->state), "finished_at", str_or_null(p->finished_at));
    struct svc_jpage_raw raw = {"result", p->result, bytes};
    svc_jpage_item(&pp->page, env, &raw, 1);
    pp->last = p->position;
}

static enum svc_outcome route_job_parents(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue = NULL;
    long long after, limit;
    int64_t id = queue_job_params(req, "id", &queue, &out);
    if (id == 0 || route_int_query(req, "after", 0, INT64_MAX, 0, &after, &out) != 0 ||
        route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0)
        return out;
    struct parent_page p = {.last = 0};
    svc_jpage_begin(&p.page, "parents", (size_t)queue_budget(req));
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st =
        db_jobs_parents(app->pool, queue, id, after, (int)limit, parent_one, &p, &v, &err);
    if (st != DB_OK || v != DB_Q_OK) {
        svc_jpage_free(&p.page);
        return queue_refused(req, st, &err, queue, v, id);
    }
    json_t *next = p.page.items == (size_t)limit || p.full ? json_integer(p.last) : json_null();
    return queue_page_reply(req, &p.page, json_pack("{s:o}", "next", next), "the parents");
}

static enum svc_outcome job_admin(struct svc_request *req, int retry)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue = NULL;
    int64_t id = queue_job_params(req, "id", &queue, &out);
    if (id == 0)
        return out;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = retry ? db_jobs_retry(app->pool, queue, id, &v, &err)
                              : db_jobs_cancel(app->pool, queue, id, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, queue, v, id);
    if (retry)
        queue_wake(req, queue, 1);
    else
        queue_wake_limited(req, queue, 1); /* a running job cancelled frees its slot */
    return svc_reply_json(
        req, 200,
        json_pack("{s:I, s:s}", "id", (json_int_t)id, "state", retry ? "pending" : "cancelled"));
}

static enum svc_outcome route_job_retry(struct svc_request *req)
{
    return job_admin(req, 1);
}

static enum svc_outcome route_job_cancel(struct svc_request *req)
{
    return job_admin(req, 0);
}

/* ---- metrics and janitor ---- */

struct stats_render {
    struct svc_buf *lines[6];
};

static void stats_one(const char *queue, const struct db_queue_stats *s,
                      const struct db_error *failed, void *ctx)
{
    struct stats_render *r = ctx;
    if (s == NULL) {
        svc_counter_vec_add(m_metrics_failures, queue, 1);
        svc_log(SVC_LOG_WARN, "queue gauges could not be read", "queue", queue, "sqlstate",
                failed->sqlstate, "detail", failed->message, NULL);
        return;
    }
    struct svc_buf l;
    svc_buf_init(&l, 1024);
    svc_metrics_label(&l, "queue", queue);
    const char *states[] = {"waiting", "pending", "processing", "succeeded", "failed", "cancelled"};
    int64_t counts[] = {s->waiting,   s->pending, s->processing,
                        s->succeeded, s->failed,  s->cancelled};
    for (int i = 0; i < 6; i++) {
        char labels[1200];
        snprintf(labels, sizeof(labels), "%s,state=\"%s\"", l.data, states[i]);
        svc_metrics_sample(r->lines[0], "rowlock_queue_jobs", labels, (double)counts[i]);
    }
    svc_metrics_sample(r->lines[1], "rowlock_queue_oldest_pending_age_seconds", l.data,
                       s->oldest_pending_age_seconds);
    svc_metrics_sample(r->lines[2], "rowlock_queue_dedupe_keys", l.data, (double)s->dedupe_keys);
    svc_metrics_sample(r->lines[3], "rowlock_queue_paused", l.data, s->paused_since > 0 ? 1 : 0);
    if (s->paused_since > 0)
        svc_metrics_sample(r->lines[4], "rowlock_queue_paused_since_timestamp_seconds", l.data,
                           floor(s->paused_since)); /* whole seconds, printed whole */
    for (int i = 0; i < DB_LIMIT_KINDS; i++) {
        if (s->held_back[i] == 0)
            continue; /* a queue no limit held back has none of these series */
        char labels[1200];
        snprintf(labels, sizeof(labels), "%s,limit=\"%s\"", l.data, db_limit_kind_names[i]);
        svc_metrics_sample(r->lines[5], "rowlock_queue_limit_held_back_total", labels,
                           (double)s->held_back[i]);
    }
    svc_buf_free(&l);
}

/* The per-queue gauges count every job kept in the first ROWLOCK_METRICS_MAX_RESOURCES queues:
 * a scan that grows with the jobs (over 200 ms at 10,000 topics and 1,000 queues after the
 * resources bench), so they are served as service/gauge_cache.h says. The count: the jobs and
 * ages of each queue, the vacuum health, and whether the list of queues could be read. */
static int queue_gauges_count(void *ctx, int budget_ms, struct svc_buf *out, int *ok)
{
    struct svc_app *app = ctx;
    struct svc_buf jobs, ages, keys, paused, since, held;
    svc_buf_init(&held, 16 * 1024 * 1024);
    svc_buf_init(&jobs, 16 * 1024 * 1024);
    svc_buf_init(&ages, 16 * 1024 * 1024);
    svc_buf_init(&keys, 16 * 1024 * 1024);
    svc_buf_init(&paused, 16 * 1024 * 1024);
    svc_buf_init(&since, 16 * 1024 * 1024);
    struct stats_render r = {{&jobs, &ages, &keys, &paused, &since, &held}};
    int64_t dead = 0;
    double oldest = 0;
    struct db_error err;
    enum db_status st = db_queues_stats(app->pool, (int)app->config->metrics_max_resources,
                                        budget_ms, stats_one, &r, &dead, &oldest, &err);
    *ok = st == DB_OK;
    svc_metrics_family(out, "rowlock_queue_jobs", "gauge",
                       "Jobs by queue and state (the first ROWLOCK_METRICS_MAX_RESOURCES queues by "
                       "name)");
    if (*ok && jobs.data)
        svc_buf_append(out, jobs.data, jobs.len);
    svc_metrics_family(out, "rowlock_queue_oldest_pending_age_seconds", "gauge",
                       "Age of the oldest due pending job");
    if (*ok && ages.data)
        svc_buf_append(out, ages.data, ages.len);
    svc_metrics_family(out, "rowlock_queue_dedupe_keys", "gauge",
                       "Dedupe keys held by a dedupe window (dedupe_window_seconds)");
    if (*ok && keys.data)
        svc_buf_append(out, keys.data, keys.len);
    svc_metrics_family(out, "rowlock_queue_paused", "gauge",
                       "1 while the queue is paused (its claims hand out nothing), else 0");
    if (*ok && paused.data)
        svc_buf_append(out, paused.data, paused.len);
    svc_metrics_family(out, "rowlock_queue_paused_since_timestamp_seconds", "gauge",
                       "When a paused queue was paused, seconds since the epoch (paused queues "
                       "only)");
    if (*ok && since.data)
        svc_buf_append(out, since.data, since.len);
    svc_metrics_family(out, "rowlock_queue_limit_held_back_total", "counter",
                       "Due jobs a claim left because a limit of the queue was reached, by limit "
                       "(concurrency, key_concurrency, rate, key_rate), since the queue was "
                       "created (queues a limit held back only)");
    if (*ok && held.data)
        svc_buf_append(out, held.data, held.len);
    svc_metrics_family(out, "rowlock_queue_dead_tuples", "gauge",
                       "Dead tuples in the queue tables (vacuum has not reclaimed them yet)");
    svc_metrics_sample(out, "rowlock_queue_dead_tuples", NULL, (double)dead);
    svc_metrics_family(out, "rowlock_db_oldest_transaction_age_seconds", "gauge",
                       "Age of the oldest transaction holding back vacuum");
    svc_metrics_sample(out, "rowlock_db_oldest_transaction_age_seconds", NULL, oldest);
    svc_buf_free(&jobs);
    svc_buf_free(&ages);
    svc_buf_free(&keys);
    svc_buf_free(&paused);
    svc_buf_free(&since);
    svc_buf_free(&held);
    return st == DB_ERR_TIMEOUT && budget_ms > 0;
}

static struct svc_gauge_cache queue_gauges = SVC_GAUGE_CACHE_INIT(
    "rowlock_queue_gauges", "rowlock_queue_jobs and the queue gauges beside it",
    "rowlock_queue_metrics_up",
    "1 when the list of queues and the vacuum health could be read (a queue "
    "whose own gauges could not be read is counted in "
    "rowlock_queue_metrics_failures_total)",
    queue_gauges_count);

static void route_queues_render_metrics(struct svc_buf *b, struct svc_app *app)
{
    svc_gauge_cache_render(&queue_gauges, b, app->config->metrics_sync_ms, app);
    struct db_leases_combined c;
    db_leases_combined_get(&c);
    svc_metrics_family(b, "rowlock_queue_combined_calls_total", "counter",
                       "Claims and settlements by this process, by kind");
    svc_metrics_sample(b, "rowlock_queue_combined_calls_total", "kind=\"claim\"", (double)c.claims);
    svc_metrics_sample(b, "rowlock_queue_combined_calls_total", "kind=\"settlement\"",
                       (double)c.settlements);
    svc_metrics_family(b, "rowlock_queue_combined_transactions_total", "counter",
                       "Transactions that ran them: concurrent claims (settlements) of one queue "
                       "share one");
    svc_metrics_sample(b, "rowlock_queue_combined_transactions_total", "kind=\"claim\"",
                       (double)c.claim_transactions);
    svc_metrics_sample(b, "rowlock_queue_combined_transactions_total", "kind=\"settlement\"",
                       (double)c.settlement_transactions);
    struct db_jobs_deleted d;
    db_jobs_deleted_get(&d);
    svc_metrics_family(b, "rowlock_queue_jobs_deleted_at_end_total", "counter",
                       "Jobs deleted by the statement that finished them, by final state (their "
                       "queue keeps none: retention 0)");
    const struct {
        const char *labels;
        unsigned long long n;
    } deleted[] = {{"state=\"succeeded\"", d.succeeded},
                   {"state=\"failed\"", d.failed},
                   {"state=\"cancelled\"", d.cancelled}};
    for (size_t i = 0; i < sizeof(deleted) / sizeof(deleted[0]); i++)
        svc_metrics_sample(b, "rowlock_queue_jobs_deleted_at_end_total", deleted[i].labels,
                           (double)deleted[i].n);
}

static void janitor_one(const struct db_queue_upkeep *u, void *ctx)
{
    (void)ctx;
    if (u->visited)
        svc_counter_vec_add(m_janitor_visits, u->failed != NULL ? "failed" : "ok", 1);
    if (u->failed != NULL) {
        svc_counter_vec_add(m_janitor_failures, u->queue, 1);
        svc_log(SVC_LOG_WARN, "queue janitor pass failed", "queue", u->queue, "sqlstate",
                u->failed->sqlstate, "detail", u->failed->message, NULL);
        return;
    }
    if (u->expired > 0)
        svc_counter_vec_add(m_expired, u->queue, (uint64_t)u->expired);
    if (u->purged > 0)
        svc_counter_vec_add(m_purged, u->queue, (uint64_t)u->purged);
}

static void route_queues_janitor_pass(void *ctx)
{
    struct svc_app *app = ctx;
    struct db_error err;
    enum db_status st =
        db_queues_janitor(app->pool, (int)app->config->janitor_batch, janitor_one, NULL, &err);
    if (st != DB_OK)
        svc_log(SVC_LOG_WARN, "queue janitor pass failed", "status", db_status_name(st), "detail",
                err.message, NULL);
    /* the gauges' count, when scrapes answer with the last one and one asked since */
    svc_gauge_cache_janitor(&queue_gauges, app);
}

static void route_queues_fini(void)
{
    svc_gauge_cache_reset(&queue_gauges);
}

static const struct svc_route queue_routes[] = {
    {"GET", "/queues", route_queues_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"PUT", "/queues/{queue}", route_queue_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/queues/{queue}", route_queue_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/queues/{queue}", route_queue_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/pause", route_queue_pause, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"POST", "/queues/{queue}/resume", route_queue_resume, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"GET", "/queues/{queue}/keys", route_queue_keys_list, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PUT", "/queues/{queue}/keys/{key}", route_queue_key_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/queues/{queue}/keys/{key}", route_queue_key_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/queues/{queue}/keys/{key}", route_queue_key_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/jobs", route_jobs_enqueue, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/queues/{queue}/jobs", route_jobs_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/queues/{queue}/jobs/{id}", route_job_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/queues/{queue}/jobs/{id}/parents", route_job_parents, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/queues/{queue}/jobs/{id}", route_job_cancel, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"POST", "/queues/{queue}/jobs/{id}/retry", route_job_retry, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"POST", "/queues/{queue}/jobs:retry", route_jobs_retry_bulk, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"POST", "/queues/{queue}/jobs:cancel", route_jobs_cancel_bulk, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_ALWAYS},
    {"POST", "/queues/{queue}/leases", route_leases_claim, SVC_SCOPE_WORK, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/leases:complete", route_leases_complete_batch, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PATCH", "/queues/{queue}/leases/{job_id}", route_lease_heartbeat, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/leases/{job_id}/complete", route_lease_complete, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/leases/{job_id}/fail", route_lease_fail, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/leases/{job_id}/handback", route_lease_handback, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/queues/{queue}/leases/{job_id}/release", route_lease_release, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_queues_family = {
    .name = "queues",
    .resource = "queue",
    .upkeep = &db_queues_upkeep,
    .routes = queue_routes,
    .nroutes = sizeof(queue_routes) / sizeof(queue_routes[0]),
    .problems = queue_problems,
    .nproblems = QUEUE_PC_COUNT,
    .init = route_queues_init,
    .fini = route_queues_fini,
    .render_metrics = route_queues_render_metrics,
    .janitor_pass = route_queues_janitor_pass,
};
