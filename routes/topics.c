/* REST routes of compacted topics: /topics, producers, produce, and heads (plain read,
 * merge-patch, replace, tombstone); the family's route table, codes, metrics and janitor pass.
 * Log reads and key lists are in routes/topic_reads.c, consumer cursors in
 * routes/topic_consumers.c. Each handler validates, calls one db/ workflow and maps its verdict
 * to a status. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/topics.h"
#include "routes/etag.h"
#include "routes/gate.h"
#include "routes/json_util.h"
#include "routes/topics.h"
#include "service/app.h"
#include "service/jpage.h"
#include "service/log.h"
#include "service/metrics.h"

#define DEFAULT_HEADLESS_TTL 3600

const struct svc_problem_info topic_problems[TOPIC_PC_COUNT] = {
    [TOPIC_PC_INVALID_MESSAGE] = {"invalid_message", 400, "Invalid message"},
    [TOPIC_PC_INVALID_MERGE_PATCH] = {"invalid_merge_patch", 400, "Invalid merge patch"},
    [TOPIC_PC_INVALID_CONSUMER] = {"invalid_consumer", 400, "Invalid consumer request"},
    [TOPIC_PC_TOPIC_NOT_FOUND] = {"topic_not_found", 404, "No such topic"},
    [TOPIC_PC_PRODUCER_NOT_FOUND] = {"producer_not_found", 404, "No such producer"},
    [TOPIC_PC_HEAD_NOT_FOUND] = {"head_not_found", 404, "Key has no head"},
    [TOPIC_PC_KEY_DELETED] = {"key_deleted", 404, "Key deleted"},
    [TOPIC_PC_CONSUMER_NOT_FOUND] = {"consumer_not_found", 404, "No such consumer"},
    [TOPIC_PC_CONSUMER_CONFLICT] = {"consumer_conflict", 409,
                                    "Consumer not at the expected offset"},
    [TOPIC_PC_OFFSET_BEYOND_END] = {"offset_beyond_end", 409, "Offset past the log's readable end"},
    [TOPIC_PC_PRECONDITION_FAILED] = {"precondition_failed", 412, "Precondition failed"},
};

static struct svc_counter_vec *m_produced, *m_advanced, *m_rejected, *m_duplicates,
    *m_janitor_deleted, *m_compacted, *m_gate_waits, *m_metrics_failures, *m_janitor_failures,
    *m_janitor_visits;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
    m_produced = svc_counter_vec_new("rowlock_topic_messages_produced_total",
                                     "Messages written to the topic's log", "topic");
    m_advanced = svc_counter_vec_new("rowlock_topic_heads_advanced_total",
                                     "Produced messages that became their key's head", "topic");
    m_rejected =
        svc_counter_vec_new("rowlock_topic_heads_rank_rejected_total",
                            "Produced messages whose rank did not beat the key's head", "topic");
    m_duplicates = svc_counter_vec_new("rowlock_topic_duplicate_produces_total",
                                       "Producer sequences sent again (nothing written)", "topic");
    m_janitor_deleted =
        svc_counter_vec_new("rowlock_topic_janitor_deleted_total",
                            "Expired headless rows deleted by the janitor", "topic");
    m_compacted =
        svc_counter_vec_new("rowlock_topic_retention_compacted_total",
                            "Superseded messages compacted away past the retention", "topic");
    m_metrics_failures = svc_counter_vec_new(
        "rowlock_topic_metrics_failures_total",
        "Scrapes that could not read this topic's headless gauges (the other topics' were served)",
        "topic");
    m_janitor_failures = svc_counter_vec_new(
        "rowlock_topic_janitor_failures_total",
        "Janitor passes that failed on this topic (the other topics were cleaned)", "topic");
    m_janitor_visits = svc_counter_vec_new(
        "rowlock_topic_janitor_visits_total",
        "Topics this process's janitor worked on, by outcome: only topics whose upkeep was due "
        "(rowlock.upkeep), claimed so that no other process does the same",
        "outcome");
    m_gate_waits =
        svc_counter_vec_new("rowlock_topic_head_write_gate_waits_total",
                            "Head writes that queued in the process behind others of the same key "
                            "(ROWLOCK_KEY_WRITERS) instead of waiting on its row lock",
                            "topic");
}

static struct svc_gate *head_gate; /* head writes, per key (ROWLOCK_KEY_WRITERS) */

