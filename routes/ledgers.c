/* REST routes of ledgers: /ledgers/{ledger}, optimistic transactions (dependency check, bounded
 * wait, then one short transaction), checkpoints, and reads of transactions, objects, displays
 * and the event log. Each handler validates (including what makes a transaction malformed),
 * calls db/ledgers.c and maps its verdict. Also ledger metrics and the janitor pass. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/ledgers.h"
#include "routes/etag.h"
#include "routes/json_util.h"
#include "routes/ledgers.h"
#include "routes/routes.h"
#include "service/app.h"
#include "service/gauge_cache.h"
#include "service/jpage.h"
#include "service/log.h"
#include "service/metrics.h"

/* The codes only ledgers answer (registered through the family; listed in openapi.json). */
enum ledger_problem {
    LEDGER_PC_INVALID_TRANSACTION,
    LEDGER_PC_INVALID_CHECKPOINT,
    LEDGER_PC_LEDGER_NOT_FOUND,
    LEDGER_PC_TRANSACTION_NOT_FOUND,
    LEDGER_PC_OBJECT_NOT_FOUND,
    LEDGER_PC_OBJECT_DELETED,
    LEDGER_PC_DISPLAY_NOT_FOUND,
    LEDGER_PC_DEPENDENCIES_PENDING,
    LEDGER_PC_SUPERSEDED,
    LEDGER_PC_BELOW_HORIZON,
    LEDGER_PC_COUNT
};
static const struct svc_problem_info ledger_problems[LEDGER_PC_COUNT] = {
    [LEDGER_PC_INVALID_TRANSACTION] = {"invalid_transaction", 400, "Invalid transaction"},
    [LEDGER_PC_INVALID_CHECKPOINT] = {"invalid_checkpoint", 400, "Invalid checkpoint"},
    [LEDGER_PC_LEDGER_NOT_FOUND] = {"ledger_not_found", 404, "No such ledger"},
    [LEDGER_PC_TRANSACTION_NOT_FOUND] = {"transaction_not_found", 404, "Transaction not executed"},
    [LEDGER_PC_OBJECT_NOT_FOUND] = {"object_not_found", 404, "No such object"},
    [LEDGER_PC_OBJECT_DELETED] = {"object_deleted", 404, "Object deleted"},
    [LEDGER_PC_DISPLAY_NOT_FOUND] = {"display_not_found", 404, "No such display"},
    [LEDGER_PC_DEPENDENCIES_PENDING] = {"dependencies_pending", 409,
                                        "Inputs not yet at their versions"},
    [LEDGER_PC_SUPERSEDED] = {"superseded", 409, "Inputs already past their versions"},
    [LEDGER_PC_BELOW_HORIZON] = {"below_horizon", 409, "Below the ledger's horizon"},
};
#define LEDGER_P(name) (&ledger_problems[LEDGER_PC_##name])

#define DEFAULT_TOMBSTONE_RETENTION 86400
#define OPTIMISTIC_LOCK_TIMEOUT_MS  1000

static struct svc_counter_vec *m_applied, *m_skipped, *m_waits, *m_superseded, *m_purged,
    *m_gauge_failures, *m_janitor_failures, *m_janitor_visits;
static pthread_once_t metrics_once = PTHREAD_ONCE_INIT;

static void metrics_init(void)
{
    m_applied = svc_counter_vec_new("rowlock_ledger_transactions_applied_total",
                                    "Transactions applied, by ingestion path", "ledger,path");
    m_skipped =
        svc_counter_vec_new("rowlock_ledger_transactions_skipped_total",
                            "Transactions skipped as already executed, by path", "ledger,path");
    m_waits = svc_counter_vec_new("rowlock_ledger_dependency_waits_total",
                                  "Optimistic submissions that waited for their inputs, by "
                                  "outcome",
                                  "ledger,outcome");
    m_superseded = svc_counter_vec_new("rowlock_ledger_superseded_total",
                                       "Optimistic submissions refused as superseded", "ledger");
    m_purged = svc_counter_vec_new("rowlock_ledger_tombstones_purged_total",
                                   "Tombstones purged below the horizon", "ledger");
    m_gauge_failures = svc_counter_vec_new("rowlock_ledger_metrics_failures_total",
                                           "Scrapes in which a ledger's gauges could not be read "
                                           "(its gauges are then missing)",
                                           "ledger");
    m_janitor_failures = svc_counter_vec_new("rowlock_ledger_janitor_failures_total",
                                             "Janitor passes that failed for a ledger (the other "
                                             "ledgers are still cleaned)",
                                             "ledger");
    m_janitor_visits = svc_counter_vec_new(
        "rowlock_ledger_janitor_visits_total",
        "Ledgers this process's janitor worked on, by outcome: only ledgers whose upkeep was due "
        "(rowlock.upkeep), claimed so that no other process does the same",
        "outcome");
}

