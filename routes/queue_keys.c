/* REST routes of a queue's concurrency keys: /queues/{queue}/keys/{key}. A key needs no
 * creating: a job names it (concurrency_key) and the queue's key_limits apply to it. PUT gives
 * one key limits of its own (a tenant on a larger plan), DELETE takes them back, GET shows any
 * key's limits in effect and its live leases, and the listing shows the keys with limits of
 * their own. */
#include <string.h>

#include "db/queues.h"
#include "routes/json_util.h"
#include "routes/queues.h"
#include "routes/routes.h"
#include "service/app.h"

static json_t *key_json(const struct db_queue_key *k)
{
    json_t *j = json_pack("{s:s, s:b, s:I}", "key", k->key, "own_limits", k->own, "processing",
                          (json_int_t)k->processing);
    j = queue_with(j, "limits", k->own ? queue_limits_json(&k->limits) : json_null());
    j = queue_with(j, "limits_in_effect", queue_limits_json(&k->in_effect));
    j = queue_with(j, "created_at", k->own ? json_string(k->created_at) : json_null());
    return queue_with(j, "updated_at", k->own ? json_string(k->updated_at) : json_null());
}

/* The {queue} and {key} path parameters; NULL after replying 400. */
static const char *key_params(struct svc_request *req, const char **queue, enum svc_outcome *out)
{
    *queue = route_name_param(req, "queue", out);
    if (*queue == NULL)
        return NULL;
    const char *key = svc_req_param(req, "key");
    char why[160];
    if (key == NULL || !route_key_ok(key, why, sizeof(why))) {
        *out = svc_reply_problem(req, ROUTE_P(INVALID_KEY), "concurrency key: %s",
                                 key == NULL ? "missing" : why);
        return NULL;
    }
    return key;
}

enum svc_outcome route_queue_key_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue;
    const char *key = key_params(req, &queue, &out);
    if (key == NULL)
        return out;
    json_t *b = svc_req_json(req);
    static const char *const allowed[] = {"limits", NULL};
    char why[200] = "the body is a JSON object: {\"limits\": {\"concurrency\": N, \"rate\": ...}}";
    struct db_queue_limits limits;
    if (!json_is_object(b) || !route_only_members(b, allowed, why, sizeof(why)) ||
        !queue_limits_parse(b, "limits", &limits, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG), "%s", why);
    if (limits.concurrency == 0 && limits.rate == 0)
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG),
                                 "\"limits\" sets a concurrency or a rate (DELETE takes a key's "
                                 "own limits back)");
    struct db_queue_key k = {0};
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queue_key_put(app->pool, queue, key, &limits, &k, &v, &err);
    if (st != DB_OK || (v != DB_Q_OK && v != DB_Q_CREATED)) {
        db_queue_key_clear(&k);
        return queue_refused(req, st, &err, queue, v, 0);
    }
    out = svc_reply_json(req, v == DB_Q_CREATED ? 201 : 200, key_json(&k));
    db_queue_key_clear(&k);
    queue_wake(req, queue, -1); /* a larger limit may let waiting claims take jobs */
    return out;
}

enum svc_outcome route_queue_key_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue;
    const char *key = key_params(req, &queue, &out);
    if (key == NULL)
        return out;
    struct db_queue_key k = {0};
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queue_key_get(app->pool, queue, key, &k, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        out = queue_refused(req, st, &err, queue, v, 0);
    else
        out = svc_reply_json(req, 200, key_json(&k));
    db_queue_key_clear(&k);
    return out;
}

enum svc_outcome route_queue_key_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *queue;
    const char *key = key_params(req, &queue, &out);
    if (key == NULL)
        return out;
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st = db_queue_key_delete(app->pool, queue, key, &v, &err);
    if (st != DB_OK || v != DB_Q_OK)
        return queue_refused(req, st, &err, queue, v, 0);
    queue_wake(req, queue, -1);
    return svc_reply_json(req, 200, json_pack("{s:s, s:b}", "key", key, "deleted", 1));
}

static void key_one(const struct db_queue_key *k, void *ctx)
{
    json_t **arr = ctx;
    *arr = queue_appended(*arr, key_json(k));
}

enum svc_outcome route_queue_keys_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    long long limit;
    const char *after = NULL;
    const char *queue = route_name_param(req, "queue", &out);
    if (queue == NULL || route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    json_t *arr = json_array();
    enum db_queue_verdict v;
    struct db_error err;
    enum db_status st =
        db_queue_keys_list(app->pool, queue, after, (int)limit, key_one, &arr, &v, &err);
    if (st != DB_OK || v != DB_Q_OK) {
        json_decref(arr);
        return queue_refused(req, st, &err, queue, v, 0);
    }
    size_t n = json_array_size(arr);
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(arr, n - 1), "key"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "keys", arr, "next", next));
}