static int route_topics_init(const struct svc_app *app)
{
    pthread_once(&metrics_once, metrics_init);
    /* one series per topic, up to ROWLOCK_METRICS_MAX_RESOURCES topics (then topic="_other") */
    struct svc_counter_vec *per_topic[] = {m_produced,         m_advanced,         m_rejected,
                                           m_duplicates,       m_janitor_deleted,  m_compacted,
                                           m_metrics_failures, m_janitor_failures, m_gate_waits};
    for (size_t i = 0; i < sizeof(per_topic) / sizeof(per_topic[0]); i++)
        svc_counter_vec_bound(per_topic[i]);
    route_topic_consumers_init();
    head_gate = svc_gate_new((int)app->config->key_writers);
    return head_gate != NULL ? 0 : -1;
}

static void route_topics_fini(void)
{
    svc_gate_free(head_gate);
    head_gate = NULL;
}

static void count_effects(const char *topic, const struct db_message_out *out, size_t n)
{
    uint64_t produced = 0, advanced = 0, rejected = 0, dup = 0;
    for (size_t i = 0; i < n; i++) {
        produced += out[i].effect != DB_HEAD_DUPLICATE;
        advanced += out[i].effect == DB_HEAD_ADVANCED;
        rejected += out[i].effect == DB_HEAD_RANK_REJECTED;
        dup += out[i].effect == DB_HEAD_DUPLICATE;
    }
    svc_counter_vec_add(m_produced, topic, produced);
    svc_counter_vec_add(m_advanced, topic, advanced);
    svc_counter_vec_add(m_rejected, topic, rejected);
    if (dup)
        svc_counter_vec_add(m_duplicates, topic, dup);
}

const char *route_topic_channel(const char *topic, char *buf, size_t size)
{
    return svc_family_channel(&route_topics_family, topic, buf, size);
}

/* ---- validation ---- */

const char *route_topic_key_param(struct svc_request *req, enum svc_outcome *out)
{
    const char *k = svc_req_param(req, "key");
    char why[160];
    if (!route_key_ok(k, why, sizeof(why))) {
        *out = svc_reply_problem(req, ROUTE_P(INVALID_KEY), "%s", why);
        return NULL;
    }
    return k;
}

/* Optional ?producer= (NULL when absent). Returns 0, or -1 after replying 400. */
static int producer_query(struct svc_request *req, const char **producer, enum svc_outcome *out)
{
    *producer = svc_req_query(req, "producer");
    return *producer != NULL ? route_valid_name(req, *producer, "producer", out) : 0;
}

enum svc_outcome route_topic_problem(struct svc_request *req, enum db_topic_verdict v,
                                     const char *topic, const char *producer)
{
    if (producer == NULL) /* only a consumer's or a producer's verdict names one */
        producer = "";
    if (v == DB_TOPIC_CONSUMER_NOT_FOUND) /* producer names the consumer of a log read */
        return svc_reply_problem(req, TOPIC_P(CONSUMER_NOT_FOUND),
                                 "topic %s has no consumer %s (create it with PUT "
                                 "/topics/%s/consumers/%s)",
                                 topic, producer, topic, producer);
    if (v == DB_TOPIC_PRODUCER_NOT_FOUND)
        return svc_reply_problem(req, TOPIC_P(PRODUCER_NOT_FOUND),
                                 "topic %s has no producer %s (register it with PUT "
                                 "/topics/%s/producers/%s)",
                                 topic, producer, topic, producer);
    return svc_reply_problem(req, TOPIC_P(TOPIC_NOT_FOUND), "there is no topic %s", topic);
}

/* ---- topics ---- */

static json_t *topic_json(const struct db_topic *t, const struct db_topic_stats *s)
{
    json_t *j = json_pack(
        "{s:s, s:I, s:o, s:b, s:i, s:s, s:s}", "name", t->name, "headless_ttl_seconds",
        (json_int_t)t->headless_ttl_seconds, "retention_seconds",
        t->retention_seconds > 0 ? json_integer(t->retention_seconds) : json_null(),
        "retention_ignores_consumers", t->retention_ignores_consumers, "default_schema_version",
        t->default_schema_version, "created_at", t->created_at, "updated_at", t->updated_at);
    if (j != NULL && s != NULL)
        json_object_set_new(j, "counts",
                            json_pack("{s:I, s:I, s:I, s:f}", "messages", (json_int_t)s->messages,
                                      "heads", (json_int_t)s->heads, "headless_rows",
                                      (json_int_t)s->headless_rows, "headless_oldest_age_seconds",
                                      s->headless_oldest_age_seconds));
    return j;
}

