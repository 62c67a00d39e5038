/* REST routes of topic consumer cursors: /topics/{topic}/consumers (create, read, list, delete)
 * and .../commit, the compare-and-set that moves one. Each handler validates, calls one
 * db/topic_consumers.c workflow and maps its verdict to a status. Also the consumer lag
 * metrics. Reading the log from a consumer's offset is GET .../messages (routes/topics.c). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/topic_consumers.h"
#include "db/topics.h"
#include "routes/effects.h"
#include "routes/etag.h"
#include "routes/json_util.h"
#include "routes/topics.h"
#include "service/app.h"
#include "service/log.h"
#include "service/metrics.h"

#define OFFSET_MAX (DB_TOPIC_OFFSET_MAX - 1) /* the largest `after` of a log read */

static struct svc_counter_vec *m_lag_failures;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
    m_lag_failures = svc_counter_vec_new(
        "rowlock_topic_consumer_metrics_failures_total",
        "Scrapes that could not read the consumer lag of this topic (the other topics' were "
        "served)",
        "topic");
}

void route_topic_consumers_init(void)
{
    pthread_once(&metrics_once, metrics_init);
}

/* ---- validation ---- */

/* The {topic} and {consumer} path parameters; 0, or -1 after replying 400. */
static int names(struct svc_request *req, const char **topic, const char **consumer,
                 enum svc_outcome *out)
{
    *consumer = svc_req_param(req, "consumer");
    if ((*topic = route_name_param(req, "topic", out)) == NULL)
        return -1;
    return *consumer != NULL ? route_valid_name(req, *consumer, "consumer", out) : 0;
}

/* An If-Match of a commit: one strong entity tag "<offset>" (or the bare number, which a commit
 * takes too). 1 with *v, or 0 when malformed. */
static int if_match_offset(const char *field, int64_t *v)
{
    const char *p = field;
    struct route_etag t, more;
    if (route_etag_next(&p, &t) == 1) {
        if (t.any || t.weak || route_etag_next(&p, &more) != 0)
            return 0;
    } else { /* the bare number, spaces around it aside */
        for (t.opaque = field; *t.opaque == ' ' || *t.opaque == '\t'; t.opaque++)
            ;
        for (t.len = strlen(t.opaque); t.len > 0 && strchr(" \t", t.opaque[t.len - 1]); t.len--)
            ;
    }
    int64_t n = 0;
    for (size_t i = 0; i < t.len; i++) {
        int d = t.opaque[i] - '0';
        if (d < 0 || d > 9 || n > (OFFSET_MAX - d) / 10)
            return 0;
        n = n * 10 + d;
    }
    *v = n;
    return t.len > 0;
}

/* ---- answers ---- */

static json_t *consumer_json(const char *topic, const struct db_consumer *c)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:f}", "topic", topic, "consumer", c->name,
                     "offset", (json_int_t)c->offset, "created_at", c->created_at, "committed_at",
                     c->committed_at, "lag_messages", (json_int_t)c->lag_messages, "lag_seconds",
                     c->lag_seconds);
}

static enum svc_outcome reply_consumer(struct svc_request *req, int status, const char *topic,
                                       const struct db_consumer *c)
{
    route_etag_set(req, c->offset);
    return svc_reply_json(req, status, consumer_json(topic, c));
}

/* The answer to a verdict that is not a success, or to a failed status. */
static enum svc_outcome refusal(struct svc_request *req, enum db_status st,
                                const struct db_error *err, enum db_consumer_verdict v,
                                const char *topic, const char *consumer,
                                const struct db_consumer *c, int64_t wanted)
{
    if (st != DB_OK)
        return route_db_problem(req, st, err);
    switch (v) {
    case DB_CONSUMER_TOPIC_NOT_FOUND:
        return svc_reply_problem(req, TOPIC_P(TOPIC_NOT_FOUND), "there is no topic %s", topic);
    case DB_CONSUMER_NOT_FOUND:
        return svc_reply_problem(req, TOPIC_P(CONSUMER_NOT_FOUND),
                                 "topic %s has no consumer %s (create it with PUT "
                                 "/topics/%s/consumers/%s)",
                                 topic, consumer, topic, consumer);
    case DB_CONSUMER_CONFLICT:
        return svc_reply_problem_ext(
            req, TOPIC_P(CONSUMER_CONFLICT), json_pack("{s:I}", "offset", (json_int_t)c->offset),
            "consumer %s is at offset %" PRId64 ": the commit of offset %" PRId64
            " expected another offset or would move it backwards; read its offset and go on "
            "from there",
            consumer, c->offset, wanted);
    default: /* DB_CONSUMER_BEYOND_END */
        return svc_reply_problem_ext(req, TOPIC_P(OFFSET_BEYOND_END),
                                     json_pack("{s:I, s:I}", "offset", (json_int_t)c->offset,
                                               "readable_end", (json_int_t)c->readable_end),
                                     "offset %" PRId64
                                     " is past the readable end of topic %s's log (%" PRId64
                                     "): commit only offsets a log read has returned as next",
                                     wanted, topic, c->readable_end);
    }
}

