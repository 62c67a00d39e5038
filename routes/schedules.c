/* /schedules: cron schedules that enqueue a job into a queue at each tick (db/schedules.h).
 * PUT, GET one and the list, DELETE, POST .../fire; the firing pass that runs every
 * SCHEDULE_PASS_MS in each process, wakes the claimers of the queues it filled and counts fires,
 * misfires, skipped ticks and the fire lag for /metrics. */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "db/schedules.h"
#include "db/upkeep.h"
#include "routes/json_util.h"
#include "routes/queues.h"
#include "routes/routes.h"
#include "service/app.h"
#include "service/buf.h"
#include "service/family.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/reply.h"
#include "service/request.h"
#include "service/wake.h"

/* How often each process looks for due ticks: a tick is enqueued within about this long. */
#define SCHEDULE_PASS_MS 200
/* Firing transactions of one pass at most (each takes DB_SCHEDULE_PASS_MAX schedules). */
#define SCHEDULE_PASS_ROUNDS 50
/* How often the upkeep (trimming fire histories) runs, in passes. */
#define SCHEDULE_UPKEEP_EVERY 25

enum schedule_problem { SCHEDULE_PC_INVALID, SCHEDULE_PC_NOT_FOUND, SCHEDULE_PC_COUNT };
static const struct svc_problem_info schedule_problems[SCHEDULE_PC_COUNT] = {
    [SCHEDULE_PC_INVALID] = {"invalid_schedule", 400, "Invalid schedule"},
    [SCHEDULE_PC_NOT_FOUND] = {"schedule_not_found", 404, "No such schedule"},
};
#define SCHEDULE_P(name) (&schedule_problems[SCHEDULE_PC_##name])

/* ---- metrics: this process's counters and the fire lag's histogram ---- */

static const double lag_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
#define LAG_BUCKETS (sizeof(lag_bounds) / sizeof(lag_bounds[0]))
static struct {
    atomic_ullong fires, misfires, skipped, passes_failed;
    atomic_ullong lag_counts[LAG_BUCKETS + 1]; /* the last: above every bound */
    _Atomic double lag_sum;
} m;

static void lag_observe(double s)
{
    size_t b = 0;
    while (b < LAG_BUCKETS && s > lag_bounds[b])
        b++;
    atomic_fetch_add(&m.lag_counts[b], 1);
    double old = atomic_load(&m.lag_sum);
    while (!atomic_compare_exchange_weak(&m.lag_sum, &old, old + s))
        ;
}

static void schedules_render_metrics(struct svc_buf *b, struct svc_app *app)
{
    (void)app;
    svc_metrics_family(b, "rowlock_schedule_fires_total", "counter",
                       "Ticks this process enqueued a job for");
    svc_metrics_sample(b, "rowlock_schedule_fires_total", NULL, (double)atomic_load(&m.fires));
    svc_metrics_family(b, "rowlock_schedule_misfires_total", "counter",
                       "Ticks this process handled later than their schedule's grace");
    svc_metrics_sample(b, "rowlock_schedule_misfires_total", NULL,
                       (double)atomic_load(&m.misfires));
    svc_metrics_family(b, "rowlock_schedule_skipped_ticks_total", "counter",
                       "Misfired ticks this process skipped (misfire policy skip, or past "
                       "catch_up_max)");
    svc_metrics_sample(b, "rowlock_schedule_skipped_ticks_total", NULL,
                       (double)atomic_load(&m.skipped));
    svc_metrics_family(b, "rowlock_schedule_pass_failures_total", "counter",
                       "Firing passes of this process that failed (retried at the next pass)");
    svc_metrics_sample(b, "rowlock_schedule_pass_failures_total", NULL,
                       (double)atomic_load(&m.passes_failed));
    svc_metrics_family(b, "rowlock_schedule_fire_lag_seconds", "histogram",
                       "From a tick to the transaction that enqueued its job");
    unsigned long long cum = 0;
    char le[32];
    for (size_t i = 0; i <= LAG_BUCKETS; i++) {
        cum += atomic_load(&m.lag_counts[i]);
        if (i < LAG_BUCKETS)
            snprintf(le, sizeof(le), "le=\"%g\"", lag_bounds[i]);
        else
            snprintf(le, sizeof(le), "le=\"+Inf\"");
        svc_metrics_sample(b, "rowlock_schedule_fire_lag_seconds_bucket", le, (double)cum);
    }
    svc_metrics_sample(b, "rowlock_schedule_fire_lag_seconds_sum", NULL, atomic_load(&m.lag_sum));
    svc_metrics_sample(b, "rowlock_schedule_fire_lag_seconds_count", NULL, (double)cum);
}