static int route_ledgers_init(const struct svc_app *app)
{
    (void)app;
    pthread_once(&metrics_once, metrics_init);
    /* one series per ledger, up to ROWLOCK_METRICS_MAX_RESOURCES (then ledger="_other") */
    struct svc_counter_vec *per_ledger[] = {m_applied,         m_skipped, m_waits,
                                            m_superseded,      m_purged,  m_gauge_failures,
                                            m_janitor_failures};
    for (size_t i = 0; i < sizeof(per_ledger) / sizeof(per_ledger[0]); i++)
        svc_counter_vec_bound(per_ledger[i]);
    return 0;
}

static void count2(struct svc_counter_vec *v, const char *ledger, const char *label, uint64_t n)
{
    char labels[200];
    snprintf(labels, sizeof(labels), "%s\x1f%s", ledger, label);
    if (n > 0)
        svc_counter_vec_add(v, labels, n);
}

static const char *channel_of(const char *ledger, char *buf, size_t size)
{
    return svc_family_channel(&route_ledgers_family, ledger, buf, size);
}

static enum svc_outcome verdict_problem(struct svc_request *req, const char *ledger,
                                        enum db_ledger_verdict v, const char *what)
{
    switch (v) {
    case DB_L_NOT_FOUND:
        return svc_reply_problem(req, LEDGER_P(LEDGER_NOT_FOUND), "there is no ledger %s", ledger);
    case DB_L_TX_NOT_FOUND:
        return svc_reply_problem(req, LEDGER_P(TRANSACTION_NOT_FOUND),
                                 "transaction %s has not been executed in ledger %s", what, ledger);
    case DB_L_OBJECT_NOT_FOUND:
        return svc_reply_problem(req, LEDGER_P(OBJECT_NOT_FOUND), "ledger %s has no object %s",
                                 ledger, what);
    case DB_L_DISPLAY_NOT_FOUND:
        return svc_reply_problem(req, LEDGER_P(DISPLAY_NOT_FOUND), "ledger %s has no display %s",
                                 ledger, what);
    case DB_L_BELOW_HORIZON:
        return svc_reply_problem(req, LEDGER_P(BELOW_HORIZON),
                                 "checkpoint %s is at or below the ledger's horizon, where "
                                 "tombstones may have been purged",
                                 what);
    default:
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "unexpected ledger verdict %d", v);
    }
}

static json_t *status_json(const char *digest, const struct db_ledger_status *s)
{
    return json_pack("{s:s, s:b, s:o, s:o, s:o}", "digest", digest, "executed", s->executed, "path",
                     s->path[0] ? json_string(s->path) : json_null(), "checkpoint",
                     s->checkpoint > 0 ? json_integer(s->checkpoint) : json_null(), "executed_at",
                     s->executed_at[0] ? json_string(s->executed_at) : json_null());
}

/* The answer when a request could not be held in memory (a 500, never a 400 blaming it). */
static enum svc_outcome out_of_memory(struct svc_request *req)
{
    return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
}

/* Counts what an ingestion path applied and skipped, wakes the ledger's waiters when this call
 * applied something, and replies 201 (applied) or 200 (a replay) with body (stolen; NULL: 500). */
static enum svc_outcome reply_ingested(struct svc_request *req, const char *ledger,
                                       const char *path, enum db_ledger_verdict v, size_t applied,
                                       size_t skipped, json_t *body)
{
    count2(m_applied, ledger, path, applied);
    count2(m_skipped, ledger, path, skipped);
    char channel[SVC_CHANNEL_MAX];
    if (v == DB_L_APPLIED)
        svc_req_wake(req, channel_of(ledger, channel, sizeof(channel)));
    return svc_reply_json(req, v == DB_L_APPLIED ? 201 : 200, body);
}

/* ---- handlers ---- */

