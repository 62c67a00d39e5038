/* A randomized ledger history delivered through random mixes of both ingestion paths, compared
 * with applying it once, in order, in a model. Interleaving forced: a seeded generator writes a
 * history of transactions (creates, updates, deletes, re-creations, read-only inputs, display
 * updates, events; versions from one counter, so strictly increasing per object), grouped in
 * order into checkpoints of 1-10. Delivery items are placed near their place in the history
 * (optimistic submissions within OPT_JITTER transactions of it, checkpoints HISTORY_JITTER/2
 * behind it give or take HISTORY_JITTER, so checkpoints also arrive out of order) and taken in
 * that order by 6 client threads: 4 submit about three quarters of the transactions
 * optimistically with wait_seconds (a fifth of them twice), 2 post every checkpoint (a quarter
 * twice, half of those by both threads at once), pacing themselves on the submitters. Superseded
 * and an expired wait are valid answers for an optimistic submission (its checkpoint delivers
 * it). Then every object, display and each transaction's events must equal the model's, every
 * transaction must have run exactly once, and a reader that tailed the event log meanwhile must
 * have seen exactly the final log. The seed is printed; ROWLOCK_TEST_SEED replays one. */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ledger_client.h"

#define THREADS        6
#define CP_THREADS     2   /* of which post checkpoints; the others submit transactions */
#define CP_PACE_MS     300 /* longest a checkpoint waits for the submissions to catch up */
#define HISTORY_JITTER 30  /* transactions a checkpoint may move from its place in the history */
#define OPT_JITTER     8   /* and an optimistic submission */
#define WAIT_SECONDS   3
#define DISPLAYS       5

static unsigned seed;
static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int setup(void **state)
{
    const char *env = getenv("ROWLOCK_TEST_SEED");
    seed = env && env[0] ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    fprintf(stderr, "ROWLOCK_TEST_SEED=%u\n", seed);
    return th_svc_start("ledger_random", NULL);
}

/* ---- the history ---- */

struct history {
    const char *ledger;
    int ntx, nobjects;
    json_t **txs;   /* transactions as submitted (with wait_seconds) */
    int ncp;        /* checkpoints 1..ncp */
    int *cp_of;     /* cp_of[i]: the checkpoint carrying transaction i */
    json_t **cps;   /* cps[k]: the transactions array of checkpoint k+1 */
    int *cp_last;   /* cp_last[k]: index of its last transaction */
    unsigned *rand; /* the generator's state */
};

enum gen_state { ABSENT, LIVE, DELETED };

static int pick(struct history *h, int n)
{
    return (int)(rand_r(h->rand) % (unsigned)n);
}

static void add(json_t *t, const char *member, json_t *v)
{
    json_array_append_new(json_object_get(t, member), v);
}

/* Transaction i (version i+1): one to three objects, each created, updated, deleted or
 * re-created as its state allows, reading the live ones; sometimes a read-only input, a display
 * update; zero to three events. st and ver are the generator's view of the objects. */
