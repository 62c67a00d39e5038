/* Several processes, proven from outside: three rowlock processes on one database with haproxy
 * in front (deploy/haproxy/rowlock.cfg itself, its addresses from the environment), clients spread
 * over haproxy and the processes directly, and in the middle process B killed with SIGKILL and
 * started again on its port. At the same time: a 16-worker queue (claims, heartbeats, hand-backs,
 * fails, poison jobs, stalled workers writing late, workers vanishing with their leases), first
 * PATCHes of new keys racing through every way in, log followers long-polling on A while producers
 * write through the others, and a ledger fed optimistically twice (each transaction at the same
 * moment through haproxy and B) and by checkpoints through C, first ahead of the optimistic path
 * and then behind it. A client resends on a transport error, 502, 503 or 504 (the same bytes: the
 * same dedupe key, producer sequence, digest, owner and fence) and counts only a 2xx as
 * acknowledged. At the end: every job succeeded once (one accepted complete, or one whose answer
 * was lost, with the completed attempt's fence) or failed with its attempts spent; per job fences
 * grow and leases never overlap in the attempt history; no merge lost; every follower saw every
 * message once, in order; every ledger object and the event log equal the in-order model.
 * ROWLOCK_TEST_MANY_BINARY runs the processes from another executable (the negative control:
 * rowlock-unlocked, whose PATCHes of new keys lose merges). */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"
#include "many_processes.h"
#include "queue_verdict.h"
#include "worker_slots.h"

#define NPROC     3
#define NTARGET   MP_TARGETS /* 0: haproxy, 1..3: process A, B, C directly */
#define VICTIM    1          /* procs[1], B: killed and started again */
#define KILL_AT   4.0        /* seconds into the run */
#define RUN_MAX   100.0      /* every workload done by then, or the test fails */
#define WORKERS   16
#define JOBS      600
#define ENQ_EACH  50
#define LEASE_S   2
#define ATTEMPTS  3
#define POISON    50 /* every 50th job always fails */
#define DEATHS    8
#define STALLS    6
#define PRODUCERS 3
#define MESSAGES  200
#define FOLLOWERS 3
#define ROUNDS    60 /* new keys patched */
#define PATCHERS  NTARGET
#define LTX       240 /* ledger transactions */
#define OBJECTS   8
#define CKPT      10 /* transactions per checkpoint */

static struct th_service procs[NPROC];
static pid_t haproxy_pid;
static const char *binary;

static atomic_int stop_workers;

static void sleep_ms(long ms)
{
    usleep((useconds_t)ms * 1000);
}

/* ---- processes: rowlock x3 and haproxy, every one stopped by its PID ---- */

static int start_proc(int i, int port)
{
    char setting[32];
    snprintf(setting, sizeof(setting), "ROWLOCK_PORT=%d", port);
    const char *env[] = {setting, "ROWLOCK_JANITOR_INTERVAL_MS=200", NULL};
    return th_service_start_binary(&procs[i], binary, th_svc_dburl, env);
}

static int teardown(void **state);

/* Starts A, B, C and haproxy; on a failure stops what did start (cmocka runs no teardown after a
 * failed group setup). */
static int setup(void **state)
{
    binary = getenv("ROWLOCK_TEST_MANY_BINARY");
    if (binary == NULL || binary[0] == '\0')
        binary = ROWLOCK_BINARY;
    int ok = th_svc_db("many_processes") == 0;
    for (int i = 0; ok && i < NPROC; i++) {
        ok = start_proc(i, 0) == 0;
        mp_ports[i + 1] = procs[i].port;
    }
    ok = ok && mp_haproxy_start(&haproxy_pid) > 0;
    if (!ok)
        teardown(state);
    return ok ? 0 : -1;
}

static int teardown(void **state)
{
    mp_haproxy_stop(&haproxy_pid);
    int rc = 0;
    for (int i = 0; i < NPROC; i++)
        if (procs[i].pid > 0)
            rc |= th_service_stop(&procs[i]);
    return rc == 0 ? 0 : -1;
}