/* A ledger as GET shows it (with its counts when c is given); NULL when out of memory. */
static json_t *ledger_json(const struct db_ledger *l, const struct db_ledger_counts *c)
{
    json_t *j = json_pack("{s:s, s:I, s:I, s:s}", "name", l->name, "tombstone_retention_seconds",
                          (json_int_t)l->tombstone_retention_seconds, "horizon",
                          (json_int_t)l->horizon, "created_at", l->created_at);
    if (j == NULL || c == NULL)
        return j;
    if (json_object_set_new(j, "watermark", json_integer(c->watermark)) != 0 ||
        json_object_set_new(j, "counts",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "objects",
                                      (json_int_t)c->objects, "tombstones",
                                      (json_int_t)c->tombstones, "transactions",
                                      (json_int_t)c->transactions, "pending_transactions",
                                      (json_int_t)c->pending, "events", (json_int_t)c->events,
                                      "checkpoints", (json_int_t)c->checkpoints)) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static enum svc_outcome route_ledger_put(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "ledger", &out);
    if (name == NULL)
        return out;
    json_t *b = svc_req_json(req);
    static const char *const allowed[] = {"tombstone_retention_seconds", NULL};
    long long retention;
    char why[160] = "the body must be a JSON object";
    if (!json_is_object(b) || !route_only_members(b, allowed, why, sizeof(why)) ||
        !route_int_member(b, "tombstone_retention_seconds", 1, 2147483647,
                          DEFAULT_TOMBSTONE_RETENTION, 0, &retention, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_CONFIG), "%s", why);
    struct db_ledger l;
    enum db_ledger_verdict v;
    struct db_error err;
    enum db_status st = db_ledgers_put(app->pool, name, retention, &l, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    return svc_reply_json(req, v == DB_L_APPLIED ? 201 : 200, ledger_json(&l, NULL));
}

/* The ledgers of a page as they are read; failed once one could not be added. */
struct ledger_page {
    json_t *ledgers;
    int failed;
};

static void list_one(const struct db_ledger *l, const struct db_ledger_counts *c, void *ctx)
{
    struct ledger_page *page = ctx;
    if (json_array_append_new(page->ledgers, ledger_json(l, c)) != 0)
        page->failed = 1;
}

/* GET /ledgers: a page of ledgers by name, each as GET /ledgers/{ledger} shows it. */
static enum svc_outcome route_ledgers_list(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    long long limit;
    const char *after = NULL;
    if (route_int_query(req, "limit", 1, DB_LEDGER_LIST_MAX, 100, &limit, &out) != 0 ||
        route_cursor_query(req, &after, &out) != 0)
        return out;
    struct ledger_page page = {json_array(), 0};
    struct db_error err;
    enum db_status st = db_ledgers_list(app->pool, after, (int)limit, list_one, &page, &err);
    if (st != DB_OK || page.ledgers == NULL || page.failed) {
        json_decref(page.ledgers);
        return st != DB_OK
                   ? route_db_problem(req, st, &err)
                   : svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the ledgers");
    }
    size_t n = json_array_size(page.ledgers);
    json_t *next = n == (size_t)limit
                       ? json_incref(json_object_get(json_array_get(page.ledgers, n - 1), "name"))
                       : json_null();
    return svc_reply_json(req, 200, json_pack("{s:o, s:o}", "ledgers", page.ledgers, "next", next));
}

static enum svc_outcome route_ledger_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "ledger", &out);
    if (name == NULL)
        return out;
    struct db_ledger l;
    struct db_ledger_counts c;
    enum db_ledger_verdict v;
    struct db_error err;
    enum db_status st = db_ledgers_get(app->pool, name, &l, &c, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_L_OK)
        return verdict_problem(req, name, v, name);
    return svc_reply_json(req, 200, ledger_json(&l, &c));
}

static enum svc_outcome route_ledger_delete(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *name = route_name_param(req, "ledger", &out);
    if (name == NULL)
        return out;
    enum db_ledger_verdict v;
    struct db_error err;
    enum db_status st = db_ledgers_delete(app->pool, name, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_L_OK)
        return verdict_problem(req, name, v, name);
    return svc_reply_json(req, 200, json_pack("{s:s, s:b}", "name", name, "deleted", 1));
}

/* ---- optimistic ingestion ---- */