static json_t *gen_tx(struct history *h, int i, enum gen_state *st, json_int_t *ver)
{
    static const char *const types[] = {"coin", "nft", "pool"};
    char digest[96], id[16];
    json_int_t v = i + 1;
    snprintf(digest, sizeof(digest), "%s-%03d-%08x", h->ledger, i, (unsigned)rand_r(h->rand));
    json_t *t = lc_tx_new(digest);
    int touched[3] = {-1, -1, -1}, n = 1 + pick(h, 3);
    for (int k = 0; k < n; k++) {
        int o = pick(h, h->nobjects);
        if (o == touched[0] || o == touched[1])
            continue;
        touched[k] = o;
        snprintf(id, sizeof(id), "obj-%02d", o);
        if (st[o] == LIVE)
            add(t, "inputs", json_pack("{s:s, s:I}", "object_id", id, "version", ver[o]));
        if (st[o] == LIVE && pick(h, 4) == 0) {
            add(t, "deletes", json_pack("{s:s, s:I}", "object_id", id, "version", v));
            st[o] = DELETED;
        } else {
            add(t, "writes",
                json_pack("{s:s, s:I, s:s, s:{s:s, s:I, s:s, s:i, s:[i, s]}}", "object_id", id,
                          "version", v, "type", types[pick(h, 3)], "data", "id", id, "v", v, "by",
                          digest, "n", pick(h, 1000000), "nested", pick(h, 100), "x"));
            st[o] = LIVE;
        }
        ver[o] = v;
    }
    int r = pick(h, h->nobjects);
    if (pick(h, 5) == 0 && st[r] == LIVE && r != touched[0] && r != touched[1] && r != touched[2]) {
        snprintf(id, sizeof(id), "obj-%02d", r);
        add(t, "inputs", json_pack("{s:s, s:I}", "object_id", id, "version", ver[r]));
    }
    if (pick(h, 3) == 0) {
        char type[16];
        snprintf(type, sizeof(type), "display-%d", pick(h, DISPLAYS));
        add(t, "displays",
            json_pack("{s:s, s:I, s:{s:I, s:s}}", "type", type, "version", v, "data", "v", v, "by",
                      digest));
    }
    for (int k = 0, ne = pick(h, 4); k < ne; k++)
        add(t, "events",
            json_pack("{s:s, s:{s:s, s:i, s:i}}", "type", pick(h, 2) ? "transfer" : "mint", "data",
                      "digest", digest, "k", k, "r", pick(h, 1000)));
    return t;
}

static void history_build(struct history *h)
{
    enum gen_state *st = calloc((size_t)h->nobjects, sizeof(*st));
    json_int_t *ver = calloc((size_t)h->nobjects, sizeof(*ver));
    h->txs = calloc((size_t)h->ntx, sizeof(json_t *));
    h->cp_of = calloc((size_t)h->ntx, sizeof(int));
    h->cps = calloc((size_t)h->ntx, sizeof(json_t *));
    h->cp_last = calloc((size_t)h->ntx, sizeof(int));
    for (int i = 0; i < h->ntx; i++)
        h->txs[i] = gen_tx(h, i, st, ver);
    h->ncp = 0;
    for (int i = 0; i < h->ntx;) {
        int size = 1 + pick(h, 10);
        json_t *arr = json_array();
        for (int k = 0; k < size && i < h->ntx; k++, i++) {
            json_array_append_new(arr, json_deep_copy(h->txs[i]));
            h->cp_of[i] = h->ncp;
            h->cp_last[h->ncp] = i;
        }
        h->cps[h->ncp++] = arr;
    }
    /* optimistic submissions wait for their inputs; checkpoint copies carry no wait */
    for (int i = 0; i < h->ntx; i++)
        json_object_set_new(h->txs[i], "wait_seconds", json_integer(WAIT_SECONDS));
    free(st);
    free(ver);
}

static void history_free(struct history *h)
{
    for (int i = 0; i < h->ntx; i++)
        json_decref(h->txs[i]);
    for (int k = 0; k < h->ncp; k++)
        json_decref(h->cps[k]);
    free(h->txs);
    free(h->cp_of);
    free(h->cps);
    free(h->cp_last);
}

/* ---- the model: the history applied once, in order ---- */

struct model {
    json_t *objects;  /* id: {live, version, type, data} */
    json_t *displays; /* type: {version, data} */
    json_t *events;   /* digest: [{index, type, data}] */
    json_int_t live, deleted, nevents;
};