/* ---- handlers ---- */

/* The body of a PUT: {"start": "beginning"|"end"} or {"offset": N}; {} starts at the end. 1, or
 * 0 with why. */
static int start_member(json_t *body, enum db_consumer_start *start, long long *offset, char *why,
                        size_t size)
{
    static const char *const allowed[] = {"start", "offset", NULL};
    *start = DB_CONSUMER_START_END;
    *offset = 0;
    if (!json_is_object(body) || !route_only_members(body, allowed, why, size))
        return 0;
    json_t *s = json_object_get(body, "start");
    if (s != NULL && json_object_get(body, "offset") != NULL) {
        snprintf(why, size, "give \"start\" or \"offset\", not both");
        return 0;
    }
    if (json_object_get(body, "offset") != NULL) {
        *start = DB_CONSUMER_START_OFFSET;
        return route_int_member(body, "offset", 0, OFFSET_MAX, 0, 0, offset, why, size);
    }
    const char *word = json_string_value(s);
    if (s != NULL && (word == NULL || (strcmp(word, "beginning") && strcmp(word, "end")))) {
        snprintf(why, size, "\"start\" is \"beginning\" or \"end\"");
        return 0;
    }
    if (word != NULL && strcmp(word, "beginning") == 0)
        *start = DB_CONSUMER_START_BEGINNING;
    return 1;
}

enum svc_outcome route_consumer_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic, *name;
    if (names(req, &topic, &name, &out) != 0)
        return out;
    enum db_consumer_start start;
    long long offset;
    char why[160] = "the body must be a JSON object";
    if (!start_member(svc_req_json(req), &start, &offset, why, sizeof(why)))
        return svc_reply_problem(req, TOPIC_P(INVALID_CONSUMER), "%s", why);
    struct db_consumer c;
    enum db_consumer_verdict v;
    struct db_error err;
    enum db_status st = db_consumers_put(app->pool, topic, name, start, offset, &c, &v, &err);
    if (st == DB_OK && (v == DB_CONSUMER_OK || v == DB_CONSUMER_CREATED))
        return reply_consumer(req, v == DB_CONSUMER_CREATED ? 201 : 200, topic, &c);
    return refusal(req, st, &err, v, topic, name, &c, offset);
}

enum svc_outcome route_consumer_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic, *name;
    if (names(req, &topic, &name, &out) != 0)
        return out;
    struct db_consumer c;
    enum db_consumer_verdict v;
    struct db_error err;
    enum db_status st = db_consumers_get(app->pool, topic, name, &c, &v, &err);
    if (st == DB_OK && v == DB_CONSUMER_OK)
        return reply_consumer(req, 200, topic, &c);
    return refusal(req, st, &err, v, topic, name, &c, 0);
}

enum svc_outcome route_consumer_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic, *name;
    if (names(req, &topic, &name, &out) != 0)
        return out;
    enum db_consumer_verdict v;
    struct db_error err;
    enum db_status st = db_consumers_delete(app->pool, topic, name, &v, &err);
    if (st == DB_OK && v == DB_CONSUMER_OK)
        return svc_reply_static(req, 204, "application/json", "", 0);
    return refusal(req, st, &err, v, topic, name, NULL, 0);
}

struct list_ctx {
    const char *topic;
    json_t *items;
};

static void list_one(const struct db_consumer *c, void *ctx)
{
    struct list_ctx *l = ctx;
    json_array_append_new(l->items, consumer_json(l->topic, c));
}

enum svc_outcome route_consumers_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic, *none, *after = NULL;
    long long limit;
    if (names(req, &topic, &none, &out) != 0 ||
        route_int_query(req, "limit", 1, DB_TOPIC_READ_MAX, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    struct list_ctx l = {topic, json_array()};
    enum db_consumer_verdict v;
    struct db_error err;
    enum db_status st =
        db_consumers_list(app->pool, topic, after, (int)limit, list_one, &l, &v, &err);
    if (st != DB_OK || v != DB_CONSUMER_OK) {
        json_decref(l.items);
        return refusal(req, st, &err, v, topic, "", NULL, 0);
    }
    size_t n = json_array_size(l.items);
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(l.items, n - 1), "consumer"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "consumers", l.items, "next", next));
}