/* A POST /ledgers/{ledger}/transactions as parsed; free with parsed_tx_free(&s->p). */
struct submission {
    const char *ledger;
    struct parsed_tx p;
    long long wait_seconds;
};

/* What a db/ ingestion workflow answered. */
struct ingested {
    enum db_status st;
    enum db_ledger_verdict v;
    struct db_ledger_status status; /* optimistic: the transaction's row as it ends */
    size_t applied, skipped;        /* checkpoint: its transactions applied and skipped */
    struct db_error err;
};

/* 0 with s filled, or -1 after replying (in *out) with nothing left to free. */
static int submission_parse(struct svc_request *req, struct submission *s, enum svc_outcome *out)
{
    struct svc_app *app = svc_req_app(req);
    memset(s, 0, sizeof(*s));
    s->ledger = route_name_param(req, "ledger", out);
    if (s->ledger == NULL)
        return -1;
    json_t *b = svc_req_json(req);
    char why[200];
    if (!parse_tx(b, submit_members, &s->p, why, sizeof(why)))
        *out = s->p.no_memory ? out_of_memory(req)
                              : svc_reply_problem(req, LEDGER_P(INVALID_TRANSACTION), "%s", why);
    else if (!route_int_member(b, "wait_seconds", 0, app->config->max_wait_s, 0, 0,
                               &s->wait_seconds, why, sizeof(why)))
        *out = svc_reply_problem(req, LEDGER_P(INVALID_TRANSACTION), "%s", why);
    else
        return 0;
    parsed_tx_free(&s->p);
    return -1;
}

/* Checks the dependencies (when there are inputs: without them the apply itself spots a
 * replay); while they are pending and the request may wait, suspends it (1, in *out). Else
 * applies when they are satisfied, and returns 0 with the verdict in r. A wait its token may not
 * have now is refused before anything (1, the 429 in *out). */
static int submission_call(struct svc_request *req, const struct submission *s, struct ingested *r,
                           enum svc_outcome *out)
{
    struct svc_app *app = svc_req_app(req);
    if (svc_poll_admit(req, (double)s->wait_seconds, out))
        return 1;
    struct svc_poll poll = svc_poll_begin(req, (double)s->wait_seconds);
    memset(r, 0, sizeof(*r));
    r->st = DB_OK;
    r->v = DB_L_OK;
    if (s->p.tx.ninputs > 0)
        r->st = db_ledgers_check(app->pool, s->ledger, &s->p.tx, &r->status, &r->v, &r->err);
    char channel[SVC_CHANNEL_MAX];
    if (r->st == DB_OK && r->v == DB_L_DEPS_PENDING && svc_poll_may_wait(req, &poll)) {
        *out = svc_poll_wait(req, &poll, channel_of(s->ledger, channel, sizeof(channel)));
        return 1;
    }
    if (svc_req_resumes(req) > 0 && r->st == DB_OK)
        count2(m_waits, s->ledger,
               r->v == DB_L_DEPS_PENDING ? "timeout"
               : r->v == DB_L_SUPERSEDED ? "superseded"
                                         : "satisfied",
               1);
    if (r->st == DB_OK && r->v == DB_L_OK)
        r->st = db_ledgers_apply(app->pool, s->ledger, &s->p.tx, OPTIMISTIC_LOCK_TIMEOUT_MS,
                                 &r->status, &r->v, &r->err);
    return 0;
}

static enum svc_outcome submission_render(struct svc_request *req, const struct submission *s,
                                          const struct ingested *r)
{
    const char *digest = s->p.tx.digest;
    if (r->st != DB_OK)
        return route_db_problem(req, r->st, &r->err);
    switch (r->v) {
    case DB_L_DEPS_PENDING:
        return svc_reply_problem(req, LEDGER_P(DEPENDENCIES_PENDING),
                                 "an input of %s is not yet at its version (send wait_seconds to "
                                 "wait for it)",
                                 digest);
    case DB_L_SUPERSEDED:
        svc_counter_vec_add(m_superseded, s->ledger, 1);
        return svc_reply_problem(req, LEDGER_P(SUPERSEDED),
                                 "an input of %s is already past its version", digest);
    case DB_L_APPLIED:
    case DB_L_REPLAY:
        return reply_ingested(req, s->ledger, "optimistic", r->v, r->v == DB_L_APPLIED,
                              r->v == DB_L_REPLAY, status_json(digest, &r->status));
    default:
        return verdict_problem(req, s->ledger, r->v, digest);
    }
}