/* ---- the firing pass ---- */

static void schedules_pass(void *ctx)
{
    struct svc_app *app = ctx;
    static atomic_uint passes;
    struct svc_server *server = atomic_load(&app->server);
    for (int round = 0; round < SCHEDULE_PASS_ROUNDS; round++) {
        struct db_schedules_fired f;
        struct db_error err;
        enum db_status st = db_schedules_fire_due(app->pool, &f, &err);
        if (st != DB_OK) {
            atomic_fetch_add(&m.passes_failed, 1);
            svc_log(SVC_LOG_WARN, "schedule pass failed", "status", db_status_name(st), "detail",
                    err.message, NULL);
            break;
        }
        atomic_fetch_add(&m.fires, (unsigned long long)f.fires);
        atomic_fetch_add(&m.misfires, (unsigned long long)f.misfires);
        atomic_fetch_add(&m.skipped, (unsigned long long)f.skipped);
        for (int i = 0; i < f.nlags; i++)
            lag_observe(f.lags[i] < 0 ? 0 : f.lags[i]);
        for (int i = 0; server != NULL && i < f.nqueues; i++) {
            char channel[SVC_CHANNEL_MAX];
            svc_server_wake_publish(server, queue_channel(f.queues[i], channel, sizeof(channel)),
                                    -1);
        }
        if (!f.full)
            break;
    }
    if (atomic_fetch_add(&passes, 1) % SCHEDULE_UPKEEP_EVERY == 0) {
        struct db_error err;
        if (db_upkeep_run(app->pool, &db_schedules_upkeep, NULL, &err) != DB_OK)
            svc_log(SVC_LOG_WARN, "schedule upkeep failed", "detail", err.message, NULL);
    }
}

/* ---- answers ---- */

static json_t *time_or_null(int64_t t)
{
    if (t < 0)
        return json_null();
    char buf[DB_TIME_TEXT];
    db_time_text(t, buf, sizeof(buf));
    return json_string(buf);
}

/* How much of a schedule an answer shows: the list's items, a PUT's answer (the next ticks
 * too), a GET's (the newest fires as well). */
enum schedule_detail { SCHEDULE_ITEM, SCHEDULE_NEXT, SCHEDULE_FULL };

/* The schedule's representation. NULL when out of memory (or the stored payload does not read
 * back: 500). */