static int64_t jint(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* ---- the queue: 16 workers over every way in ---- */

static struct {
    struct qv_log acked, lost; /* completes answered 2xx; completes whose answer was lost */
    atomic_int deaths_left, stalls_left, enqueued_all;
    atomic_long rounds, claimed, completed, heartbeats, handbacks, fails, deaths;
    atomic_long stale_refused, stale_accepted, refused;
} q = {.acked = QV_LOG_INIT, .lost = QV_LOG_INIT};

static int refusal(long st, json_t *j)
{
    const char *code = json_string_value(json_object_get(j, "code"));
    return st == 409 && code != NULL && strncmp(code, "lease_", 6) == 0
               ? 1
               : st == 409 && code != NULL && strcmp(code, "job_terminal") == 0;
}

struct lease {
    int64_t id, fence;
    int poison;
};

struct worker {
    struct worker_slot s; /* first: the life's thread gets the worker */
    struct mp_client c;
};

static struct worker workers[WORKERS];

enum verb { V_HEARTBEAT, V_COMPLETE, V_FAIL, V_HANDBACK };

/* One lease write. Returns 1 when applied (2xx), 0 when refused (a 409 of the protocol: the
 * lease was lost); a complete whose answer was lost and that is refused as job_terminal on the
 * resend is noted as a lost answer. */
static int lease_write(struct worker *w, const struct lease *l, enum verb v, int stale)
{
    static const char *const suffix[] = {"", "/complete", "/fail", "/handback"};
    char path[128];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64 "%s", l->id, suffix[v]);
    json_t *body = json_pack("{s:s, s:I}", "owner", w->s.owner, "fence", (json_int_t)l->fence), *j;
    if (v == V_COMPLETE)
        json_object_set_new(body, "result", json_pack("{s:s}", "by", w->s.owner));
    if (v == V_FAIL)
        json_object_set_new(body, "error", json_pack("{s:b}", "poison", l->poison));
    int resent;
    long st = mp_call(&w->c, v == V_HEARTBEAT ? "PATCH" : "POST", path, body, NULL, &j, &resent);
    int ok = st >= 200 && st < 300;
    if (stale) {
        atomic_fetch_add(ok ? &q.stale_accepted : &q.stale_refused, 1);
        if (ok)
            fprintf(stderr, "STALE WRITE ACCEPTED: %s job %" PRId64 "\n", w->s.owner, l->id);
    } else if (ok && v == V_COMPLETE) {
        qv_log_add(&q.acked, l->id, l->fence, w->s.owner);
    } else if (!ok && refusal(st, j)) {
        const char *code = json_string_value(json_object_get(j, "code"));
        if (resent && v == V_COMPLETE && strcmp(code, "job_terminal") == 0)
            qv_log_add(&q.lost, l->id, l->fence, w->s.owner);
        atomic_fetch_add(&q.refused, 1);
    } else if (!ok) {
        mp_unexpected_answer(path, st, j);
    }
    if (!refusal(st, j) && !ok && stale)
        mp_unexpected_answer("stale write", st, j);
    json_decref(j);
    return ok;
}

/* Claims 1 to 5 jobs, waiting up to 1 s; returns how many. */
static size_t claim(struct worker *w, struct lease *out)
{
    int max = 1 + (int)(rand_r(&w->s.seed) % 5);
    json_t *j = mp_call_ok(
        &w->c, "POST", "/queues/q/leases",
        json_pack("{s:s, s:i, s:i}", "owner", w->s.owner, "max_jobs", max, "wait_seconds", 1),
        NULL);
    json_t *leases = json_object_get(j, "leases");
    size_t n = json_array_size(leases);
    for (size_t i = 0; i < n && i < (size_t)max; i++) {
        json_t *l = json_array_get(leases, i);
        out[i].id = jint(l, "job_id");
        out[i].fence = jint(l, "fence");
        out[i].poison = json_is_true(json_object_get(json_object_get(l, "payload"), "poison"));
    }
    json_decref(j);
    n = n > (size_t)max ? (size_t)max : n;
    atomic_fetch_add(&q.claimed, (long)n);
    return n;
}