/* Optimistic ingestion: check the dependencies (waiting for them when asked), then apply. */
static enum svc_outcome route_ledger_submit(struct svc_request *req)
{
    struct submission s;
    struct ingested r;
    enum svc_outcome out = SVC_FATAL;
    if (submission_parse(req, &s, &out) != 0)
        return out;
    if (submission_call(req, &s, &r, &out) == 0)
        out = submission_render(req, &s, &r);
    parsed_tx_free(&s.p);
    return out;
}

/* ---- checkpoints ---- */

/* A POST /ledgers/{ledger}/checkpoints as parsed; free with checkpoint_free. */
struct checkpoint {
    const char *ledger;
    int64_t sequence;
    size_t n;
    struct parsed_tx *p;    /* n parsed transactions */
    struct db_ledger_tx *t; /* their db/ views, as db_ledgers_checkpoint takes them */
};

static void checkpoint_free(struct checkpoint *c)
{
    for (size_t i = 0; c->p != NULL && i < c->n; i++)
        parsed_tx_free(&c->p[i]);
    free(c->p);
    free(c->t);
    memset(c, 0, sizeof(*c));
}

/* Parses the checkpoint's transactions, each valid and with its own digest. */
static int checkpoint_parse_txs(struct svc_request *req, json_t *txs, struct checkpoint *c,
                                enum svc_outcome *out)
{
    char why[200];
    for (size_t i = 0; i < c->n; i++) {
        if (!parse_tx(json_array_get(txs, i), tx_members, &c->p[i], why, sizeof(why))) {
            *out = c->p[i].no_memory ? out_of_memory(req)
                                     : svc_reply_problem(req, LEDGER_P(INVALID_CHECKPOINT),
                                                         "transaction %zu: %s", i, why);
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(c->p[k].tx.digest, c->p[i].tx.digest) == 0) {
                *out = svc_reply_problem(req, LEDGER_P(INVALID_CHECKPOINT),
                                         "transaction %zu: digest %s appears twice", i,
                                         c->p[i].tx.digest);
                return -1;
            }
        }
        c->t[i] = c->p[i].tx;
    }
    return 0;
}

/* 0 with c filled, or -1 after replying (in *out) with nothing left to free. */
static int checkpoint_parse(struct svc_request *req, struct checkpoint *c, enum svc_outcome *out)
{
    memset(c, 0, sizeof(*c));
    c->ledger = route_name_param(req, "ledger", out);
    if (c->ledger == NULL)
        return -1;
    json_t *b = svc_req_json(req);
    json_t *seq = json_object_get(b, "sequence"), *txs = json_object_get(b, "transactions");
    if (!json_is_object(b) || json_object_size(b) != 2 || !json_is_integer(seq) ||
        json_integer_value(seq) < 1 || json_integer_value(seq) > DB_LEDGER_INT_MAX ||
        !json_is_array(txs)) {
        *out = svc_reply_problem(req, LEDGER_P(INVALID_CHECKPOINT),
                                 "the body is {\"sequence\": an integer from 1 to %" PRId64
                                 ", \"transactions\": [transaction, ...]}",
                                 DB_LEDGER_INT_MAX);
        return -1;
    }
    c->sequence = json_integer_value(seq);
    c->n = json_array_size(txs);
    if (c->n > DB_LEDGER_CHECKPOINT_MAX) {
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a checkpoint holds at most %d transactions; this one has %zu",
                                 DB_LEDGER_CHECKPOINT_MAX, c->n);
        return -1;
    }
    c->p = calloc(c->n + 1, sizeof(*c->p));
    c->t = calloc(c->n + 1, sizeof(*c->t));
    if (c->p == NULL || c->t == NULL)
        *out = out_of_memory(req);
    else if (checkpoint_parse_txs(req, txs, c, out) == 0)
        return 0;
    checkpoint_free(c);
    return -1;
}