static enum svc_outcome route_topic_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "topic", &out);
    if (name == NULL)
        return out;
    json_t *body = svc_req_json(req);
    static const char *const allowed[] = {"headless_ttl_seconds", "retention_seconds",
                                          "default_schema_version", "retention_ignores_consumers",
                                          NULL};
    long long ttl, retention, sv;
    char why[160] = "the body must be a JSON object";
    json_t *ignores = json_object_get(body, "retention_ignores_consumers");
    if (ignores != NULL && !json_is_boolean(ignores))
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG),
                                 "\"retention_ignores_consumers\" must be true or false");
    if (!json_is_object(body) || !route_only_members(body, allowed, why, sizeof(why)) ||
        !route_int_member(body, "headless_ttl_seconds", 1, 2147483647, DEFAULT_HEADLESS_TTL, 0,
                          &ttl, why, sizeof(why)) ||
        !route_int_member(body, "retention_seconds", 1, 2147483647, 0, 1, &retention, why,
                          sizeof(why)) ||
        !route_int_member(body, "default_schema_version", 1, 2147483647, 1, 0, &sv, why,
                          sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG), "%s", why);
    struct db_topic_config cfg = {ttl, retention, (int)sv, json_is_true(ignores)};
    struct db_topic t;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_put(app->pool, name, &cfg, &t, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    return svc_reply_json(req, v == DB_TOPIC_CREATED ? 201 : 200, topic_json(&t, NULL));
}

static enum svc_outcome route_topic_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "topic", &out);
    if (name == NULL)
        return out;
    struct db_topic t;
    struct db_topic_stats s;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_get(app->pool, name, &t, &s, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_TOPIC_OK)
        return route_topic_problem(req, v, name, NULL);
    return svc_reply_json(req, 200, topic_json(&t, &s));
}

static void list_one(const struct db_topic *t, const struct db_topic_stats *s, void *ctx)
{
    json_array_append_new(ctx, topic_json(t, s));
}

static enum svc_outcome route_topics_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    long long limit;
    const char *after = NULL;
    if (route_int_query(req, "limit", 1, DB_TOPIC_READ_MAX, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    json_t *topics = json_array();
    struct db_error err;
    enum db_status st = db_topics_list(app->pool, after, (int)limit, list_one, topics, &err);
    if (st != DB_OK) {
        json_decref(topics);
        return route_db_problem(req, st, &err);
    }
    size_t n = json_array_size(topics);
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(topics, n - 1), "name"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "topics", topics, "next", next));
}

static enum svc_outcome route_topic_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "topic", &out);
    if (name == NULL)
        return out;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_delete(app->pool, name, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_TOPIC_OK)
        return route_topic_problem(req, v, name, NULL);
    return svc_reply_json(req, 200, json_pack("{s:s, s:b}", "name", name, "deleted", 1));
}

static enum svc_outcome route_producer_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    if (topic == NULL)
        return out;
    const char *name = svc_req_param(req, "producer");
    char why[160] = "the body must be a JSON object";
    if (!route_name_ok(name, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_NAME), "producer name: %s", why);
    json_t *body = svc_req_json(req);
    static const char *const allowed[] = {"schema_version", NULL};
    long long sv;
    if (!json_is_object(body) || !route_only_members(body, allowed, why, sizeof(why)) ||
        !route_int_member(body, "schema_version", 1, 2147483647, 1, 0, &sv, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG), "%s", why);
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_producer_put(app->pool, topic, name, (int)sv, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v == DB_TOPIC_NOT_FOUND)
        return route_topic_problem(req, v, topic, NULL);
    return svc_reply_json(req, v == DB_TOPIC_CREATED ? 201 : 200,
                          json_pack("{s:s, s:s, s:I}", "topic", topic, "name", name,
                                    "schema_version", (json_int_t)sv));
}

/* ---- produce ---- */