static json_t *schedule_json(const struct db_schedule *s, enum schedule_detail detail)
{
    json_t *payload = route_json_stored(s->payload, strlen(s->payload));
    if (payload == NULL)
        return NULL;
    json_t *j = json_pack(
        "{s:s, s:s, s:s, s:s, s:o, s:i, s:o, s:s, s:i, s:i, s:i, s:b, s:o, s:o, s:I, s:I, s:s, "
        "s:s}",
        "name", s->name, "cron", s->cron, "time_zone", s->time_zone, "queue", s->queue, "payload",
        payload, "priority", s->priority, "max_attempts",
        s->max_attempts > 0 ? json_integer(s->max_attempts) : json_null(), "misfire",
        db_misfire_name(s->misfire), "catch_up_max", s->catch_up_max, "misfire_grace_seconds",
        s->misfire_grace_seconds, "jitter_seconds", s->jitter_seconds, "paused", s->paused,
        "next_fire_at", time_or_null(s->next_fire_at), "last_fire_at",
        time_or_null(s->last_fire_at), "fired", (json_int_t)s->fired, "skipped",
        (json_int_t)s->skipped, "created_at", s->created_at, "updated_at", s->updated_at);
    if (j == NULL || detail == SCHEDULE_ITEM)
        return j;
    json_t *next = json_array(), *last = json_array();
    struct db_cron c;
    char why[DB_CRON_ERROR_SIZE];
    const struct db_tz *z = db_tz_get(s->time_zone, why, sizeof(why));
    int64_t t = s->next_fire_at;
    if (z != NULL && db_cron_parse(s->cron, &c, why, sizeof(why)) == 0)
        for (int i = 0; t >= 0 && i < DB_SCHEDULE_NEXT_SHOWN; i++) {
            json_array_append_new(next, time_or_null(t));
            int64_t n;
            t = db_cron_next(&c, z, t, &n) ? n : -1;
        }
    for (int i = 0; i < s->nfires; i++)
        json_array_append_new(
            last, json_pack("{s:s, s:s, s:I, s:b}", "fire_at", s->fires[i].fire_at, "enqueued_at",
                            s->fires[i].enqueued_at, "job_id", (json_int_t)s->fires[i].job_id,
                            "manual", s->fires[i].manual));
    json_object_set_new(j, "next_fires", next);
    if (detail == SCHEDULE_FULL)
        json_object_set_new(j, "last_fires", last);
    else
        json_decref(last);
    return j;
}

static enum svc_outcome invalid(struct svc_request *req, const char *field, const char *why)
{
    return svc_reply_problem_ext(req, SCHEDULE_P(INVALID), json_pack("{s:s}", "field", field),
                                 "%s: %s", field, why);
}

/* ---- PUT ---- */

/* The parsed body of a PUT: its configuration, the expression, the zone, the payload's text. */
struct put_body {
    struct db_schedule_config cfg;
    struct db_cron cron;
    const struct db_tz *tz;
    char *payload; /* owned */
};

/* A string member: its value, def when absent; NULL after replying when not a string. */
static const char *string_member(struct svc_request *req, json_t *b, const char *name,
                                 const char *def, enum svc_outcome *out)
{
    json_t *v = json_object_get(b, name);
    if (v == NULL && def != NULL)
        return def;
    if (!json_is_string(v)) {
        *out = invalid(req, name, v == NULL ? "required" : "must be a string");
        return NULL;
    }
    return json_string_value(v);
}

/* The numbers and flags of the body; 0, or -1 after replying. */
static int put_numbers(struct svc_request *req, json_t *b, struct db_schedule_config *cfg,
                       enum svc_outcome *out)
{
    static const struct {
        const char *name;
        long long min, max, def;
        int nullable;
    } ints[] = {{"priority", -1000000, 1000000, 0, 0},
                {"max_attempts", 1, 1000000, 0, 1},
                {"catch_up_max", 1, DB_SCHEDULE_CATCH_UP_MAX, 10, 0},
                {"misfire_grace_seconds", 1, DB_SCHEDULE_GRACE_MAX, 60, 0},
                {"jitter_seconds", 0, DB_SCHEDULE_JITTER_MAX, 0, 0}};
    long long v[5];
    char why[160];
    for (size_t i = 0; i < 5; i++)
        if (!route_int_member(b, ints[i].name, ints[i].min, ints[i].max, ints[i].def,
                              ints[i].nullable, &v[i], why, sizeof(why))) {
            *out = svc_reply_problem_ext(req, SCHEDULE_P(INVALID),
                                         json_pack("{s:s}", "field", ints[i].name), "%s", why);
            return -1;
        }
    json_t *p = json_object_get(b, "paused");
    if (p != NULL && !json_is_boolean(p)) {
        *out = invalid(req, "paused", "must be true or false");
        return -1;
    }
    cfg->priority = (int)v[0];
    cfg->max_attempts = (int)v[1];
    cfg->catch_up_max = (int)v[2];
    cfg->misfire_grace_seconds = (int)v[3];
    cfg->jitter_seconds = (int)v[4];
    cfg->paused = json_is_true(p);
    return 0;
}

