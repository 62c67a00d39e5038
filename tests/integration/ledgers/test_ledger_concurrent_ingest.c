/* Concurrent ledger ingestion. Interleavings forced: (1) the same optimistic transaction sent by
 * 16 threads released together by a barrier, round after round, and 16 identical submissions
 * waiting together on a missing input that one other submission then provides: exactly one 201,
 * the others 200, one execution record and one set of events; (2) optimistic submitters and a
 * checkpoint poster racing over the same transactions, each in its own random order: every
 * transaction executed exactly once (one 201 or one checkpoint "applied" each, its events once)
 * and every object at its highest version; (3) dependency waits: a submission waiting on an input
 * that another submission writes 0.3 s later is applied within the wait, while a superseded one is
 * refused at once even when it asked to wait. */
#include <inttypes.h>
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

#define SENDERS     16
#define ROUNDS      8
#define MIX_ROUNDS  4
#define MIX_TXS     60
#define MIX_OBJECTS 8
#define MIX_PER_CP  5
#define SUBMITTERS  3

static int setup(void **state)
{
    return th_svc_start("ledger_concurrent", NULL);
}

static void tx_write(json_t *t, const char *id, json_int_t v)
{
    const char *digest = json_string_value(json_object_get(t, "digest"));
    json_array_append_new(json_object_get(t, "writes"),
                          json_pack("{s:s, s:I, s:s, s:{s:s, s:I, s:s}}", "object_id", id,
                                    "version", v, "type", "coin", "data", "id", id, "v", v, "by",
                                    digest));
}

/* Submits tx (borrowed) optimistically; returns the status, r keeps the response. */
static long submit(const char *l, const json_t *tx, struct th_response *r)
{
    char path[256];
    snprintf(path, sizeof(path), "/ledgers/%s/transactions", l);
    return lc_call("POST", path, tx, r) == 0 ? r->status : -1;
}

static void count_event(void *by, json_t *e)
{
    const char *d = json_string_value(json_object_get(e, "digest"));
    json_int_t have = json_integer_value(json_object_get(by, d));
    json_object_set_new(by, d, json_integer(have + 1));
}

/* The event log: {digest: count} (caller decrefs). */
static json_t *event_counts(const char *l)
{
    json_t *by = json_object();
    lc_events_each(l, count_event, by);
    return by;
}

/* GET the transaction's status (caller decrefs); NULL when not 200. */
static json_t *tx_status(const char *l, const char *digest)
{
    char path[512];
    struct th_response r;
    snprintf(path, sizeof(path), "/ledgers/%s/transactions/%s", l, digest);
    assert_int_equal(lc_call("GET", path, NULL, &r), 0);
    json_t *s = r.status == 200 ? json_incref(r.json) : NULL;
    th_response_free(&r);
    return s;
}

static void expect_live(const char *l, const char *id, json_int_t v, const char *by)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/ledgers/%s/objects/%s", l, id);
    assert_int_equal(lc_call("GET", path, NULL, &r), 0);
    json_t *data = json_object_get(r.json, "data");
    const char *writer = json_string_value(json_object_get(data, "by"));
    if (r.status != 200 || json_integer_value(json_object_get(r.json, "version")) != v ||
        json_integer_value(json_object_get(data, "v")) != v || writer == NULL ||
        strcmp(writer, by) != 0)
        fail_msg("object %s: expected live at version %lld by %s, got %ld %s", id, (long long)v, by,
                 r.status, r.body);
    th_response_free(&r);
}

/* ---- (1) identical submissions ---- */

struct sender {
    const char *ledger;
    const json_t *tx;
    pthread_barrier_t *go;
    struct th_response r;
    long status;
};

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    pthread_barrier_wait(s->go);
    s->status = submit(s->ledger, s->tx, &s->r);
    return NULL;
}

/* Sends tx from SENDERS threads released together; returns how many answered 201 and checks that
 * all the others answered 200 with the same status body. */