/* Works one lease: a heartbeat now and then, hand-backs and fails at random, poison fails. */
static void work_one(struct worker *w, const struct lease *l)
{
    unsigned r = (unsigned)rand_r(&w->s.seed) % 100;
    usleep((useconds_t)(rand_r(&w->s.seed) % 3000));
    if (r < 12) {
        if (!lease_write(w, l, V_HEARTBEAT, 0))
            return;
        atomic_fetch_add(&q.heartbeats, 1);
    }
    if (r >= 12 && r < 18)
        atomic_fetch_add(&q.handbacks, lease_write(w, l, V_HANDBACK, 0));
    else if (l->poison || r >= 97)
        atomic_fetch_add(&q.fails, lease_write(w, l, V_FAIL, 0));
    else
        atomic_fetch_add(&q.completed, lease_write(w, l, V_COMPLETE, 0));
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct lease ls[5];
    while (!atomic_load(&stop_workers)) {
        size_t n = claim(w, ls);
        if (n == 0)
            continue;
        long round = atomic_fetch_add(&q.rounds, 1);
        if (round % 31 == 15 && atomic_fetch_sub(&q.deaths_left, 1) > 0) {
            atomic_fetch_add(&q.deaths, 1); /* vanishes holding its leases */
            atomic_store(&w->s.dead, 1);
            return NULL;
        }
        if (round % 31 == 0 && atomic_fetch_sub(&q.stalls_left, 1) > 0) {
            sleep_ms(LEASE_S * 1000 + 500); /* stalls past its leases, then writes */
            for (size_t i = 0; i < n; i++)
                lease_write(w, &ls[i], (enum verb)(i % 3), 1);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            work_one(w, &ls[i]);
    }
    return NULL;
}

/* Starts the next life of a worker slot under a new owner id; worker w goes through target
 * w % NTARGET. */
static void worker_start(struct worker *w)
{
    mp_client_init(&w->c, w->s.slot % NTARGET);
    worker_slot_start(&w->s, worker_main, w);
}

static void supervise(void)
{
    for (int i = 0; i < WORKERS; i++)
        if (worker_slot_reap(&workers[i].s)) {
            mp_client_free(&workers[i].c);
            worker_start(&workers[i]);
        }
}

/* Enqueues JOBS jobs in batches through haproxy, each with a dedupe key, so a resent batch
 * adds nothing twice. */
static void *enqueuer_main(void *arg)
{
    struct mp_client c;
    mp_client_init(&c, 0);
    for (int first = 0; first < JOBS; first += ENQ_EACH) {
        json_t *jobs = json_array();
        for (int i = first; i < first + ENQ_EACH; i++) {
            char key[32];
            snprintf(key, sizeof(key), "job-%d", i);
            json_array_append_new(jobs, json_pack("{s:{s:i, s:b}, s:s}", "payload", "n", i,
                                                  "poison", i % POISON == 0, "dedupe_key", key));
        }
        json_decref(
            mp_call_ok(&c, "POST", "/queues/q/jobs", json_pack("{s:o}", "jobs", jobs), NULL));
        sleep_ms(700);
    }
    atomic_store(&q.enqueued_all, 1);
    mp_client_free(&c);
    return NULL;
}

/* Pending plus processing jobs, read through haproxy; -1 when unknown. */
static long unfinished(void)
{
    struct mp_client c;
    mp_client_init(&c, 0);
    json_t *j = mp_call_ok(&c, "GET", "/queues/q", NULL, NULL);
    json_t *counts = json_object_get(j, "counts");
    long n = j ? (long)(jint(counts, "pending") + jint(counts, "processing")) : -1;
    json_decref(j);
    mp_client_free(&c);
    return n;
}

/* ---- topics: first PATCHes of new keys, and log followers ---- */

static pthread_barrier_t patch_round;

/* Patcher p (through target p) sets field "t<p>" on the new key of every round, released with
 * the other patchers each round. A merge patch applied twice is the same value, so a resend is
 * harmless. */
static void *patcher_main(void *arg)
{
    int p = (int)(intptr_t)arg;
    struct mp_client c;
    mp_client_init(&c, p);
    char path[96], field[8];
    snprintf(field, sizeof(field), "t%d", p);
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&patch_round);
        snprintf(path, sizeof(path), "/topics/merge/keys/round-%d/head", r);
        json_decref(mp_call_ok(&c, "PATCH", path, json_pack("{s:i}", field, r),
                               "application/merge-patch+json"));
        sleep_ms(100);
    }
    mp_client_free(&c);
    return NULL;
}