int route_topic_message_parse(json_t *j, const char *producer, struct db_message_in *m,
                              char **value, char *why, size_t whysize)
{
    static const char *const allowed[] = {"key", "value", "rank", "sequence", NULL};
    memset(m, 0, sizeof(*m));
    *value = NULL;
    if (!json_is_object(j)) {
        snprintf(why, whysize, "a message is a JSON object");
        return 0;
    }
    if (!route_only_members(j, allowed, why, whysize))
        return 0;
    const char *key = json_string_value(json_object_get(j, "key"));
    if (key == NULL) {
        snprintf(why, whysize, "a message has a string \"key\"");
        return 0;
    }
    if (!route_key_ok(key, why, whysize))
        return 0;
    json_t *v = json_object_get(j, "value");
    if (v == NULL) {
        snprintf(why, whysize, "a message has a \"value\" (null for a tombstone)");
        return 0;
    }
    json_t *rank = json_object_get(j, "rank"), *seq = json_object_get(j, "sequence");
    if (rank != NULL && !json_is_integer(rank)) {
        snprintf(why, whysize, "\"rank\" is an integer");
        return 0;
    }
    if (seq != NULL && (!json_is_integer(seq) || json_integer_value(seq) < 0)) {
        snprintf(why, whysize, "\"sequence\" is a non-negative integer");
        return 0;
    }
    if (seq != NULL && producer == NULL) {
        snprintf(why, whysize, "a \"sequence\" needs a named \"producer\"");
        return 0;
    }
    m->key = key;
    if (!json_is_null(v)) {
        *value = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (*value == NULL) {
            snprintf(why, whysize, "cannot encode the value");
            return 0;
        }
    }
    m->value = *value;
    m->has_rank = rank != NULL;
    m->rank = json_integer_value(rank);
    m->has_sequence = seq != NULL;
    m->sequence = json_integer_value(seq);
    return 1;
}

static const char *effect_name(enum db_head_effect e)
{
    return e == DB_HEAD_ADVANCED        ? "advanced"
           : e == DB_HEAD_RANK_REJECTED ? "rank_rejected"
                                        : "duplicate";
}

json_t *route_topic_produced_json(const char *key, const struct db_message_out *o)
{
    return json_pack("{s:I, s:s, s:s, s:I}", "offset", (json_int_t)o->offset, "key", key, "head",
                     effect_name(o->effect), "head_offset", (json_int_t)o->head_offset);
}

/* A produce request parsed: its messages (values encoded) and whether it came as a batch. */
struct produce {
    const char *producer;
    int batch;
    size_t n;
    struct db_message_in *msgs;
    struct db_message_out *res;
    char **values;
    json_t *single; /* a single message: the body less "producer" */
};

static void produce_free(struct produce *p)
{
    for (size_t i = 0; p->values != NULL && i < p->n; i++)
        free(p->values[i]);
    free(p->values);
    free(p->msgs);
    free(p->res);
    json_decref(p->single);
}

/* The body's shape: a producer name, and one message or a batch within the limit. 0, or -1
 * after replying 400. */
static int produce_shape(struct svc_request *req, json_t *body, struct produce *p,
                         enum svc_outcome *out)
{
    char why[200];
    json_t *batch = json_object_get(body, "messages"), *pj = json_object_get(body, "producer");
    p->producer = json_string_value(pj);
    p->batch = batch != NULL;
    p->n = p->batch ? json_array_size(batch) : 1;
    if (!json_is_object(body))
        *out = svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE), "the body is a JSON object");
    else if (pj != NULL && (p->producer == NULL || !route_name_ok(p->producer, why, sizeof(why))))
        *out = svc_reply_problem(req, ROUTE_P(INVALID_NAME), "producer name: %s",
                                 p->producer ? why : "a string");
    else if (p->batch && (!json_is_array(batch) || p->n == 0))
        *out =
            svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE), "\"messages\" is a non-empty array");
    else if (p->n > DB_TOPIC_BATCH_MAX)
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a batch holds at most %d messages; this one has %zu",
                                 DB_TOPIC_BATCH_MAX, p->n);
    else if (p->batch && json_object_size(body) != (pj ? 2u : 1u))
        *out = svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE),
                                 "a batch body holds only \"producer\" and \"messages\"");
    else
        return 0;
    return -1;
}