static int send_together(const char *l, const json_t *tx)
{
    pthread_barrier_t go;
    pthread_t t[SENDERS];
    struct sender s[SENDERS];
    pthread_barrier_init(&go, NULL, SENDERS);
    for (int i = 0; i < SENDERS; i++) {
        s[i] = (struct sender){.ledger = l, .tx = tx, .go = &go};
        pthread_create(&t[i], NULL, sender_main, &s[i]);
    }
    for (int i = 0; i < SENDERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
    int created = 0;
    for (int i = 0; i < SENDERS; i++) {
        if (s[i].status != 201 && s[i].status != 200)
            fail_msg("sender %d: %ld %s", i, s[i].status, s[i].r.body);
        created += s[i].status == 201;
        assert_true(json_is_true(json_object_get(s[i].r.json, "executed")));
        assert_string_equal(json_string_value(json_object_get(s[i].r.json, "path")), "optimistic");
        th_response_free(&s[i].r);
    }
    return created;
}

/* Round r: reads shared@r-1 (from round 2 on), writes shared@r and own-r@r, 3 events. */
static json_t *round_tx(int r)
{
    char digest[32], own[32];
    snprintf(digest, sizeof(digest), "same-%d", r);
    snprintf(own, sizeof(own), "own-%d", r);
    json_t *t = lc_tx_new(digest);
    if (r > 1)
        lc_tx_input(t, "shared", r - 1);
    tx_write(t, "shared", r);
    tx_write(t, own, r);
    lc_tx_events(t, 3);
    return t;
}

static void same_transaction_from_16_clients_applies_once(void **state)
{
    const char *l = "same";
    lc_ledger_create(l);
    for (int r = 1; r <= ROUNDS; r++) {
        json_t *t = round_tx(r);
        const char *digest = json_string_value(json_object_get(t, "digest"));
        char own[32];
        snprintf(own, sizeof(own), "own-%d", r);
        int created = send_together(l, t);
        if (created != 1)
            fail_msg("round %d: %d answers were 201", r, created);
        /* and once more, alone */
        struct th_response again;
        assert_int_equal(submit(l, t, &again), 200);
        th_response_free(&again);
        expect_live(l, "shared", r, digest);
        expect_live(l, own, r, digest);
        json_decref(t);
    }
    json_t *events = event_counts(l);
    assert_int_equal(json_object_size(events), ROUNDS);
    for (int r = 1; r <= ROUNDS; r++) {
        char digest[32];
        snprintf(digest, sizeof(digest), "same-%d", r);
        if (json_integer_value(json_object_get(events, digest)) != 3)
            fail_msg("%s has %lld events, not 3", digest,
                     (long long)json_integer_value(json_object_get(events, digest)));
        json_t *st = tx_status(l, digest);
        assert_non_null(st);
        assert_string_equal(json_string_value(json_object_get(st, "path")), "optimistic");
        json_decref(st);
    }
    json_decref(events);
    json_t *counts = lc_ledger_counts(l);
    assert_int_equal(json_integer_value(json_object_get(counts, "transactions")), ROUNDS);
    assert_int_equal(json_integer_value(json_object_get(counts, "events")), 3 * ROUNDS);
    json_decref(counts);
}

/* 16 identical submissions wait on gate@(2r-1); 0.5 s later another submission writes it: they
 * all wake together, one applies, the rest replay. */
static void identical_waiters_woken_together_apply_once(void **state)
{
    const char *l = "waiting";
    lc_ledger_create(l);
    for (int r = 1; r <= 3; r++) {
        char gd[32], wd[32];
        snprintf(gd, sizeof(gd), "gate-%d", r);
        snprintf(wd, sizeof(wd), "waiter-%d", r);
        json_t *gate = lc_tx_new(gd), *w = lc_tx_new(wd);
        if (r > 1)
            lc_tx_input(gate, "gate", 2 * r - 2);
        tx_write(gate, "gate", 2 * r - 1);
        lc_tx_events(gate, 1);
        lc_tx_input(w, "gate", 2 * r - 1);
        tx_write(w, "gate", 2 * r);
        lc_tx_events(w, 2);
        json_object_set_new(w, "wait_seconds", json_integer(10));
        pthread_barrier_t go;
        pthread_t t[SENDERS];
        struct sender s[SENDERS];
        pthread_barrier_init(&go, NULL, SENDERS + 1);
        for (int i = 0; i < SENDERS; i++) {
            s[i] = (struct sender){.ledger = l, .tx = w, .go = &go};
            pthread_create(&t[i], NULL, sender_main, &s[i]);
        }
        pthread_barrier_wait(&go);
        usleep(500000);
        struct th_response g;
        double opened = th_now();
        assert_int_equal(submit(l, gate, &g), 201);
        th_response_free(&g);
        int created = 0;
        for (int i = 0; i < SENDERS; i++) {
            pthread_join(t[i], NULL);
            if (s[i].status != 201 && s[i].status != 200)
                fail_msg("round %d waiter %d: %ld %s", r, i, s[i].status, s[i].r.body);
            created += s[i].status == 201;
            th_response_free(&s[i].r);
        }
        double took = th_now() - opened;
        pthread_barrier_destroy(&go);
        if (created != 1 || took > 3.0)
            fail_msg("round %d: %d answers were 201, the last %.2f s after the gate", r, created,
                     took);
        expect_live(l, "gate", 2 * r, wd);
        json_decref(gate);
        json_decref(w);
    }
    json_t *events = event_counts(l);
    for (int r = 1; r <= 3; r++) {
        char wd[32];
        snprintf(wd, sizeof(wd), "waiter-%d", r);
        assert_int_equal(json_integer_value(json_object_get(events, wd)), 2);
    }
    json_decref(events);
}

/* ---- (2) optimistic and checkpoint ingestion of the same transactions ---- */

struct mix {
    const char *ledger;
    json_t *txs[MIX_TXS];
    json_t *cps[MIX_TXS / MIX_PER_CP]; /* transactions arrays */
    pthread_barrier_t go;
};

struct submitter {
    struct mix *m;
    unsigned seed;
    long status[MIX_TXS];
    char first_bad[512];
};

struct poster {
    struct mix *m;
    unsigned seed;
    long status[MIX_TXS / MIX_PER_CP];
    json_int_t applied, skipped;
    char first_bad[512];
};

static void *submitter_main(void *arg)
{
    struct submitter *s = arg;
    int order[MIX_TXS];
    for (int i = 0; i < MIX_TXS; i++)
        order[i] = i;
    /* history order, locally shuffled: each position may swap with one up to 3 ahead */
    for (int i = 0; i < MIX_TXS; i++) {
        int j = i + (int)(rand_r(&s->seed) % 4);
        if (j < MIX_TXS) {
            int x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
    }
    pthread_barrier_wait(&s->m->go);
    for (int k = 0; k < MIX_TXS; k++) {
        struct th_response r;
        int i = order[k];
        s->status[i] = submit(s->m->ledger, s->m->txs[i], &r);
        int ok = s->status[i] == 201 || s->status[i] == 200 ||
                 (s->status[i] == 409 && strcmp(th_problem_code(&r), "superseded") == 0);
        if (!ok && s->first_bad[0] == '\0')
            snprintf(s->first_bad, sizeof(s->first_bad), "tx %d: %ld %s", i, s->status[i],
                     r.body ? r.body : "");
        th_response_free(&r);
    }
    return NULL;
}

static void *poster_main(void *arg)
{
    struct poster *p = arg;
    int n = MIX_TXS / MIX_PER_CP, order[MIX_TXS / MIX_PER_CP];
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rand_r(&p->seed) % (unsigned)(i + 1)), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    char path[256];
    snprintf(path, sizeof(path), "/ledgers/%s/checkpoints", p->m->ledger);
    pthread_barrier_wait(&p->m->go);
    for (int k = 0; k < n; k++) {
        int c = order[k];
        usleep(rand_r(&p->seed) % 50000);
        json_t *body = json_pack("{s:i, s:O}", "sequence", c + 1, "transactions", p->m->cps[c]);
        struct th_response r;
        p->status[c] = lc_call("POST", path, body, &r) == 0 ? r.status : -1;
        json_decref(body);
        json_int_t a = json_integer_value(json_object_get(r.json, "applied")),
                   s = json_integer_value(json_object_get(r.json, "skipped"));
        if ((p->status[c] != 201 || a + s != MIX_PER_CP) && p->first_bad[0] == '\0')
            snprintf(p->first_bad, sizeof(p->first_bad), "checkpoint %d: %ld %s", c + 1,
                     p->status[c], r.body ? r.body : "");
        p->applied += a;
        p->skipped += s;
        th_response_free(&r);
    }
    return NULL;
}

/* A chain of MIX_TXS transactions over MIX_OBJECTS objects: transaction i (version i+1) writes
 * one or two objects, reading the versions they are at; last[o] gets the last writer of o. */
static void mix_build(struct mix *m, unsigned *seed, int last[MIX_OBJECTS])
{
    json_int_t version[MIX_OBJECTS] = {0};
    for (int o = 0; o < MIX_OBJECTS; o++)
        last[o] = -1;
    for (int i = 0; i < MIX_TXS; i++) {
        char digest[80];
        snprintf(digest, sizeof(digest), "%s-tx%d", m->ledger, i);
        m->txs[i] = lc_tx_new(digest);
        int a = (int)(rand_r(seed) % MIX_OBJECTS), b = (int)(rand_r(seed) % MIX_OBJECTS);
        for (int k = 0; k < (a == b ? 1 : 2); k++) {
            int o = k == 0 ? a : b;
            char id[16];
            snprintf(id, sizeof(id), "o%d", o);
            if (version[o] > 0)
                lc_tx_input(m->txs[i], id, version[o]);
            tx_write(m->txs[i], id, i + 1);
            version[o] = i + 1;
            last[o] = i;
        }
        lc_tx_events(m->txs[i], 1 + i % 3);
        json_object_set_new(m->txs[i], "wait_seconds", json_integer(5));
    }
    for (int c = 0; c < MIX_TXS / MIX_PER_CP; c++) {
        m->cps[c] = json_array();
        for (int k = 0; k < MIX_PER_CP; k++) {
            json_t *t = json_deep_copy(m->txs[c * MIX_PER_CP + k]);
            json_object_del(t, "wait_seconds");
            json_array_append_new(m->cps[c], t);
        }
    }
}

/* Checks the ledger after a mixed round: each transaction executed once, by the path that says
 * so, in its checkpoint; its events once; objects at their last writer's version. */
static void mix_check(struct mix *m, const int created[MIX_TXS], const int last[MIX_OBJECTS])
{
    json_t *events = event_counts(m->ledger);
    for (int i = 0; i < MIX_TXS; i++) {
        const char *d = json_string_value(json_object_get(m->txs[i], "digest"));
        json_int_t want = (json_int_t)json_array_size(json_object_get(m->txs[i], "events"));
        if (json_integer_value(json_object_get(events, d)) != want)
            fail_msg("%s: %lld events in the log, the transaction has %lld", d,
                     (long long)json_integer_value(json_object_get(events, d)), (long long)want);
        json_t *st = tx_status(m->ledger, d);
        if (st == NULL)
            fail_msg("%s was not executed", d);
        assert_string_equal(json_string_value(json_object_get(st, "path")),
                            created[i] ? "optimistic" : "checkpoint");
        assert_int_equal(json_integer_value(json_object_get(st, "checkpoint")), i / MIX_PER_CP + 1);
        json_decref(st);
    }
    assert_int_equal(json_object_size(events), MIX_TXS);
    json_decref(events);
    for (int o = 0; o < MIX_OBJECTS; o++) {
        if (last[o] < 0)
            continue;
        char id[16];
        snprintf(id, sizeof(id), "o%d", o);
        expect_live(m->ledger, id, last[o] + 1,
                    json_string_value(json_object_get(m->txs[last[o]], "digest")));
    }
    json_t *counts = lc_ledger_counts(m->ledger);
    assert_int_equal(json_integer_value(json_object_get(counts, "transactions")), MIX_TXS);
    assert_int_equal(json_integer_value(json_object_get(counts, "watermark")),
                     MIX_TXS / MIX_PER_CP);
    json_decref(counts);
}

static void optimistic_and_checkpoint_paths_race_each_transaction_once(void **state)
{
    const char *env = getenv("ROWLOCK_TEST_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
    for (int round = 0; round < MIX_ROUNDS; round++) {
        char name[32];
        snprintf(name, sizeof(name), "mix-%d", round);
        lc_ledger_create(name);
        struct mix m = {.ledger = name};
        int last[MIX_OBJECTS], created[MIX_TXS] = {0};
        unsigned s = seed + (unsigned)round;
        mix_build(&m, &s, last);
        pthread_barrier_init(&m.go, NULL, SUBMITTERS + 1);
        struct submitter sub[SUBMITTERS];
        struct poster post = {.m = &m, .seed = s * 7u + 1u};
        pthread_t t[SUBMITTERS + 1];
        for (int i = 0; i < SUBMITTERS; i++) {
            sub[i] = (struct submitter){.m = &m, .seed = s * 13u + (unsigned)i};
            pthread_create(&t[i], NULL, submitter_main, &sub[i]);
        }
        pthread_create(&t[SUBMITTERS], NULL, poster_main, &post);
        for (int i = 0; i <= SUBMITTERS; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&m.go);
        int optimistic = 0, superseded = 0;
        for (int i = 0; i < SUBMITTERS; i++) {
            if (sub[i].first_bad[0])
                fail_msg("seed %u round %d: submitter %d: %s", seed, round, i, sub[i].first_bad);
            for (int k = 0; k < MIX_TXS; k++) {
                created[k] += sub[i].status[k] == 201;
                superseded += sub[i].status[k] == 409;
            }
        }
        if (post.first_bad[0])
            fail_msg("seed %u round %d: %s", seed, round, post.first_bad);
        for (int k = 0; k < MIX_TXS; k++) {
            if (created[k] > 1)
                fail_msg("seed %u round %d: tx %d applied optimistically %d times", seed, round, k,
                         created[k]);
            optimistic += created[k];
        }
        fprintf(stderr, "round %d: %d applied optimistically, %lld by checkpoints, %d superseded\n",
                round, optimistic, (long long)post.applied, superseded);
        if (optimistic + post.applied != MIX_TXS)
            fail_msg("seed %u round %d: %d optimistic + %lld checkpoint applications for %d "
                     "transactions",
                     seed, round, optimistic, (long long)post.applied, MIX_TXS);
        mix_check(&m, created, last);
        for (int i = 0; i < MIX_TXS; i++)
            json_decref(m.txs[i]);
        for (int c = 0; c < MIX_TXS / MIX_PER_CP; c++)
            json_decref(m.cps[c]);
    }
}

/* ---- (3) dependency waits ---- */

struct timed {
    const char *ledger;
    const json_t *tx;
    struct th_response r;
    long status;
    double seconds;
};

static void *timed_main(void *arg)
{
    struct timed *t = arg;
    double start = th_now();
    t->status = submit(t->ledger, t->tx, &t->r);
    t->seconds = th_now() - start;
    return NULL;
}

/* Submits tx and returns how long it took; the status and problem code must be as given. */
static double timed_submit(const char *l, const json_t *tx, long status, const char *code)
{
    struct timed t = {.ledger = l, .tx = tx};
    timed_main(&t);
    if (t.status != status || (code && strcmp(th_problem_code(&t.r), code) != 0))
        fail_msg("%s: expected %ld %s, got %ld %s",
                 json_string_value(json_object_get(tx, "digest")), status, code ? code : "",
                 t.status, t.r.body);
    th_response_free(&t.r);
    return t.seconds;
}

static json_t *dep_tx(const char *digest, const char *in, json_int_t inv, const char *out,
                      json_int_t outv, int wait)
{
    json_t *t = lc_tx_new(digest);
    if (in)
        lc_tx_input(t, in, inv);
    tx_write(t, out, outv);
    lc_tx_events(t, 1);
    if (wait >= 0)
        json_object_set_new(t, "wait_seconds", json_integer(wait));
    return t;
}

static void waiting_submission_applied_when_input_arrives_superseded_at_once(void **state)
{
    const char *l = "deps";
    lc_ledger_create(l);
    /* a waits for x@1, which x1 writes 0.3 s later */
    json_t *a = dep_tx("a", "x", 1, "x", 2, 5), *x1 = dep_tx("x1", NULL, 0, "x", 1, -1);
    struct timed w = {.ledger = l, .tx = a};
    pthread_t t;
    pthread_create(&t, NULL, timed_main, &w);
    usleep(300000);
    timed_submit(l, x1, 201, NULL);
    pthread_join(t, NULL);
    if (w.status != 201 || w.seconds < 0.25 || w.seconds >= 2.0)
        fail_msg("the waiting submission answered %ld after %.3f s: %s", w.status, w.seconds,
                 w.r.body);
    th_response_free(&w.r);
    expect_live(l, "x", 2, "a");
    /* x is at 2: a submission reading x@1 is superseded, at once, though it would wait 5 s */
    json_t *s1 = dep_tx("s1", "x", 1, "x", 3, 5);
    double took = timed_submit(l, s1, 409, "superseded");
    if (took >= 0.5)
        fail_msg("superseded took %.3f s", took);
    /* x deleted at 3: reading x@2 is superseded at once too */
    json_t *d3 = lc_tx_new("d3");
    lc_tx_input(d3, "x", 2);
    lc_tx_events(d3, 1);
    json_array_append_new(json_object_get(d3, "deletes"),
                          json_pack("{s:s, s:i}", "object_id", "x", "version", 3));
    timed_submit(l, d3, 201, NULL);
    json_t *s2 = dep_tx("s2", "x", 2, "x", 4, 5);
    took = timed_submit(l, s2, 409, "superseded");
    if (took >= 0.5)
        fail_msg("superseded (deleted input) took %.3f s", took);
    /* a missing input without a wait: pending at once; with a 1 s wait: pending after it */
    json_t *p0 = dep_tx("p0", "y", 1, "y", 2, -1), *p1 = dep_tx("p1", "y", 1, "y", 2, 1);
    took = timed_submit(l, p0, 409, "dependencies_pending");
    if (took >= 0.5)
        fail_msg("pending without a wait took %.3f s", took);
    took = timed_submit(l, p1, 409, "dependencies_pending");
    if (took < 0.9 || took >= 3.0)
        fail_msg("pending with a 1 s wait took %.3f s", took);
    /* none of the refused ones ran */
    const char *refused[] = {"s1", "s2", "p0", "p1"};
    for (size_t i = 0; i < 4; i++) {
        json_t *st = tx_status(l, refused[i]);
        if (st != NULL)
            fail_msg("refused %s was executed", refused[i]);
    }
    json_t *events = event_counts(l);
    assert_int_equal(json_object_size(events), 3); /* x1, a, d3 */
    json_decref(events);
    json_t *all[] = {a, x1, s1, d3, s2, p0, p1};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        json_decref(all[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_transaction_from_16_clients_applies_once),
        cmocka_unit_test(identical_waiters_woken_together_apply_once),
        cmocka_unit_test(optimistic_and_checkpoint_paths_race_each_transaction_once),
        cmocka_unit_test(waiting_submission_applied_when_input_arrives_superseded_at_once),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