static void model_apply(struct model *m, const json_t *tx)
{
    const char *digest = json_string_value(json_object_get(tx, "digest"));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(tx, "writes"), i, e) json_object_set_new(
        m->objects, json_string_value(json_object_get(e, "object_id")),
        json_pack("{s:b, s:O, s:O, s:O}", "live", 1, "version", json_object_get(e, "version"),
                  "type", json_object_get(e, "type"), "data", json_object_get(e, "data")));
    json_array_foreach(json_object_get(tx, "deletes"), i, e) json_object_set_new(
        m->objects, json_string_value(json_object_get(e, "object_id")),
        json_pack("{s:b, s:O}", "live", 0, "version", json_object_get(e, "version")));
    json_array_foreach(json_object_get(tx, "displays"), i, e)
        json_object_set_new(m->displays, json_string_value(json_object_get(e, "type")),
                            json_pack("{s:O, s:O}", "version", json_object_get(e, "version"),
                                      "data", json_object_get(e, "data")));
    json_t *events = json_object_get(tx, "events");
    if (json_array_size(events) == 0)
        return;
    json_t *list = json_array();
    json_array_foreach(events, i, e) json_array_append_new(
        list, json_pack("{s:i, s:O, s:O}", "index", (int)i, "type", json_object_get(e, "type"),
                        "data", json_object_get(e, "data")));
    json_object_set_new(m->events, digest, list);
    m->nevents += (json_int_t)json_array_size(events);
}

static void model_build(struct model *m, const struct history *h)
{
    m->objects = json_object();
    m->displays = json_object();
    m->events = json_object();
    m->live = m->deleted = m->nevents = 0;
    for (int k = 0; k < h->ncp; k++) {
        size_t i;
        json_t *tx;
        json_array_foreach(h->cps[k], i, tx) model_apply(m, tx);
    }
    const char *id;
    json_t *o;
    json_object_foreach(m->objects, id, o)
    {
        if (json_is_true(json_object_get(o, "live")))
            m->live++;
        else
            m->deleted++;
    }
}

static void model_free(struct model *m)
{
    json_decref(m->objects);
    json_decref(m->displays);
    json_decref(m->events);
}

/* ---- delivery ---- */

enum item_kind { OPTIMISTIC, CHECKPOINT };

struct item {
    enum item_kind kind;
    int index; /* transaction or checkpoint */
    double key;
    long status;
    char code[64];
    json_int_t applied, skipped;
    int replay;
    char body[256];
};

struct delivery {
    const struct history *h;
    struct item *items; /* sorted by key */
    int nitems;
    int next[2];     /* per kind: where to look for its next item */
    double progress; /* key of the optimistic item taken last (HUGE_VAL once all are) */
    pthread_mutex_t mu;
};

struct worker {
    struct delivery *d;
    enum item_kind kind;
};

static double jitter(struct history *h, int j)
{
    return (double)pick(h, 2 * j * 1000 + 1) / 1000.0 - j;
}

static int by_key(const void *a, const void *b)
{
    double x = ((const struct item *)a)->key, y = ((const struct item *)b)->key;
    return x < y ? -1 : x > y;
}

/* Every checkpoint once (a quarter twice: half of those back to back, so two threads post them
 * together), about half the transactions optimistically (a fifth of those twice), each near its
 * place in the history, sorted by that place. */
static void delivery_plan(struct delivery *d, struct history *h)
{
    d->h = h;
    d->items = calloc((size_t)(2 * h->ncp + 2 * h->ntx), sizeof(struct item));
    d->nitems = d->next[OPTIMISTIC] = d->next[CHECKPOINT] = 0;
    d->progress = -HUGE_VAL;
    pthread_mutex_init(&d->mu, NULL);
    for (int k = 0; k < h->ncp; k++) {
        /* checkpoints lag their transactions by half the jitter on average */
        double key = h->cp_last[k] + HISTORY_JITTER / 2.0 + jitter(h, HISTORY_JITTER);
        d->items[d->nitems++] = (struct item){.kind = CHECKPOINT, .index = k, .key = key};
        if (pick(h, 4) == 0)
            d->items[d->nitems++] = (struct item){
                .kind = CHECKPOINT,
                .index = k,
                .key = pick(h, 2) ? key + 0.0001 : h->cp_last[k] + jitter(h, HISTORY_JITTER)};
    }
    for (int i = 0; i < h->ntx; i++) {
        if (pick(h, 4) == 0)
            continue;
        d->items[d->nitems++] =
            (struct item){.kind = OPTIMISTIC, .index = i, .key = i + jitter(h, OPT_JITTER)};
        if (pick(h, 5) == 0)
            d->items[d->nitems++] =
                (struct item){.kind = OPTIMISTIC, .index = i, .key = i + jitter(h, HISTORY_JITTER)};
    }
    qsort(d->items, (size_t)d->nitems, sizeof(struct item), by_key);
}