/* Merges lost: rounds whose head lacks a patcher's field. */
static int lost_merges(void)
{
    struct mp_client c;
    mp_client_init(&c, 1);
    int lost = 0;
    for (int r = 0; r < ROUNDS; r++) {
        char path[96];
        snprintf(path, sizeof(path), "/topics/merge/keys/round-%d/head", r);
        json_t *j = mp_call_ok(&c, "GET", path, NULL, NULL);
        json_t *v = json_object_get(j, "value");
        if (json_object_size(v) != PATCHERS) {
            char *t = json_dumps(v, JSON_COMPACT);
            fprintf(stderr, "round %d: head %s, want %d fields\n", r, t ? t : "(none)", PATCHERS);
            free(t);
            lost++;
        }
        json_decref(j);
    }
    mp_client_free(&c);
    return lost;
}

static atomic_int producers_done;

/* Producer p writes MESSAGES messages with sequences 1.., one at a time, through target p + 2
 * (B, C) or haproxy; a resend carries the same sequence, so it lands once. */
static void *producer_main(void *arg)
{
    int p = (int)(intptr_t)arg;
    struct mp_client c;
    mp_client_init(&c, p < 2 ? p + 2 : 0);
    char name[16];
    snprintf(name, sizeof(name), "p%d", p);
    for (int s = 1; s <= MESSAGES; s++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", s % 7);
        json_decref(mp_call_ok(&c, "POST", "/topics/log/messages",
                               json_pack("{s:s, s:s, s:{s:i, s:i}, s:i}", "producer", name, "key",
                                         key, "value", "p", p, "s", s, "sequence", s),
                               NULL));
        sleep_ms(40);
    }
    atomic_fetch_add(&producers_done, 1);
    mp_client_free(&c);
    return NULL;
}

struct follower {
    pthread_t thread;
    int n, bad;
    int next_seq[PRODUCERS]; /* the sequence expected next from each producer */
};

static struct follower followers[FOLLOWERS];

static void follower_problem(struct follower *f, const char *fmt, ...)
{
    if (f->bad++ < 5) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "follower %d: ", (int)(f - followers));
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

/* Long-polls the log on A (wait 5 s) until it saw every message, or 15 s after the last
 * producer finished (or the run's time is up): offsets must grow, and each producer's sequences
 * come 1, 2, 3, ... once each. */