/* Parses the body into p (produce_free it whatever the result). 0, or -1 after replying. */
static int produce_parse(struct svc_request *req, struct produce *p, enum svc_outcome *out)
{
    json_t *body = svc_req_json(req);
    if (produce_shape(req, body, p, out) != 0)
        return -1;
    p->msgs = calloc(p->n, sizeof(*p->msgs));
    p->res = calloc(p->n, sizeof(*p->res));
    p->values = calloc(p->n, sizeof(char *));
    if (!p->batch && (p->single = json_deep_copy(body)) != NULL)
        json_object_del(p->single, "producer");
    if (p->msgs == NULL || p->res == NULL || p->values == NULL || (!p->batch && !p->single)) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    char why[200];
    for (size_t i = 0; i < p->n; i++) {
        json_t *mj = p->batch ? json_array_get(json_object_get(body, "messages"), i) : p->single;
        if (!route_topic_message_parse(mj, p->producer, &p->msgs[i], &p->values[i], why,
                                       sizeof(why))) {
            *out = p->batch
                       ? svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE), "message %zu: %s", i, why)
                       : svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE), "%s", why);
            return -1;
        }
    }
    return 0;
}

/* 201 when a message was written (200 when every one was a duplicate): the one message, or the
 * batch's in order. */
static enum svc_outcome produce_render(struct svc_request *req, const struct produce *p)
{
    int written = 0;
    for (size_t i = 0; i < p->n; i++)
        written |= p->res[i].effect != DB_HEAD_DUPLICATE;
    if (!p->batch) {
        route_etag_set(req, p->res[0].head_offset);
        return svc_reply_json(req, written ? 201 : 200,
                              route_topic_produced_json(p->msgs[0].key, &p->res[0]));
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < p->n; i++)
        json_array_append_new(arr, route_topic_produced_json(p->msgs[i].key, &p->res[i]));
    return svc_reply_json(req, written ? 201 : 200, json_pack("{s:o}", "messages", arr));
}

void route_topic_produced(struct svc_request *req, const char *topic,
                          const struct db_message_out *out, size_t n)
{
    count_effects(topic, out, n);
    char channel[SVC_CHANNEL_MAX];
    svc_req_wake(req, route_topic_channel(topic, channel, sizeof(channel)));
}

static enum svc_outcome route_messages_produce(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    struct produce p = {0};
    const char *topic = route_name_param(req, "topic", &out);
    if (topic == NULL || produce_parse(req, &p, &out) != 0) {
        produce_free(&p);
        return out;
    }
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st =
        db_topics_produce(app->pool, topic, p.producer, p.msgs, p.n, p.res, &v, &err);
    if (st != DB_OK) {
        out = route_db_problem(req, st, &err);
    } else if (v != DB_TOPIC_OK) {
        out = route_topic_problem(req, v, topic, p.producer);
    } else {
        route_topic_produced(req, topic, p.res, p.n);
        out = produce_render(req, &p);
    }
    produce_free(&p);
    return out;
}

/* A live head as JSON (the caller's), or NULL when its stored value cannot be read (not JSON, or
 * out of memory): an error (500), never a head shown with null for its value. */
static json_t *head_json(const char *topic, const char *key, const struct db_head *h)
{
    json_t *value = h->value ? route_json_stored(h->value, strlen(h->value)) : NULL;
    if (value == NULL)
        return NULL;
    return json_pack("{s:s, s:s, s:I, s:I, s:i, s:o}", "topic", topic, "key", key, "offset",
                     (json_int_t)h->offset, "rank", (json_int_t)h->rank, "schema_version",
                     h->schema_version, "value", value);
}

static enum svc_outcome unreadable_head(struct svc_request *req, const char *key)
{
    return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot read the stored head of %s", key);
}

/* 404 for a key without a live head: head_not_found, or key_deleted with the tombstone. */
static enum svc_outcome no_head(struct svc_request *req, const char *key, const struct db_head *h)
{
    if (h->has_head && h->deleted) {
        route_etag_set(req, h->offset);
        return svc_reply_problem_ext(
            req, TOPIC_P(KEY_DELETED), json_pack("{s:I}", "offset", (json_int_t)h->offset),
            "key %s was deleted by the tombstone at offset %" PRId64, key, h->offset);
    }
    return svc_reply_problem(req, TOPIC_P(HEAD_NOT_FOUND), "key %s has no head", key);
}