/* The first member of object b that allowed (NULL-terminated) does not name, or NULL. */
static const char *unknown_member(json_t *b, const char *const *allowed)
{
    const char *name;
    json_t *v;
    json_object_foreach(b, name, v)
    {
        size_t i = 0;
        while (allowed[i] != NULL && strcmp(allowed[i], name) != 0)
            i++;
        if (allowed[i] == NULL)
            return name;
    }
    return NULL;
}

/* The body of PUT /schedules/{name} into *pb; 0, or -1 after replying 400. */
static int put_parse(struct svc_request *req, struct put_body *pb, enum svc_outcome *out)
{
    json_t *b = svc_req_json(req);
    static const char *const allowed[] = {"cron",           "time_zone",    "queue",
                                          "payload",        "priority",     "max_attempts",
                                          "misfire",        "catch_up_max", "misfire_grace_seconds",
                                          "jitter_seconds", "paused",       NULL};
    char why[DB_CRON_ERROR_SIZE > DB_TZ_ERROR_SIZE ? DB_CRON_ERROR_SIZE : DB_TZ_ERROR_SIZE];
    memset(pb, 0, sizeof(*pb));
    if (!json_is_object(b)) {
        *out = svc_reply_problem(req, SCHEDULE_P(INVALID), "the body must be a JSON object");
        return -1;
    }
    const char *unknown = unknown_member(b, allowed);
    if (unknown != NULL) { /* the member is the field: a misspelt name says which */
        *out = svc_reply_problem_ext(req, SCHEDULE_P(INVALID), json_pack("{s:s}", "field", unknown),
                                     "unknown member \"%s\"", unknown);
        return -1;
    }
    struct db_schedule_config *cfg = &pb->cfg;
    const char *misfire;
    if ((cfg->cron = string_member(req, b, "cron", NULL, out)) == NULL ||
        (cfg->time_zone = string_member(req, b, "time_zone", "UTC", out)) == NULL ||
        (cfg->queue = string_member(req, b, "queue", NULL, out)) == NULL ||
        (misfire = string_member(req, b, "misfire", "skip", out)) == NULL)
        return -1;
    if (strlen(cfg->cron) > DB_CRON_TEXT_MAX) {
        snprintf(why, sizeof(why), "longer than %d bytes", DB_CRON_TEXT_MAX);
        *out = invalid(req, "cron", why);
        return -1;
    }
    if (db_cron_parse(cfg->cron, &pb->cron, why, sizeof(why)) != 0) {
        *out = invalid(req, "cron", why);
        return -1;
    }
    if ((pb->tz = db_tz_get(cfg->time_zone, why, sizeof(why))) == NULL) {
        *out = invalid(req, "time_zone", why);
        return -1;
    }
    if (!route_name_ok(cfg->queue, why, sizeof(why))) {
        *out = invalid(req, "queue", why);
        return -1;
    }
    if (db_misfire_parse(misfire, &cfg->misfire) != 0) {
        *out = invalid(req, "misfire", "must be \"skip\" or \"catch_up\"");
        return -1;
    }
    if (put_numbers(req, b, cfg, out) != 0)
        return -1;
    json_t *payload = json_object_get(b, "payload");
    pb->payload =
        payload != NULL ? json_dumps(payload, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
    if (pb->payload == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    cfg->payload = pb->payload;
    return 0;
}

static enum svc_outcome route_schedule_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "schedule", &out);
    struct put_body pb;
    if (name == NULL || put_parse(req, &pb, &out) != 0)
        return out;
    struct db_schedule s;
    enum db_schedule_verdict v;
    struct db_error err;
    enum db_status st = db_schedules_put(app->pool, name, &pb.cfg, &pb.cron, pb.tz, &s, &v, &err);
    free(pb.payload);
    if (st != DB_OK)
        out = route_db_problem(req, st, &err);
    else if (v == DB_S_QUEUE_NOT_FOUND)
        out = invalid(req, "queue", "no such queue");
    else
        out = svc_reply_json(req, v == DB_S_CREATED ? 201 : 200, schedule_json(&s, SCHEDULE_NEXT));
    db_schedule_clear(&s);
    return out;
}