static void *follower_main(void *arg)
{
    struct follower *f = arg;
    struct mp_client c;
    mp_client_init(&c, 1);
    int64_t after = 0, last = 0;
    for (int i = 0; i < PRODUCERS; i++)
        f->next_seq[i] = 1;
    double give_up = th_now() + RUN_MAX;
    while (f->n < PRODUCERS * MESSAGES && th_now() < give_up) {
        if (atomic_load(&producers_done) == PRODUCERS && give_up > th_now() + 15)
            give_up = th_now() + 15;
        char path[96];
        snprintf(path, sizeof(path), "/topics/log/messages?after=%" PRId64 "&limit=50&wait=5",
                 after);
        json_t *j = mp_call_ok(&c, "GET", path, NULL, NULL), *m;
        size_t i;
        json_array_foreach(json_object_get(j, "messages"), i, m)
        {
            int64_t off = jint(m, "offset");
            json_t *v = json_object_get(m, "value");
            int p = (int)jint(v, "p"), s = (int)jint(v, "s");
            if (off <= last)
                follower_problem(f, "offset %" PRId64 " after %" PRId64, off, last);
            if (p < 0 || p >= PRODUCERS || s != f->next_seq[p])
                follower_problem(f, "p%d sequence %d, want %d", p, s,
                                 p >= 0 && p < PRODUCERS ? f->next_seq[p] : -1);
            else
                f->next_seq[p]++;
            last = off;
            f->n++;
        }
        if (j != NULL)
            after = jint(j, "next");
        json_decref(j);
    }
    mp_client_free(&c);
    return NULL;
}

/* ---- the ledger: two optimistic senders and a checkpoint sender through different ways ---- */

static atomic_long superseded;
static pthread_barrier_t ledger_step; /* the two optimistic senders send each one together */
static atomic_int optimistic_done;    /* the optimistic senders' last transaction answered 2xx */

/* Transaction i (1..LTX): writes object o<i % OBJECTS> at version i, having read its version
 * i - OBJECTS (when there was one), and emits one event. */
static json_t *ledger_tx(int i)
{
    char digest[16], obj[16];
    snprintf(digest, sizeof(digest), "tx-%d", i);
    snprintf(obj, sizeof(obj), "o%d", i % OBJECTS);
    json_t *tx = json_pack("{s:s, s:[{s:s, s:i, s:s, s:{s:i}}], s:[{s:s, s:{s:i}}]}", "digest",
                           digest, "writes", "object_id", obj, "version", i, "type", "Obj", "data",
                           "i", i, "events", "type", "E", "data", "i", i);
    if (i > OBJECTS)
        json_object_set_new(tx, "inputs",
                            json_pack("[{s:s, s:i}]", "object_id", obj, "version", i - OBJECTS));
    return tx;
}

/* Sends every transaction in order through target (arg), each at the same moment as the other
 * optimistic sender; a replay answers 200. */
static void *optimistic_main(void *arg)
{
    struct mp_client c;
    mp_client_init(&c, (int)(intptr_t)arg);
    for (int i = 1; i <= LTX; i++) {
        json_t *j = NULL;
        int resent;
        pthread_barrier_wait(&ledger_step);
        long st = mp_call(&c, "POST", "/ledgers/L/transactions", ledger_tx(i), NULL, &j, &resent);
        const char *code = json_string_value(json_object_get(j, "code"));
        if (st == 409 && code && strcmp(code, "superseded") == 0)
            atomic_fetch_add(&superseded, 1);
        else if (st != 200 && st != 201)
            mp_unexpected_answer("ledger transaction", st, j);
        for (int was = atomic_load(&optimistic_done);
             (st == 200 || st == 201) && was < i &&
             !atomic_compare_exchange_weak(&optimistic_done, &was, i);)
            ;
        json_decref(j);
        sleep_ms(30);
    }
    mp_client_free(&c);
    return NULL;
}

/* Sends checkpoints 1 .. LTX / CKPT - 2 in order through C directly: the first half ahead of
 * the optimistic senders (the checkpoint applies first, the optimistic copies replay), the rest
 * each only once the optimistic senders are two checkpoints past it, so that it re-applies
 * object versions already overwritten (the version guard must keep the newer ones). The last
 * two checkpoints' transactions arrive only optimistically. */