static void deliver_one(const struct history *h, struct item *it)
{
    char path[256];
    struct th_response r;
    /* The history's documents are shared by the delivering threads: only read (dumped) here,
     * never reference-counted, as jansson's json_incref reads the count without a barrier. */
    char *text = NULL;
    if (it->kind == OPTIMISTIC) {
        snprintf(path, sizeof(path), "/ledgers/%s/transactions", h->ledger);
        text = json_dumps(h->txs[it->index], JSON_COMPACT);
    } else {
        snprintf(path, sizeof(path), "/ledgers/%s/checkpoints", h->ledger);
        char *txs = json_dumps(h->cps[it->index], JSON_COMPACT);
        if (txs == NULL ||
            asprintf(&text, "{\"sequence\":%d,\"transactions\":%s}", it->index + 1, txs) < 0)
            text = NULL;
        free(txs);
    }
    if (text == NULL)
        abort(); /* out of memory in a test */
    it->status =
        th_http(th_svc.port, "POST", path, json_ct, text, strlen(text), &r) == 0 ? r.status : -1;
    free(text);
    snprintf(it->code, sizeof(it->code), "%s", th_problem_code(&r));
    it->applied = json_integer_value(json_object_get(r.json, "applied"));
    it->skipped = json_integer_value(json_object_get(r.json, "skipped"));
    it->replay = json_is_true(json_object_get(r.json, "replay"));
    snprintf(it->body, sizeof(it->body), "%s", r.body ? r.body : "");
    th_response_free(&r);
}

/* The next item of this kind in key order, or -1 when there is none left. */
static int take(struct delivery *d, enum item_kind kind)
{
    pthread_mutex_lock(&d->mu);
    int *n = &d->next[kind];
    while (*n < d->nitems && d->items[*n].kind != kind)
        (*n)++;
    int i = *n < d->nitems ? (*n)++ : -1;
    if (kind == OPTIMISTIC)
        d->progress = i >= 0 ? d->items[i].key : HUGE_VAL;
    pthread_mutex_unlock(&d->mu);
    return i;
}

/* Optimistic workers take their items in key order. Checkpoint workers too, each first waiting
 * (up to CP_PACE_MS) until the optimistic side has reached its key: the two paths then advance
 * together, and a checkpoint never waits long on a submission that is waiting for it. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct delivery *d = w->d;
    for (int i; (i = take(d, w->kind)) >= 0;) {
        for (int waited = 0; w->kind == CHECKPOINT && waited < CP_PACE_MS; waited += 5) {
            pthread_mutex_lock(&d->mu);
            double progress = d->progress;
            pthread_mutex_unlock(&d->mu);
            if (progress >= d->items[i].key)
                break;
            usleep(5000);
        }
        deliver_one(d->h, &d->items[i]);
    }
    return NULL;
}

/* A reader tailing the event log while the history is delivered: what it saw, page by page,
 * must be exactly the log as read at the end (nothing skipped, nothing twice, same order). */
struct tail {
    const char *ledger;
    int done; /* set (under mu) once delivery is over */
    pthread_mutex_t mu;
    json_t *seen; /* [[offset, digest, index]] */
    char first_bad[512];
};