static enum svc_outcome checkpoint_render(struct svc_request *req, const struct checkpoint *c,
                                          const struct ingested *r)
{
    if (r->st != DB_OK)
        return route_db_problem(req, r->st, &r->err);
    if (r->v != DB_L_APPLIED && r->v != DB_L_REPLAY) {
        char seqtext[24];
        snprintf(seqtext, sizeof(seqtext), "%" PRId64, c->sequence);
        return verdict_problem(req, c->ledger, r->v, seqtext);
    }
    return reply_ingested(req, c->ledger, "checkpoint", r->v, r->applied, r->skipped,
                          json_pack("{s:I, s:b, s:I, s:I}", "sequence", (json_int_t)c->sequence,
                                    "replay", r->v == DB_L_REPLAY, "applied",
                                    (json_int_t)r->applied, "skipped", (json_int_t)r->skipped));
}

static enum svc_outcome route_ledger_checkpoint(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    struct checkpoint c;
    enum svc_outcome out = SVC_FATAL;
    if (checkpoint_parse(req, &c, &out) != 0)
        return out;
    struct ingested r;
    memset(&r, 0, sizeof(r));
    r.st = db_ledgers_checkpoint(app->pool, c.ledger, c.sequence, c.t, c.n, &r.applied, &r.skipped,
                                 &r.v, &r.err);
    out = checkpoint_render(req, &c, &r);
    checkpoint_free(&c);
    return out;
}

static enum svc_outcome route_ledger_tx_get(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *ledger = route_name_param(req, "ledger", &out);
    if (ledger == NULL)
        return out;
    const char *digest = svc_req_param(req, "digest");
    char why[160];
    if (!route_key_ok(digest, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_KEY), "digest: %s", why);
    struct db_ledger_status s;
    enum db_ledger_verdict v;
    struct db_error err;
    enum db_status st = db_ledgers_tx_get(app->pool, ledger, digest, &s, &v, &err);
    if (st != DB_OK)
        return route_db_problem(req, st, &err);
    if (v != DB_L_OK)
        return verdict_problem(req, ledger, v, digest);
    return svc_reply_json(req, 200, status_json(digest, &s));
}

/* Sends the strong ETag of an object or display (its version) and says whether the request's
 * If-None-Match names it (then the answer is 304 without a body). */
static int etag_matches(struct svc_request *req, int64_t version)
{
    route_etag_set(req, version);
    return route_etag_names(svc_req_header(req, "If-None-Match"), version, ROUTE_ETAG_WEAK);
}

/* An object or display as GET shows it, as JSON text (the caller frees it; its length in *len);
 * NULL when out of memory. The data is spliced in as the text PostgreSQL stored, never parsed:
 * jansson refuses the long runs of digits jsonb writes for numbers such as 1e19. */
static char *item_text(const struct db_ledger_item *it, const char *key, int display, size_t *len)
{
    json_t *j = json_pack("{s:s, s:I, s:s}", display ? "type" : "object_id", key, "version",
                          (json_int_t)it->version, "updated_at", it->updated_at);
    if (j != NULL && !display &&
        json_object_set_new(j, "type", json_string(it->type ? it->type : "")) != 0) {
        json_decref(j);
        return NULL;
    }
    struct svc_jpage_raw data = {"data", it->data, it->data ? strlen(it->data) : 0};
    return svc_jpage_object(j, &data, 1, len);
}

/* 410 object_deleted, with the version of the tombstone (a 500 if it cannot be said). */
static enum svc_outcome object_deleted(struct svc_request *req, const char *key, int64_t version)
{
    json_t *ext = json_pack("{s:I}", "version", (json_int_t)version);
    if (ext == NULL)
        return out_of_memory(req);
    return svc_reply_problem_ext(req, LEDGER_P(OBJECT_DELETED), ext,
                                 "object %s was deleted at version %" PRId64, key, version);
}

static enum svc_outcome item_get(struct svc_request *req, int display)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *ledger = route_name_param(req, "ledger", &out);
    if (ledger == NULL)
        return out;
    const char *key = svc_req_param(req, display ? "type" : "id");
    char why[160];
    if (!route_key_ok(key, why, sizeof(why)))
        return svc_reply_problem(req, ROUTE_P(INVALID_KEY), "%s", why);
    struct db_ledger_item it;
    enum db_ledger_verdict v;
    struct db_error err;
    char *text = NULL;
    size_t len = 0;
    enum db_status st = display ? db_ledgers_display_get(app->pool, ledger, key, &it, &v, &err)
                                : db_ledgers_object_get(app->pool, ledger, key, &it, &v, &err);
    if (st != DB_OK)
        out = route_db_problem(req, st, &err);
    else if (v == DB_L_OBJECT_DELETED)
        out = object_deleted(req, key, it.version);
    else if (v != DB_L_OK)
        out = verdict_problem(req, ledger, v, key);
    else if (etag_matches(req, it.version))
        out = svc_reply_static(req, 304, "application/json", "", 0);
    else if ((text = item_text(&it, key, display, &len)) == NULL)
        out = out_of_memory(req);
    else
        out = svc_reply_raw(req, 200, "application/json", text, len);
    db_ledger_item_clear(&it);
    return out;
}