static void *checkpointer_main(void *arg)
{
    struct mp_client c;
    mp_client_init(&c, 3);
    double give_up = th_now() + RUN_MAX;
    for (int k = 1; k <= LTX / CKPT - 2; k++) {
        while (k > LTX / CKPT / 2 && atomic_load(&optimistic_done) < (k + 2) * CKPT &&
               th_now() < give_up)
            sleep_ms(20);
        json_t *txs = json_array();
        for (int i = (k - 1) * CKPT + 1; i <= k * CKPT; i++)
            json_array_append_new(txs, ledger_tx(i));
        json_decref(mp_call_ok(&c, "POST", "/ledgers/L/checkpoints",
                               json_pack("{s:i, s:o}", "sequence", k, "transactions", txs), NULL));
        sleep_ms(150);
    }
    mp_client_free(&c);
    return NULL;
}

/* Differences from the in-order model: objects, and the event log (each transaction's event
 * once, in order), read through haproxy. */
static int ledger_differences(void)
{
    struct mp_client c;
    mp_client_init(&c, 0);
    int bad = 0;
    for (int o = 0; o < OBJECTS; o++) {
        char path[64];
        snprintf(path, sizeof(path), "/ledgers/L/objects/o%d", o);
        int want = LTX - ((LTX - o) % OBJECTS);
        json_t *j = mp_call_ok(&c, "GET", path, NULL, NULL);
        if (jint(j, "version") != want || jint(json_object_get(j, "data"), "i") != want) {
            fprintf(stderr, "object o%d: version %" PRId64 ", want %d\n", o, jint(j, "version"),
                    want);
            bad++;
        }
        json_decref(j);
    }
    int64_t after = 0;
    int seen = 0;
    for (int page = 0; page < 10 && seen <= LTX; page++) {
        char path[96];
        snprintf(path, sizeof(path), "/ledgers/L/events?after=%" PRId64 "&limit=1000", after);
        json_t *j = mp_call_ok(&c, "GET", path, NULL, NULL), *e;
        size_t i;
        json_array_foreach(json_object_get(j, "events"), i, e)
        {
            if (jint(json_object_get(e, "data"), "i") != ++seen && bad++ < 5)
                fprintf(stderr, "event %d is transaction %" PRId64 "'s\n", seen,
                        jint(json_object_get(e, "data"), "i"));
        }
        if (j == NULL || json_array_size(json_object_get(j, "events")) == 0) {
            json_decref(j);
            break;
        }
        after = jint(j, "next");
        json_decref(j);
    }
    if (seen != LTX) {
        fprintf(stderr, "%d events, want %d\n", seen, LTX);
        bad++;
    }
    mp_client_free(&c);
    return bad;
}

/* ---- the run ---- */

static void create_resources(void)
{
    struct mp_client c;
    mp_client_init(&c, 0);
    const char *const puts[][2] = {
        {"/queues/q", "{\"max_attempts\":3,\"lease_seconds\":2,\"backoff_base_seconds\":0.05,"
                      "\"backoff_max_seconds\":0.2}"},
        {"/topics/merge", "{}"},
        {"/topics/log", "{}"},
        {"/topics/log/producers/p0", "{\"schema_version\":1}"},
        {"/topics/log/producers/p1", "{\"schema_version\":1}"},
        {"/topics/log/producers/p2", "{\"schema_version\":1}"},
        {"/ledgers/L", "{}"},
    };
    for (size_t i = 0; i < sizeof(puts) / sizeof(puts[0]); i++) {
        json_t *j = mp_call_ok(&c, "PUT", puts[i][0], json_loads(puts[i][1], 0, NULL), NULL);
        assert_non_null(j);
        json_decref(j);
    }
    mp_client_free(&c);
}