/* ---- GET, list, DELETE, fire ---- */

static enum svc_outcome not_found(struct svc_request *req, const char *name)
{
    return svc_reply_problem(req, SCHEDULE_P(NOT_FOUND), "no schedule named %s", name);
}

static enum svc_outcome route_schedule_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "schedule", &out);
    if (name == NULL)
        return out;
    struct db_schedule s;
    enum db_schedule_verdict v;
    struct db_error err;
    enum db_status st = db_schedules_get(app->pool, name, &s, &v, &err);
    if (st != DB_OK)
        out = route_db_problem(req, st, &err);
    else if (v != DB_S_OK)
        out = not_found(req, name);
    else
        out = svc_reply_json(req, 200, schedule_json(&s, SCHEDULE_FULL));
    db_schedule_clear(&s);
    return out;
}

static void schedule_one(const struct db_schedule *s, void *ctx)
{
    json_t *arr = ctx, *j = schedule_json(s, SCHEDULE_ITEM);
    if (j == NULL || json_array_append_new(arr, j) != 0)
        json_array_append_new(arr, json_null()); /* answered 500 below */
}

static enum svc_outcome route_schedules_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    long long limit;
    const char *after = NULL;
    if (route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    json_t *arr = json_array();
    if (arr == NULL)
        return svc_reply_json(req, 200, NULL);
    struct db_error err;
    enum db_status st = db_schedules_list(app->pool, after, (int)limit, schedule_one, arr, &err);
    if (st != DB_OK) {
        json_decref(arr);
        return route_db_problem(req, st, &err);
    }
    size_t n = json_array_size(arr);
    for (size_t i = 0; i < n; i++)
        if (json_is_null(json_array_get(arr, i))) {
            json_decref(arr);
            return svc_reply_json(req, 200, NULL);
        }
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(arr, n - 1), "name"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "schedules", arr, "next", next));
}

static enum svc_outcome route_schedule_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "schedule", &out);
    if (name == NULL)
        return out;
    enum db_schedule_verdict v;
    struct db_error err;
    enum db_status st = db_schedules_delete(app->pool, name, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_S_OK)
        return not_found(req, name);
    return svc_reply_json(req, 200, json_pack("{s:s, s:b}", "name", name, "deleted", 1));
}

static enum svc_outcome route_schedule_fire(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "schedule", &out);
    if (name == NULL)
        return out;
    struct db_schedule_fire f;
    char queue[DB_NAME_SIZE];
    enum db_schedule_verdict v;
    struct db_error err;
    enum db_status st = db_schedules_fire_now(app->pool, name, &f, queue, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_S_OK)
        return not_found(req, name);
    queue_wake(req, queue, 1);
    return svc_reply_json(req, 201,
                          json_pack("{s:I, s:s, s:s}", "job_id", (json_int_t)f.job_id, "queue",
                                    queue, "fire_at", f.fire_at));
}

static const struct svc_route schedule_routes[] = {
    {"GET", "/schedules", route_schedules_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"PUT", "/schedules/{schedule}", route_schedule_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/schedules/{schedule}", route_schedule_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/schedules/{schedule}", route_schedule_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/schedules/{schedule}/fire", route_schedule_fire, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_schedules_family = {
    .name = "schedules",
    .resource = "schedule",
    .upkeep = &db_schedules_upkeep,
    .routes = schedule_routes,
    .nroutes = sizeof(schedule_routes) / sizeof(schedule_routes[0]),
    .problems = schedule_problems,
    .nproblems = SCHEDULE_PC_COUNT,
    .render_metrics = schedules_render_metrics,
    .janitor_pass = schedules_pass,
    .janitor_interval_ms = SCHEDULE_PASS_MS,
};
