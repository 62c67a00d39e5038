/* REST routes of topic reads: GET .../messages (gap-safe log reads, from an offset or a
 * consumer's, long-polling for what comes next), GET .../keys and a key's history. Pages are
 * bounded by count and by the response budget. Part of the topics family (routes/topics.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/topics.h"
#include "routes/topics.h"
#include "service/app.h"
#include "service/jpage.h"

/* Optional ?consumer= of a log read (NULL when absent), which `after` may not go with. Returns
 * 0, or -1 after replying 400. */
static int consumer_query(struct svc_request *req, const char **consumer, enum svc_outcome *out)
{
    *consumer = svc_req_query(req, "consumer");
    if (*consumer != NULL && route_valid_name(req, *consumer, "consumer", out) != 0)
        return -1;
    if (*consumer != NULL && svc_req_query(req, "after") != NULL) {
        *out = svc_reply_problem(req, SVC_P(INVALID_PARAMETER),
                                 "give after or consumer, not both: a consumer's read starts "
                                 "after its committed offset");
        return -1;
    }
    return 0;
}

/* ---- log reads and key lists: pages bounded by count and by the response budget ---- */

static size_t response_budget(struct svc_request *req)
{
    return (size_t)((struct svc_app *)svc_req_app(req))->config->response_budget;
}

/* Appends one item to page (ctx) unless it would go past the budget: 0, or 1 when the page is
 * full (the item starts the next page). The value is spliced in as the text PostgreSQL sent. */
static int page_item(struct svc_jpage *p, json_t *env, const char *value, size_t len)
{
    if (svc_jpage_full(p, value ? len : 0)) {
        json_decref(env);
        return 1;
    }
    struct svc_jpage_raw raw = {"value", value, len};
    svc_jpage_item(p, env, &raw, 1);
    return p->failed;
}

static int log_one(const struct db_log_message *m, void *ctx)
{
    json_t *env = json_pack(
        "{s:I, s:s, s:o, s:I, s:i, s:s}", "offset", (json_int_t)m->offset, "key", m->key,
        "producer", m->producer ? json_string(m->producer) : json_null(), "rank",
        (json_int_t)m->rank, "schema_version", m->schema_version, "created_at", m->created_at);
    return page_item(ctx, env, m->value, m->value_len);
}

/* Replies 200 with the finished page, tail (stolen) merged in, or 500 when it failed. */
static enum svc_outcome reply_page(struct svc_request *req, struct svc_jpage *p, json_t *tail)
{
    size_t len = 0;
    char *text = svc_jpage_finish(p, tail, &len);
    if (text == NULL)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the page");
    return svc_reply_raw(req, 200, "application/json", text, len);
}

enum svc_outcome route_messages_read(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    if (topic == NULL)
        return out;
    long long after, limit, wait;
    const char *consumer = NULL;
    /* after + 1 is the first offset read: it must stay a bigint */
    if (route_int_query(req, "after", 0, DB_TOPIC_OFFSET_MAX - 1, 0, &after, &out) != 0 ||
        route_int_query(req, "limit", 1, DB_TOPIC_READ_MAX, 100, &limit, &out) != 0 ||
        route_int_query(req, "wait", 0, app->config->max_wait_s, 0, &wait, &out) != 0 ||
        consumer_query(req, &consumer, &out) != 0 || svc_poll_admit(req, (double)wait, &out))
        return out;
    struct svc_poll poll = svc_poll_begin(req, (double)wait);
    struct svc_jpage page;
    svc_jpage_begin(&page, "messages", response_budget(req));
    int64_t next = after, from = after;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st =
        consumer == NULL
            ? db_topics_read_log(app->pool, topic, after, (int)limit, page.budget, log_one, &page,
                                 &next, &v, &err)
            : db_topics_read_consumer_log(app->pool, topic, consumer, (int)limit, page.budget,
                                          log_one, &page, &from, &next, &v, &err);
    after = from;
    if (st != DB_OK || v != DB_TOPIC_OK) {
        svc_jpage_free(&page);
        return st != DB_OK ? route_db_problem(req, st, &err)
                           : route_topic_problem(req, v, topic, consumer);
    }
    /* nothing new yet: wait (no thread, no connection held) until a produce or the deadline */
    if (page.items == 0 && next == after && svc_poll_may_wait(req, &poll)) {
        svc_jpage_free(&page);
        char channel[SVC_CHANNEL_MAX];
        return svc_poll_wait(req, &poll, route_topic_channel(topic, channel, sizeof(channel)));
    }
    return reply_page(req, &page, json_pack("{s:I}", "next", (json_int_t)next));
}

struct key_page {
    struct svc_jpage page;
    char *last; /* the last key written (malloc'd) */
};

static int key_one(const struct db_key_entry *k, void *ctx)
{
    struct key_page *kp = ctx;
    json_t *env = json_pack("{s:s, s:I, s:I, s:i, s:s}", "key", k->key, "offset",
                            (json_int_t)k->offset, "rank", (json_int_t)k->rank, "schema_version",
                            k->schema_version, "updated_at", k->updated_at);
    int rc = page_item(&kp->page, env, k->value, k->value_len);
    if (rc == 0) {
        free(kp->last);
        kp->last = strdup(k->key);
        if (kp->last == NULL)
            kp->page.failed = rc = 1;
    }
    return rc;
}

enum svc_outcome route_keys_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    if (topic == NULL)
        return out;
    long long limit;
    const char *after = NULL;
    if (route_int_query(req, "limit", 1, DB_TOPIC_READ_MAX, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    struct key_page kp = {.last = NULL};
    svc_jpage_begin(&kp.page, "keys", response_budget(req));
    int more = 0;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_list_keys(app->pool, topic, after, (int)limit, kp.page.budget,
                                            key_one, &kp, &more, &v, &err);
    if (st != DB_OK || v != DB_TOPIC_OK) {
        svc_jpage_free(&kp.page);
        free(kp.last);
        return st != DB_OK ? route_db_problem(req, st, &err)
                           : route_topic_problem(req, v, topic, NULL);
    }
    json_t *next = more && kp.last ? json_string(kp.last) : json_null();
    free(kp.last);
    return reply_page(req, &kp.page, json_pack("{s:o}", "next", next));
}

/* GET /topics/{topic}/keys/{key}/messages: the key's messages, newest first, a window of the log
 * at a time (see db_topics_key_history); next (or null at the log's start) goes in before. */
enum svc_outcome route_key_history(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *topic = route_name_param(req, "topic", &out);
    const char *key = topic ? route_topic_key_param(req, &out) : NULL;
    long long before, limit;
    if (key == NULL ||
        route_int_query(req, "before", 1, DB_TOPIC_OFFSET_MAX, 0, &before, &out) != 0 ||
        route_int_query(req, "limit", 1, DB_TOPIC_READ_MAX, 100, &limit, &out) != 0)
        return out;
    struct svc_jpage page;
    svc_jpage_begin(&page, "messages", response_budget(req));
    int64_t next = 0;
    enum db_topic_verdict v;
    struct db_error err;
    enum db_status st = db_topics_key_history(app->pool, topic, key, before, (int)limit,
                                              page.budget, log_one, &page, &next, &v, &err);
    if (st != DB_OK || v != DB_TOPIC_OK) {
        svc_jpage_free(&page);
        return st != DB_OK ? route_db_problem(req, st, &err)
                           : route_topic_problem(req, v, topic, NULL);
    }
    return reply_page(
        req, &page,
        json_pack("{s:s, s:o}", "key", key, "next", next > 0 ? json_integer(next) : json_null()));
}