/* kill -9 of B, and B started again on its port (haproxy's health check brings it back). */
static void kill_and_restart_victim(void)
{
    fprintf(stderr, "%s: kill -9 of process B (pid %d, port %d)\n", __func__,
            (int)procs[VICTIM].pid, mp_ports[VICTIM + 1]);
    th_service_signal(&procs[VICTIM], SIGKILL);
    assert_int_equal(th_service_wait(&procs[VICTIM], 10), -1);
    sleep_ms(500);
    double t = th_now();
    assert_int_equal(start_proc(VICTIM, mp_ports[VICTIM + 1]), 0);
    assert_int_equal(procs[VICTIM].port, mp_ports[VICTIM + 1]);
    fprintf(stderr, "B listening again on port %d after %.2f s\n", procs[VICTIM].port,
            th_now() - t);
}

struct side {
    pthread_t t;
    int started;
};

static void side_start(struct side *s, void *(*fn)(void *), void *arg)
{
    s->started = pthread_create(&s->t, NULL, fn, arg) == 0;
    assert_true(s->started);
}

/* Runs until the queue is settled and the other workloads are done, replacing dead workers and
 * killing B on the way; every thread joined before it returns. */
static void run_all(void)
{
    struct side enq, patchers[PATCHERS], producers[PRODUCERS], opt[2], ckpt;
    pthread_barrier_init(&patch_round, NULL, PATCHERS);
    pthread_barrier_init(&ledger_step, NULL, 2);
    atomic_store(&q.deaths_left, DEATHS);
    atomic_store(&q.stalls_left, STALLS);
    for (int i = 0; i < FOLLOWERS; i++)
        assert_int_equal(pthread_create(&followers[i].thread, NULL, follower_main, &followers[i]),
                         0);
    for (int i = 0; i < WORKERS; i++) {
        workers[i].s.slot = i;
        worker_start(&workers[i]);
        assert_true(workers[i].s.running);
    }
    side_start(&enq, enqueuer_main, NULL);
    for (int i = 0; i < PATCHERS; i++)
        side_start(&patchers[i], patcher_main, (void *)(intptr_t)i);
    for (int i = 0; i < PRODUCERS; i++)
        side_start(&producers[i], producer_main, (void *)(intptr_t)i);
    side_start(&opt[0], optimistic_main, (void *)(intptr_t)0);
    side_start(&opt[1], optimistic_main, (void *)(intptr_t)2);
    side_start(&ckpt, checkpointer_main, NULL);
    double t0 = th_now(), said = t0;
    int killed = 0;
    long left = -1;
    while (th_now() - t0 < RUN_MAX) {
        supervise();
        if (!killed && th_now() - t0 >= KILL_AT) {
            kill_and_restart_victim();
            killed = 1;
        }
        if (killed && atomic_load(&q.enqueued_all) && (left = unfinished()) == 0)
            break;
        if (th_now() - said >= 5 && (said = th_now()) > 0)
            fprintf(stderr, "%.0f s: %ld jobs unfinished, %ld claimed\n", th_now() - t0, left,
                    atomic_load(&q.claimed));
        sleep_ms(200);
    }
    atomic_store(&stop_workers, 1);
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(workers[i].s.thread, NULL);
        mp_client_free(&workers[i].c);
    }
    pthread_join(enq.t, NULL);
    for (int i = 0; i < PATCHERS; i++)
        pthread_join(patchers[i].t, NULL);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(producers[i].t, NULL);
    pthread_join(opt[0].t, NULL);
    pthread_join(opt[1].t, NULL);
    pthread_join(ckpt.t, NULL);
    for (int i = 0; i < FOLLOWERS; i++)
        pthread_join(followers[i].thread, NULL);
    pthread_barrier_destroy(&patch_round);
    pthread_barrier_destroy(&ledger_step);
    fprintf(stderr, "run: %.1f s, %ld jobs unfinished at the end\n", th_now() - t0, left);
    assert_int_equal(left, 0);
}