static enum svc_outcome route_head_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    const char *key = topic ? route_topic_key_param(req, &out) : NULL;
    if (key == NULL)
        return out;
    struct db_head h;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_head_get(app->pool, topic, key, &h, &v, &err);
    if (st != DB_OK || v != DB_TOPIC_OK) {
        db_head_clear(&h);
        return st != DB_OK ? route_db_problem(req, st, &err)
                           : route_topic_problem(req, v, topic, NULL);
    }
    const char *inm = svc_req_header(req, "If-None-Match");
    if (!h.has_head || h.deleted)
        out = no_head(req, key, &h);
    else if (inm != NULL && route_etag_names(inm, h.offset, ROUTE_ETAG_WEAK)) {
        route_etag_set(req, h.offset); /* the client's copy is current: 304, no body */
        out = svc_reply_static(req, 304, "application/json", "", 0);
    } else {
        json_t *j = head_json(topic, key, &h);
        if (j != NULL)
            route_etag_set(req, h.offset);
        out = j != NULL ? svc_reply_json(req, 200, j) : unreadable_head(req, key);
    }
    db_head_clear(&h);
    return out;
}

enum head_kind { HEAD_PATCH, HEAD_PUT, HEAD_DELETE };

struct head_decision {
    enum head_kind kind;
    json_t *body;         /* the patch, or the new value */
    const char *if_match; /* header values, or NULL */
    const char *if_none_match;
    int precondition_failed;
    json_t *value; /* what was (or would have been) produced */
};

/* Does the If-Match / If-None-Match of d hold for the current head? */
static int preconditions_hold(const struct head_decision *d, const struct db_head *cur)
{
    int live = cur->has_head && !cur->deleted;
    if (d->if_none_match != NULL && live &&
        route_etag_names(d->if_none_match, cur->offset, ROUTE_ETAG_WEAK))
        return 0;
    if (d->if_match == NULL)
        return 1;
    return live && route_etag_names(d->if_match, cur->offset, ROUTE_ETAG_STRONG);
}

/* The db_head_decide of head writes: runs under the key's row lock. */
static int decide_head(const struct db_head *cur, char **value, void *ctx)
{
    struct head_decision *d = ctx;
    json_decref(d->value);
    d->value = NULL;
    d->precondition_failed = 0;
    *value = NULL;
    if (!preconditions_hold(d, cur)) {
        d->precondition_failed = 1;
        return 1; /* nothing produced; the lock (and a headless row) still commits */
    }
    if (d->kind == HEAD_DELETE)
        return 0; /* a tombstone */
    if (d->kind == HEAD_PUT) {
        d->value = json_incref(d->body);
    } else {
        int live = cur->has_head && !cur->deleted;
        json_t *target = !live        ? json_object()
                         : cur->value ? route_json_stored(cur->value, strlen(cur->value))
                                      : NULL;
        if (target == NULL)
            return -1; /* never merged onto null: the head written would lose what it had */
        d->value = route_merge_patch(target, d->body);
        int same = d->value != NULL && json_equal(d->value, target);
        json_decref(target);
        if (d->value == NULL)
            return -1;
        if (same)
            return 1; /* the patch changes nothing: no message */
    }
    *value = json_dumps(d->value, JSON_COMPACT | JSON_ENCODE_ANY);
    return *value ? 0 : -1;
}

/* The head as JSON, json_null() when there is none; NULL when it cannot be read (head_json). */
static json_t *head_or_null(const char *topic, const char *key, const struct db_head *h)
{
    return h->has_head && !h->deleted ? head_json(topic, key, h) : json_null();
}

/* The answer to a head write that ran: its refusal, its unchanged head, or what it wrote. */
static enum svc_outcome head_render(struct svc_request *req, const struct db_head_write *w,
                                    const struct head_decision *d)
{
    const char *topic = w->topic, *key = w->key;
    if (w->verdict == DB_TOPIC_NOT_FOUND || w->verdict == DB_TOPIC_PRODUCER_NOT_FOUND)
        return route_topic_problem(req, w->verdict, topic, w->producer);
    json_t *j = NULL;
    if ((d->precondition_failed || w->verdict == DB_TOPIC_UNCHANGED) &&
        (j = head_or_null(topic, key, &w->before)) == NULL)
        return unreadable_head(req, key);
    if (d->precondition_failed) {
        if (w->before.has_head && !w->before.deleted)
            route_etag_set(req, w->before.offset);
        return svc_reply_problem_ext(req, TOPIC_P(PRECONDITION_FAILED),
                                     json_pack("{s:o}", "current", j),
                                     "the head of %s does not match the precondition", key);
    }
    if (w->verdict == DB_TOPIC_UNCHANGED) {
        if (json_is_null(j)) {
            json_decref(j);
            j = json_pack("{s:s, s:s, s:n, s:O}", "topic", topic, "key", key, "offset", "value",
                          d->value);
        } else {
            route_etag_set(req, w->before.offset);
        }
        json_object_set_new(j, "produced", json_false());
        return svc_reply_json(req, 200, j);
    }
    count_effects(topic, &w->produced, 1);
    char channel[SVC_CHANNEL_MAX];
    svc_req_wake(req, route_topic_channel(topic, channel, sizeof(channel)));
    route_etag_set(req, w->produced.head_offset);
    j = route_topic_produced_json(key, &w->produced);
    json_object_set_new(j, "topic", json_string(topic));
    json_object_set(j, "value", d->value ? d->value : json_null());
    json_object_set_new(j, "produced", json_true());
    return svc_reply_json(req, 200, j);
}