static void *tail_main(void *arg)
{
    struct tail *t = arg;
    json_int_t after = 0;
    for (int quiet = 0; quiet < 2;) {
        pthread_mutex_lock(&t->mu);
        int done = t->done;
        pthread_mutex_unlock(&t->mu);
        char path[256];
        struct th_response r;
        snprintf(path, sizeof(path), "/ledgers/%s/events?after=%lld&limit=50", t->ledger,
                 (long long)after);
        if (lc_call("GET", path, NULL, &r) != 0 || r.status != 200) {
            snprintf(t->first_bad, sizeof(t->first_bad), "GET %s: %ld %s", path, r.status,
                     r.body ? r.body : "");
            th_response_free(&r);
            return NULL;
        }
        json_t *events = json_object_get(r.json, "events"), *e;
        size_t i;
        json_array_foreach(events, i, e) json_array_append_new(
            t->seen, json_pack("[O, O, O]", json_object_get(e, "offset"),
                               json_object_get(e, "digest"), json_object_get(e, "index")));
        json_int_t next = json_integer_value(json_object_get(r.json, "next"));
        /* finished: delivery over and two reads in a row that moved nothing */
        quiet = done && next == after && json_array_size(events) == 0 ? quiet + 1 : 0;
        after = next;
        th_response_free(&r);
        if (json_array_size(events) == 0)
            usleep(done ? 50000 : 3000);
    }
    return NULL;
}

/* ---- comparison ---- */

static void mismatch(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fail_msg("seed %u (rerun with ROWLOCK_TEST_SEED=%u): %s", seed, seed, buf);
}

/* Checks the answers; created[i] gets how many optimistic submissions of i answered 201. */
static void check_answers(const struct delivery *d, int *created)
{
    const struct history *h = d->h;
    int superseded = 0, pending = 0, replays = 0, opt = 0, cps = 0;
    json_int_t applied = 0;
    for (int k = 0; k < d->nitems; k++) {
        const struct item *it = &d->items[k];
        if (it->kind == OPTIMISTIC) {
            opt++;
            if (it->status == 201)
                created[it->index]++;
            else if (it->status == 409 && strcmp(it->code, "superseded") == 0)
                superseded++;
            else if (it->status == 409 && strcmp(it->code, "dependencies_pending") == 0)
                pending++;
            else if (it->status != 200)
                mismatch("optimistic %d answered %ld: %s", it->index, it->status, it->body);
        } else {
            cps++;
            json_int_t size = (json_int_t)json_array_size(h->cps[it->index]);
            if (it->status == 201 && it->applied + it->skipped == size && !it->replay)
                applied += it->applied;
            else if (it->status == 200 && it->replay)
                replays++;
            else
                mismatch("checkpoint %d answered %ld: %s", it->index + 1, it->status, it->body);
        }
    }
    int optimistic = 0;
    for (int i = 0; i < h->ntx; i++) {
        if (created[i] > 1)
            mismatch("%s: transaction %d applied optimistically %d times", h->ledger, i,
                     created[i]);
        optimistic += created[i];
    }
    fprintf(stderr,
            "%s: %d transactions in %d checkpoints; %d checkpoint posts (%d replays), %d "
            "optimistic submissions: %d applied, %d superseded, %d still pending after the "
            "wait; %lld applied by checkpoints\n",
            h->ledger, h->ntx, h->ncp, cps, replays, opt, optimistic, superseded, pending,
            (long long)applied);
    if (optimistic + applied != h->ntx)
        mismatch("%s: %d optimistic and %lld checkpoint applications of %d transactions", h->ledger,
                 optimistic, (long long)applied, h->ntx);
}

static void check_objects(const struct history *h, const struct model *m)
{
    for (int o = 0; o < h->nobjects; o++) {
        char id[16], path[256];
        struct th_response r;
        snprintf(id, sizeof(id), "obj-%02d", o);
        snprintf(path, sizeof(path), "/ledgers/%s/objects/%s", h->ledger, id);
        assert_int_equal(lc_call("GET", path, NULL, &r), 0);
        json_t *want = json_object_get(m->objects, id);
        json_int_t v = json_integer_value(json_object_get(want, "version"));
        int ok;
        if (want == NULL)
            ok = r.status == 404 && strcmp(th_problem_code(&r), "object_not_found") == 0;
        else if (!json_is_true(json_object_get(want, "live")))
            ok = r.status == 404 && strcmp(th_problem_code(&r), "object_deleted") == 0 &&
                 json_integer_value(json_object_get(r.json, "version")) == v;
        else
            ok = r.status == 200 && json_integer_value(json_object_get(r.json, "version")) == v &&
                 json_equal(json_object_get(r.json, "type"), json_object_get(want, "type")) &&
                 json_equal(json_object_get(r.json, "data"), json_object_get(want, "data"));
        if (!ok) {
            char *w = want ? json_dumps(want, JSON_COMPACT) : strdup("absent");
            mismatch("%s %s: the model has %s, rowlock answered %ld %s", h->ledger, id, w, r.status,
                     r.body);
        }
        th_response_free(&r);
    }
}