static enum svc_outcome route_ledger_object_get(struct svc_request *req)
{
    return item_get(req, 0);
}

static enum svc_outcome route_ledger_display_get(struct svc_request *req)
{
    return item_get(req, 1);
}

static int event_one(const struct db_ledger_event_row *e, size_t data_len, void *ctx)
{
    struct svc_jpage *page = ctx;
    if (svc_jpage_full(page, data_len))
        return 1;
    json_t *env =
        json_pack("{s:I, s:s, s:i, s:s, s:s}", "offset", (json_int_t)e->offset, "digest", e->digest,
                  "index", e->index, "type", e->type, "created_at", e->created_at);
    struct svc_jpage_raw data = {"data", e->data[0] ? e->data : NULL, data_len};
    /* an event that cannot be written fails the page (a 500): stop reading */
    return svc_jpage_item(page, env, &data, 1) != 0;
}

/* A page of the event log: at most limit events and, past the first, at most the response
 * budget of event data; next is where to go on. */
static enum svc_outcome route_ledger_events(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    enum svc_outcome out = SVC_FATAL;
    const char *ledger = route_name_param(req, "ledger", &out);
    if (ledger == NULL)
        return out;
    long long after, limit;
    if (route_int_query(req, "after", 0, DB_LEDGER_INT_MAX, 0, &after, &out) != 0 ||
        route_int_query(req, "limit", 1, 1000, 100, &limit, &out) != 0)
        return out;
    struct svc_jpage page;
    svc_jpage_begin(&page, "events", (size_t)app->config->response_budget);
    int64_t next = after;
    enum db_ledger_verdict v;
    struct db_error err;
    enum db_status st =
        db_ledgers_events(app->pool, ledger, after, (int)limit, app->config->response_budget,
                          event_one, &page, &next, &v, &err);
    if (st != DB_OK || v != DB_L_OK) {
        svc_jpage_free(&page);
        return st != DB_OK ? route_db_problem(req, st, &err) : verdict_problem(req, ledger, v, "");
    }
    /* a tail that cannot be built fails the page rather than leave next out */
    json_t *tail = json_pack("{s:I}", "next", (json_int_t)next);
    size_t len = 0;
    char *text = NULL;
    if (tail == NULL)
        svc_jpage_free(&page);
    else
        text = svc_jpage_finish(&page, tail, &len);
    if (text == NULL)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot encode the events");
    return svc_reply_raw(req, 200, "application/json", text, len);
}

/* ---- metrics and janitor ---- */

struct gauge_lines {
    struct svc_buf *watermark, *tombstones;
};

static void gauge_one(const char *ledger, int64_t watermark, int64_t tombstones,
                      const struct db_error *failed, void *ctx)
{
    struct gauge_lines *g = ctx;
    if (failed != NULL) {
        svc_counter_vec_add(m_gauge_failures, ledger, 1);
        svc_log(SVC_LOG_WARN, "ledger gauges failed", "ledger", ledger, "sqlstate",
                failed->sqlstate, "detail", failed->message, NULL);
        return;
    }
    struct svc_buf l;
    svc_buf_init(&l, 1024);
    svc_metrics_label(&l, "ledger", ledger);
    svc_metrics_sample(g->watermark, "rowlock_ledger_watermark", l.data, (double)watermark);
    svc_metrics_sample(g->tombstones, "rowlock_ledger_tombstones", l.data, (double)tombstones);
    svc_buf_free(&l);
}

/* The gauges of every ledger that can be read; one that cannot is left out and counted. Each of
 * the first ROWLOCK_METRICS_MAX_RESOURCES ledgers is a query on its own tables, which a backend
 * that has not opened them lately pays dearly for (65 ms for 100 ledgers against 9 ms on one that
 * has), so they are served as service/gauge_cache.h says. */