static enum svc_outcome head_write(struct svc_request *req, enum head_kind kind)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    const char *key = topic ? route_topic_key_param(req, &out) : NULL;
    const char *producer = NULL;
    if (key == NULL || producer_query(req, &producer, &out) != 0)
        return out;
    json_t *body = svc_req_json(req);
    if (kind == HEAD_PATCH && !json_is_object(body))
        return svc_reply_problem(req, TOPIC_P(INVALID_MERGE_PATCH),
                                 "a merge patch is a JSON object (to replace the value with "
                                 "something else, use PUT)");
    if (kind == HEAD_PUT && json_is_null(body))
        return svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE),
                                 "a head value is not null (DELETE the head to write a "
                                 "tombstone)");
    struct head_decision d = {
        kind, body, svc_req_header(req, "If-Match"), svc_req_header(req, "If-None-Match"), 0, NULL};
    struct db_head_write w = {
        .topic = topic, .key = key, .producer = producer, .decide = decide_head, .ctx = &d};
    /* At most ROWLOCK_KEY_WRITERS writes of a key wait on its row lock; the others wait here,
     * suspended, up to a statement timeout. */
    unsigned slot;
    if (!svc_gate_req_enter(req, head_gate, topic, key,
                            (double)app->config->statement_timeout_ms / 1000.0, &slot, &out))
        return out;
    struct db_error err;
    enum db_status st = db_topics_head_write(app->pool, &w, &err);
    svc_gate_req_exit(req, head_gate, slot);
    if (svc_req_resumes(req) > 0 && st == DB_OK && w.verdict != DB_TOPIC_NOT_FOUND)
        svc_counter_vec_add(m_gate_waits, topic, 1); /* it queued; no label for a non-topic */
    if (st != DB_OK)
        out = route_db_problem(req, st, &err);
    else
        out = head_render(req, &w, &d);
    json_decref(d.value);
    db_head_clear(&w.before);
    return out;
}

static enum svc_outcome route_head_patch(struct svc_request *req)
{
    return head_write(req, HEAD_PATCH);
}

static enum svc_outcome route_head_put(struct svc_request *req)
{
    return head_write(req, HEAD_PUT);
}

static enum svc_outcome route_head_delete(struct svc_request *req)
{
    return head_write(req, HEAD_DELETE);
}

/* ---- metrics and janitor ---- */

static void headless_one(const char *topic, int64_t rows, double age, int64_t ttl, void *ctx)
{
    struct svc_buf *b = ctx;
    struct svc_buf l;
    svc_buf_init(&l, 1024);
    svc_metrics_label(&l, "topic", topic);
    svc_metrics_sample(b, "rowlock_topic_headless_rows", l.data, (double)rows);
    svc_metrics_sample(b, "rowlock_topic_headless_oldest_age_seconds", l.data, age);
    svc_metrics_sample(b, "rowlock_topic_headless_ttl_seconds", l.data, (double)ttl);
    svc_buf_free(&l);
}

/* A topic whose gauges or janitor work failed: counted (per topic, so the broken one is named)
 * and logged; the other topics are served all the same. */
static void metrics_failed(const char *topic, enum db_status st, const struct db_error *err,
                           void *ctx)
{
    (void)ctx;
    svc_counter_vec_add(m_metrics_failures, topic, 1);
    svc_log(SVC_LOG_WARN, "topic gauges failed", "topic", topic, "status", db_status_name(st),
            "sqlstate", err->sqlstate, "detail", err->message, NULL);
}