static void check_displays(const struct history *h, const struct model *m)
{
    for (int k = 0; k < DISPLAYS; k++) {
        char type[16], path[256];
        struct th_response r;
        snprintf(type, sizeof(type), "display-%d", k);
        snprintf(path, sizeof(path), "/ledgers/%s/displays/%s", h->ledger, type);
        assert_int_equal(lc_call("GET", path, NULL, &r), 0);
        json_t *want = json_object_get(m->displays, type);
        int ok =
            want == NULL
                ? r.status == 404 && strcmp(th_problem_code(&r), "display_not_found") == 0
                : r.status == 200 &&
                      json_equal(json_object_get(r.json, "version"),
                                 json_object_get(want, "version")) &&
                      json_equal(json_object_get(r.json, "data"), json_object_get(want, "data"));
        if (!ok) {
            char *w = want ? json_dumps(want, JSON_COMPACT) : strdup("absent");
            mismatch("%s %s: the model has %s, rowlock answered %ld %s", h->ledger, type, w,
                     r.status, r.body);
        }
        th_response_free(&r);
    }
}

/* The event log, per digest in log order, must equal the model's: each transaction's events
 * once, in its own order, and nothing else. */
/* The log as read back: offsets grow; every event as [offset, digest, index], and by digest. */
struct read_log {
    const char *ledger;
    json_t *by, *all;
    json_int_t last;
};

static void read_event(void *arg, json_t *e)
{
    struct read_log *rl = arg;
    json_int_t offset = json_integer_value(json_object_get(e, "offset"));
    if (offset <= rl->last)
        mismatch("%s: event offsets go from %lld to %lld", rl->ledger, (long long)rl->last,
                 (long long)offset);
    rl->last = offset;
    json_array_append_new(rl->all,
                          json_pack("[O, O, O]", json_object_get(e, "offset"),
                                    json_object_get(e, "digest"), json_object_get(e, "index")));
    lc_events_by_digest(rl->by, e);
}

static void check_events(const struct history *h, const struct model *m, const json_t *tailed)
{
    struct read_log rl = {.ledger = h->ledger, .by = json_object(), .all = json_array()};
    lc_events_each(h->ledger, read_event, &rl);
    json_t *by = rl.by, *all = rl.all;
    const char *d;
    json_t *got;
    json_object_foreach(by, d, got)
    {
        json_t *want = json_object_get(m->events, d);
        if (!json_equal(got, want)) {
            char *g = json_dumps(got, JSON_COMPACT);
            char *w = want ? json_dumps(want, JSON_COMPACT) : strdup("no events");
            mismatch("%s: events of %s are %s, the model has %s", h->ledger, d, g, w);
        }
    }
    if (json_object_size(by) != json_object_size(m->events))
        mismatch("%s: %zu transactions have events in the log, %zu in the model", h->ledger,
                 json_object_size(by), json_object_size(m->events));
    json_decref(by);
    if (!json_equal(all, tailed)) {
        size_t k = 0;
        while (k < json_array_size(all) &&
               json_equal(json_array_get(all, k), json_array_get(tailed, k)))
            k++;
        char *a = json_dumps(json_array_get(all, k), JSON_COMPACT | JSON_ENCODE_ANY);
        char *t = json_dumps(json_array_get(tailed, k), JSON_COMPACT | JSON_ENCODE_ANY);
        mismatch("%s: the tailing reader saw %zu events, the log holds %zu; the first difference "
                 "is event %zu: log %s, tail %s",
                 h->ledger, json_array_size(tailed), json_array_size(all), k, a ? a : "none",
                 t ? t : "none");
    }
    json_decref(all);
}