static int ledger_gauges_count(void *ctx, int budget_ms, struct svc_buf *out, int *ok)
{
    struct svc_app *app = ctx;
    struct svc_buf wm, ts;
    svc_buf_init(&wm, 16 * 1024 * 1024);
    svc_buf_init(&ts, 16 * 1024 * 1024);
    struct gauge_lines g = {&wm, &ts};
    struct db_error err;
    enum db_status st = db_ledgers_gauges(app->pool, (int)app->config->metrics_max_resources,
                                          budget_ms, gauge_one, &g, &err);
    *ok = st == DB_OK;
    svc_metrics_family(out, "rowlock_ledger_watermark", "gauge",
                       "Highest checkpoint below which every checkpoint is recorded");
    if (*ok && wm.data)
        svc_buf_append(out, wm.data, wm.len);
    svc_metrics_family(out, "rowlock_ledger_tombstones", "gauge", "Tombstones kept per ledger");
    if (*ok && ts.data)
        svc_buf_append(out, ts.data, ts.len);
    svc_buf_free(&wm);
    svc_buf_free(&ts);
    return st == DB_ERR_TIMEOUT && budget_ms > 0;
}

static struct svc_gauge_cache ledger_gauges = SVC_GAUGE_CACHE_INIT(
    "rowlock_ledger_gauges", "rowlock_ledger_watermark and rowlock_ledger_tombstones",
    "rowlock_ledger_metrics_up",
    "1 when the list of ledgers could be read from the database (a ledger "
    "whose own gauges fail is counted in "
    "rowlock_ledger_metrics_failures_total)",
    ledger_gauges_count);

static void route_ledgers_render_metrics(struct svc_buf *b, struct svc_app *app)
{
    svc_gauge_cache_render(&ledger_gauges, b, app->config->metrics_sync_ms, app);
}

static void route_ledgers_fini(void)
{
    svc_gauge_cache_reset(&ledger_gauges);
}

static void janitor_one(const char *ledger, int64_t horizon, int64_t purged,
                        const struct db_error *failed, void *ctx)
{
    svc_counter_vec_add(m_janitor_visits, failed != NULL ? "failed" : "ok", 1);
    if (failed != NULL) {
        svc_counter_vec_add(m_janitor_failures, ledger, 1);
        svc_log(SVC_LOG_WARN, "ledger janitor failed", "ledger", ledger, "sqlstate",
                failed->sqlstate, "detail", failed->message, NULL);
    } else if (purged > 0) {
        svc_counter_vec_add(m_purged, ledger, (uint64_t)purged);
    }
}

static void route_ledgers_janitor_pass(void *ctx)
{
    struct svc_app *app = ctx;
    struct db_error err;
    enum db_status st =
        db_ledgers_janitor(app->pool, (int)app->config->janitor_batch, janitor_one, NULL, &err);
    if (st != DB_OK)
        svc_log(SVC_LOG_WARN, "ledger janitor pass failed", "status", db_status_name(st), "detail",
                err.message, NULL);
    /* the gauges' count, when scrapes answer with the last one and one asked since */
    svc_gauge_cache_janitor(&ledger_gauges, app);
}

static const struct svc_route ledger_routes[] = {
    {"GET", "/ledgers", route_ledgers_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"PUT", "/ledgers/{ledger}", route_ledger_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/ledgers/{ledger}", route_ledger_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/ledgers/{ledger}", route_ledger_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/ledgers/{ledger}/transactions", route_ledger_submit, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"POST", "/ledgers/{ledger}/checkpoints", route_ledger_checkpoint, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/ledgers/{ledger}/transactions/{digest}", route_ledger_tx_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/ledgers/{ledger}/objects/{id}", route_ledger_object_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/ledgers/{ledger}/displays/{type}", route_ledger_display_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
    {"GET", "/ledgers/{ledger}/events", route_ledger_events, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER, SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_ledgers_family = {
    .name = "ledgers",
    .resource = "ledger",
    .upkeep = &db_ledgers_upkeep,
    .routes = ledger_routes,
    .nroutes = sizeof(ledger_routes) / sizeof(ledger_routes[0]),
    .problems = ledger_problems,
    .nproblems = LEDGER_PC_COUNT,
    .init = route_ledgers_init,
    .fini = route_ledgers_fini,
    .render_metrics = route_ledgers_render_metrics,
    .janitor_pass = route_ledgers_janitor_pass,
};