static void route_topics_render_metrics(struct svc_buf *b, struct svc_app *app)
{
    struct svc_buf rows;
    svc_buf_init(&rows, 16 * 1024 * 1024);
    struct db_error err;
    enum db_status st = db_topics_headless(app->pool, (int)app->config->metrics_max_resources,
                                           headless_one, metrics_failed, &rows, &err);
    /* samples of the families are interleaved per topic; Prometheus text format wants each
     * family's samples together under its header, so split them */
    static const struct {
        const char *name, *help;
    } families[] = {
        {"rowlock_topic_headless_rows",
         "Headless compaction-head rows (locked keys without a head), capped"},
        {"rowlock_topic_headless_oldest_age_seconds",
         "Age of the oldest headless row since it was last locked"},
        {"rowlock_topic_headless_ttl_seconds",
         "The topic's headless_ttl_seconds: the janitor deletes headless rows older than this"},
    };
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        svc_metrics_family_from(b, st == DB_OK ? rows.data : NULL, families[f].name, "gauge",
                                families[f].help);
    }
    svc_metrics_family(b, "rowlock_topic_metrics_up", "gauge",
                       "1 when the topics could be listed for the per-topic gauges above (a "
                       "topic whose gauges fail is left out and counted in "
                       "rowlock_topic_metrics_failures_total)");
    svc_metrics_sample(b, "rowlock_topic_metrics_up", NULL, st == DB_OK ? 1 : 0);
    svc_buf_free(&rows);
    route_topic_consumers_render_metrics(b, app);
}

static void janitor_one(const char *topic, int64_t deleted, int64_t compacted, void *ctx)
{
    (void)ctx;
    svc_counter_vec_add(m_janitor_visits, "ok", 1);
    if (deleted > 0)
        svc_counter_vec_add(m_janitor_deleted, topic, (uint64_t)deleted);
    if (compacted > 0)
        svc_counter_vec_add(m_compacted, topic, (uint64_t)compacted);
}

static void janitor_failed(const char *topic, enum db_status st, const struct db_error *err,
                           void *ctx)
{
    (void)ctx;
    svc_counter_vec_add(m_janitor_visits, "failed", 1);
    svc_counter_vec_add(m_janitor_failures, topic, 1);
    svc_log(SVC_LOG_WARN, "topic janitor failed on a topic", "topic", topic, "status",
            db_status_name(st), "sqlstate", err->sqlstate, "detail", err->message, NULL);
}

static void route_topics_janitor_pass(void *ctx)
{
    struct svc_app *app = ctx;
    struct db_error err;
    enum db_status st = db_topics_janitor(app->pool, (int)app->config->janitor_batch, janitor_one,
                                          janitor_failed, NULL, &err);
    if (st != DB_OK)
        svc_log(SVC_LOG_WARN, "topic janitor pass failed", "status", db_status_name(st), "detail",
                err.message, NULL);
}

static const struct svc_route topic_routes[] = {
    {"GET", "/topics", route_topics_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"PUT", "/topics/{topic}", route_topic_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}", route_topic_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/topics/{topic}", route_topic_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PUT", "/topics/{topic}/producers/{producer}", route_producer_put, SVC_SCOPE_ADMIN,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/topics/{topic}/messages", route_messages_produce, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/messages", route_messages_read, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/keys", route_keys_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/keys/{key}/messages", route_key_history, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/keys/{key}/head", route_head_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PATCH", "/topics/{topic}/keys/{key}/head", route_head_patch, SVC_SCOPE_WRITE,
     SVC_BODY_MERGE_PATCH, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PUT", "/topics/{topic}/keys/{key}/head", route_head_put, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/topics/{topic}/keys/{key}/head", route_head_delete, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/consumers", route_consumers_list, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"PUT", "/topics/{topic}/consumers/{consumer}", route_consumer_put, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/consumers/{consumer}", route_consumer_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/topics/{topic}/consumers/{consumer}", route_consumer_delete, SVC_SCOPE_WRITE,
     SVC_BODY_NONE, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/topics/{topic}/consumers/{consumer}/commit", route_consumer_commit, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_topics_family = {
    .name = "topics",
    .resource = "topic",
    .upkeep = &db_topics_upkeep,
    .routes = topic_routes,
    .nroutes = sizeof(topic_routes) / sizeof(topic_routes[0]),
    .problems = topic_problems,
    .nproblems = TOPIC_PC_COUNT,
    .init = route_topics_init,
    .fini = route_topics_fini,
    .render_metrics = route_topics_render_metrics,
    .janitor_pass = route_topics_janitor_pass,
};