/* Each transaction executed, by the path its answers say, in its checkpoint; the counts. */
static void check_statuses(const struct history *h, const struct model *m, const int *created)
{
    for (int i = 0; i < h->ntx; i++) {
        char path[512];
        struct th_response r;
        const char *d = json_string_value(json_object_get(h->txs[i], "digest"));
        snprintf(path, sizeof(path), "/ledgers/%s/transactions/%s", h->ledger, d);
        assert_int_equal(lc_call("GET", path, NULL, &r), 0);
        const char *p = json_string_value(json_object_get(r.json, "path"));
        if (r.status != 200 || !json_is_true(json_object_get(r.json, "executed")) ||
            json_integer_value(json_object_get(r.json, "checkpoint")) != h->cp_of[i] + 1 ||
            p == NULL || strcmp(p, created[i] ? "optimistic" : "checkpoint") != 0)
            mismatch("%s (checkpoint %d, %s): %ld %s", d, h->cp_of[i] + 1,
                     created[i] ? "applied optimistically" : "not applied optimistically", r.status,
                     r.body);
        th_response_free(&r);
    }
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/ledgers/%s", h->ledger);
    assert_int_equal(lc_call("GET", path, NULL, &r), 0);
    json_t *c = json_object_get(r.json, "counts");
    /* every transaction also came in its checkpoint: none is pending */
    json_t *want = json_pack("{s:I, s:I, s:i, s:i, s:I, s:i}", "objects", m->live, "tombstones",
                             m->deleted, "transactions", h->ntx, "pending_transactions", 0,
                             "events", m->nevents, "checkpoints", h->ncp);
    if (!json_equal(c, want) || json_integer_value(json_object_get(r.json, "watermark")) != h->ncp)
        mismatch("%s: the ledger is %s, the model has %s and watermark %d", h->ledger, r.body,
                 json_dumps(want, JSON_COMPACT), h->ncp);
    json_decref(want);
    th_response_free(&r);
}

/* Generates a history, delivers it, compares. */
static void run_history(const char *ledger, int ntx, int nobjects, unsigned s)
{
    lc_ledger_create(ledger);
    struct history h = {.ledger = ledger, .ntx = ntx, .nobjects = nobjects, .rand = &s};
    history_build(&h);
    struct model m;
    model_build(&m, &h);
    struct delivery d;
    delivery_plan(&d, &h);
    pthread_t t[THREADS], reader;
    struct worker w[THREADS];
    struct tail tail = {.ledger = ledger, .seen = json_array()};
    pthread_mutex_init(&tail.mu, NULL);
    pthread_create(&reader, NULL, tail_main, &tail);
    for (int i = 0; i < THREADS; i++) {
        w[i] = (struct worker){&d, i < CP_THREADS ? CHECKPOINT : OPTIMISTIC};
        pthread_create(&t[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_lock(&tail.mu);
    tail.done = 1;
    pthread_mutex_unlock(&tail.mu);
    pthread_join(reader, NULL);
    if (tail.first_bad[0])
        mismatch("%s: the tailing reader: %s", ledger, tail.first_bad);
    int *created = calloc((size_t)ntx, sizeof(int));
    check_answers(&d, created);
    check_objects(&h, &m);
    check_displays(&h, &m);
    check_events(&h, &m, tail.seen);
    json_decref(tail.seen);
    pthread_mutex_destroy(&tail.mu);
    check_statuses(&h, &m, created);
    free(created);
    free(d.items);
    pthread_mutex_destroy(&d.mu);
    model_free(&m);
    history_free(&h);
}

/* 300 transactions over 30 objects: few conflicts, most optimistic submissions apply. */
static void wide_history_matches_the_model(void **state)
{
    run_history("wide", 300, 30, seed);
}

/* 300 transactions over 6 objects: nearly every transaction depends on the one before. */
static void narrow_history_matches_the_model(void **state)
{
    run_history("narrow", 300, 6, seed + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wide_history_matches_the_model),
        cmocka_unit_test(narrow_history_matches_the_model),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