/* GET /healthz answered by B since its restart: only haproxy sends it there. */
static double healthz_answered_by_b(void)
{
    struct th_response r;
    double n = 0;
    if (th_http(mp_ports[VICTIM + 1], "GET", "/metrics", NULL, NULL, 0, &r) == 0 && r.body) {
        for (char *l = strstr(r.body, "\nrowlock_http_requests_total{"); l;
             l = strstr(l + 1, "\nrowlock_http_requests_total{")) {
            char *end = strchr(l + 1, '\n'), *sp = strchr(l + 1, ' ');
            if (sp && (!end || sp < end) && strstr(l, "route=\"/healthz\"") &&
                strstr(l, "route=\"/healthz\"") < sp)
                n += atof(sp + 1);
        }
    }
    th_response_free(&r);
    return n;
}

/* haproxy sends requests to B again: of 40 through it, some were answered by B. */
static void assert_victim_back_in_rotation(void)
{
    for (int i = 0; i < 40; i++) {
        struct th_response r;
        assert_int_equal(th_http(mp_ports[0], "GET", "/healthz", NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        th_response_free(&r);
    }
    double n = healthz_answered_by_b();
    fprintf(stderr, "B answered %.0f of 40 requests through haproxy after its restart\n", n);
    assert_true(n > 0);
}

static void print_run(void)
{
    fprintf(stderr,
            "queue: %ld claimed, %ld completed (%zu acknowledged, %zu answers lost), %ld "
            "heartbeats, %ld hand-backs, %ld fails, %ld vanished workers, stale writes refused "
            "%ld accepted %ld, %ld live writes refused; %ld requests resent after a failed try; "
            "%ld ledger submissions superseded; %ld unexpected answers\n",
            atomic_load(&q.claimed), atomic_load(&q.completed), q.acked.n, q.lost.n,
            atomic_load(&q.heartbeats), atomic_load(&q.handbacks), atomic_load(&q.fails),
            atomic_load(&q.deaths), atomic_load(&q.stale_refused), atomic_load(&q.stale_accepted),
            atomic_load(&q.refused), atomic_load(&mp_resent), atomic_load(&superseded),
            atomic_load(&mp_unexpected));
}

static void many_processes_behind_haproxy_lose_nothing_across_a_kill(void **state)
{
    create_resources();
    run_all();
    print_run();
    PGconn *c = th_pg(th_svc_dburl);
    const struct qv_rules rules = {
        .queue = "q", .max_attempts = ATTEMPTS, .acked = &q.acked, .lost = &q.lost};
    struct qv_verdict v = qv_check_queue(c, &rules);
    PQfinish(c);
    int lost = lost_merges(), ledger_bad = ledger_differences();
    int short_followers = 0, bad_followers = 0;
    for (int i = 0; i < FOLLOWERS; i++) {
        fprintf(stderr, "follower %d saw %d messages, %d out of order or twice\n", i,
                followers[i].n, followers[i].bad);
        short_followers += followers[i].n != PRODUCERS * MESSAGES;
        bad_followers += followers[i].bad;
    }
    fprintf(stderr, "%d of %d new keys lost a merge; %d ledger differences\n", lost, ROUNDS,
            ledger_bad);
    assert_int_equal(v.jobs, JOBS);
    assert_int_equal(v.overlaps, 0);
    assert_int_equal(v.bad_jobs, 0);
    assert_int_equal(atomic_load(&q.stale_accepted), 0);
    assert_int_equal(lost, 0);
    assert_int_equal(bad_followers, 0);
    assert_int_equal(short_followers, 0);
    assert_int_equal(ledger_bad, 0);
    assert_int_equal(atomic_load(&mp_unexpected), 0);
    /* the run exercised what it claims to */
    assert_true(v.failed >= JOBS / POISON);
    assert_true(atomic_load(&q.deaths) > 0 && atomic_load(&q.stale_refused) > 0);
    assert_true(atomic_load(&q.handbacks) > 0 && atomic_load(&q.heartbeats) > 0);
    assert_true(atomic_load(&mp_resent) > 0); /* the kill cut requests */
    assert_victim_back_in_rotation();
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(many_processes_behind_haproxy_lose_nothing_across_a_kill),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