/* The body of a commit, with If-Match as the other way to say expect. 1, or 0 with why. */
static int commit_members(struct svc_request *req, struct db_consumer_commit *k, char *why,
                          size_t size)
{
    static const char *const allowed[] = {"offset", "expect", "enqueue", "produce", NULL};
    json_t *body = svc_req_json(req);
    const char *if_match = svc_req_header(req, "If-Match");
    long long offset, expect;
    memset(k, 0, sizeof(*k));
    if (!json_is_object(body) || !route_only_members(body, allowed, why, size))
        return 0;
    if (json_object_get(body, "offset") == NULL) {
        snprintf(why, size, "\"offset\" is required: the last offset processed (a page's next)");
        return 0;
    }
    if (!route_int_member(body, "offset", 0, OFFSET_MAX, 0, 0, &offset, why, size) ||
        !route_int_member(body, "expect", 0, OFFSET_MAX, 0, 0, &expect, why, size))
        return 0;
    k->offset = offset;
    k->has_expect = json_object_get(body, "expect") != NULL;
    k->expect = expect;
    if (if_match != NULL && k->has_expect) {
        snprintf(why, size, "give \"expect\" or If-Match, not both");
        return 0;
    }
    if (if_match != NULL && !if_match_offset(if_match, &k->expect)) {
        snprintf(why, size,
                 "If-Match is the consumer's current offset as an entity tag "
                 "(\"42\"), from 0 to %lld",
                 (long long)OFFSET_MAX);
        return 0;
    }
    k->has_expect |= if_match != NULL;
    return 1;
}

/* A commit that carried effects: the consumer, and what the effects did ("effects": null when
 * the commit moved nothing, so applied none: a repeat of a commit that did). */
static enum svc_outcome reply_committed(struct svc_request *req, const char *topic,
                                        const struct db_consumer *c, struct route_effects *fx)
{
    route_etag_set(req, c->offset);
    if (!fx->db.applied)
        return svc_reply_json(req, 200,
                              queue_with(consumer_json(topic, c), "effects", json_null()));
    route_effects_done(req, fx);
    return svc_reply_json(req, 200,
                          queue_with(consumer_json(topic, c), "effects", route_effects_json(fx)));
}

enum svc_outcome route_consumer_commit(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic, *name;
    if (names(req, &topic, &name, &out) != 0)
        return out;
    struct db_consumer_commit k;
    char why[200] = "the body must be a JSON object";
    if (!commit_members(req, &k, why, sizeof(why)))
        return svc_reply_problem(req, TOPIC_P(INVALID_CONSUMER), "%s", why);
    struct route_effects fx;
    if (route_effects_parse(req, svc_req_json(req), &fx, &out) != 0) {
        route_effects_free(&fx);
        return out;
    }
    k.fx = fx.any ? &fx.db : NULL;
    struct db_consumer c;
    enum db_consumer_verdict v;
    struct db_error err;
    enum db_status st = db_consumers_commit(app->pool, topic, name, &k, &c, &v, &err);
    if (st == DB_OK && fx.any && fx.db.refused != DB_FX_OK)
        out = route_effects_refused(req, &fx);
    else if (st == DB_OK && v == DB_CONSUMER_OK && fx.any)
        out = reply_committed(req, topic, &c, &fx);
    else if (st == DB_OK && v == DB_CONSUMER_OK)
        out = reply_consumer(req, 200, topic, &c);
    else
        out = refusal(req, st, &err, v, topic, name, &c, k.offset);
    route_effects_free(&fx);
    return out;
}

/* ---- metrics ---- */

static void lag_one(const char *topic, const char *consumer, int64_t messages, double seconds,
                    void *ctx)
{
    struct svc_buf *b = ctx;
    struct svc_buf l;
    svc_buf_init(&l, 1024);
    svc_metrics_label(&l, "topic", topic);
    svc_buf_append(&l, ",", 1);
    svc_metrics_label(&l, "consumer", consumer);
    svc_metrics_sample(b, "rowlock_topic_consumer_lag_messages", l.data, (double)messages);
    svc_metrics_sample(b, "rowlock_topic_consumer_lag_seconds", l.data, seconds);
    svc_buf_free(&l);
}

static void lag_failed(const char *topic, enum db_status st, const struct db_error *err, void *ctx)
{
    (void)ctx;
    svc_counter_vec_add(m_lag_failures, topic, 1);
    svc_log(SVC_LOG_WARN, "topic consumer lag failed", "topic", topic, "status", db_status_name(st),
            "sqlstate", err->sqlstate, "detail", err->message, NULL);
}

void route_topic_consumers_render_metrics(struct svc_buf *b, struct svc_app *app)
{
    static const struct {
        const char *name, *help;
    } families[] = {
        {"rowlock_topic_consumer_lag_messages",
         "Offsets between the consumer's committed offset and the log's readable end (holes "
         "count)"},
        {"rowlock_topic_consumer_lag_seconds",
         "Age of the first message after the consumer's committed offset (0 when caught up)"},
    };
    struct svc_buf rows;
    svc_buf_init(&rows, 16 * 1024 * 1024);
    struct db_error err;
    route_topic_consumers_init();
    enum db_status st = db_consumers_lag_all(app->pool, lag_one, lag_failed, &rows, &err);
    if (st != DB_OK)
        svc_log(SVC_LOG_WARN, "topic consumer lag could not be listed", "status",
                db_status_name(st), "detail", err.message, NULL);
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        svc_metrics_family_from(b, st == DB_OK ? rows.data : NULL, families[f].name, "gauge",
                                families[f].help);
    }
    svc_buf_free(&rows);
}
