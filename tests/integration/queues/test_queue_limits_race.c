/* Concurrency and rate limits, exact across processes. Three rowlock processes on one database;
 * 32 workers claim batches of jobs with random concurrency keys (one key hot) from random
 * processes, work a few milliseconds, and complete, hand back or abandon each lease (an
 * abandoned lease expires and is taken over); one process is killed with SIGKILL mid-run and
 * started again. Every attempt is then read from the database: it held its slot from its claim
 * (claimed_at, the clock its lease ran from) until it ended or its lease ran out, whichever came
 * first. The workers keep their own records too: from the claim's answer to the settlement's
 * request, each (job, fence) once.
 *   - Concurrency: at no instant do more leases of a key hold slots than the key's limit, nor of
 *     the queue than the queue's, in the database's record or in the workers'. A key with limits
 *     of its own is held to those.
 *   - Rate: in no window of any length do a key's claims, nor the queue's, pass burst + rate x
 *     the window's length.
 * The limits did bind (the queue's counts of jobs held back are above 0), and the race saw
 * expired leases taken over; the janitor then deletes the keys' full rate buckets. Also: a
 * limited claim keeps priority and due order among the jobs that fit; a claim waiting on a full
 * key is woken by a completion in another process; and, deterministically: a heartbeat waiting
 * for its job's row as the lease runs out keeps its slot. Each assertion fails with its limit's
 * check taken out of the claim (db/leases.c, st_claim_limited). */
#include <math.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define PROCESSES 3
#define WORKERS   32
#define KEYS      8
#define LEASE_S   2
#define RUN_S     8
#define JOBS      1000
#define RECORDS   200000

static struct th_service svc[PROCESSES];
static _Atomic int ports[PROCESSES]; /* 0 while the process is down */

/* the janitor often, so that it deletes the keys' full rate buckets within the test; long-polls
 * re-checked only every 5 s, so that one answered sooner was woken */
static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=300",
                                  "ROWLOCK_POLL_INTERVAL_MS=5000", NULL};

static int setup(void **state)
{
    (void)state;
    if (th_svc_db("qlimits") != 0)
        return -1;
    for (int i = 0; i < PROCESSES; i++) {
        if (th_service_start(&svc[i], th_svc_dburl, env) != 0)
            return -1;
        atomic_store(&ports[i], svc[i].port);
    }
    return 0;
}

static int teardown(void **state)
{
    int r = 0;
    for (int i = 0; i < PROCESSES; i++)
        r |= th_service_stop(&svc[i]);
    return r == 0 ? th_svc_teardown(state) : -1;
}

/* One lease as a worker saw it. */
struct rec {
    int64_t job, fence;
    int key; /* -1: none */
    double start, end;
};

struct storm {
    const char *queue;
    atomic_int nrecs;
    struct rec *recs;
    atomic_int claims, leases, abandoned, refused;
    double deadline;
};

/* A worker's key of a lease's answer ("k3"), -1 for none. */
static int key_of(json_t *lease)
{
    const char *k = json_string_value(json_object_get(lease, "concurrency_key"));
    return k == NULL ? -1 : atoi(k + 1);
}

static int live_port(unsigned *seed)
{
    for (;;) {
        int p = atomic_load(&ports[rand_r(seed) % PROCESSES]);
        if (p != 0)
            return p;
    }
}

static void *worker(void *arg)
{
    struct storm *s = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self() ^ (unsigned)(th_now() * 1e6);
    struct th_client c;
    th_client_init(&c);
    char path[256], body[256], owner[32];
    snprintf(owner, sizeof(owner), "w%u", seed);
    while (th_now() < s->deadline) {
        int port = live_port(&seed);
        snprintf(path, sizeof(path), "/queues/%s/leases", s->queue);
        snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":%d}", owner,
                 1 + rand_r(&seed) % 6);
        json_t *out = NULL;
        long st = th_client_call_port(&c, port, "POST", path, body, &out);
        double got = th_now();
        atomic_fetch_add(&s->claims, 1);
        json_t *leases = json_object_get(out, "leases");
        if (st != 200 || json_array_size(leases) == 0) {
            json_decref(out);
            usleep(2000);
            continue;
        }
        size_t i;
        json_t *l;
        json_array_foreach(leases, i, l)
        {
            int64_t job = json_integer_value(json_object_get(l, "job_id"));
            int64_t fence = json_integer_value(json_object_get(l, "fence"));
            usleep((useconds_t)(2000 + rand_r(&seed) % 20000));
            int roll = rand_r(&seed) % 100;
            int n = atomic_fetch_add(&s->nrecs, 1);
            if (n < RECORDS)
                s->recs[n] = (struct rec){job, fence, key_of(l), got, th_now()};
            atomic_fetch_add(&s->leases, 1);
            if (roll < 2) { /* abandoned: its lease runs out and is taken over */
                atomic_fetch_add(&s->abandoned, 1);
                continue;
            }
            snprintf(path, sizeof(path), "/queues/%s/leases/%lld/%s", s->queue, (long long)job,
                     roll < 6 ? "handback" : "complete");
            snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"fence\":%lld}", owner,
                     (long long)fence);
            json_t *r = NULL;
            if (th_client_call_port(&c, live_port(&seed), "POST", path, body, &r) != 200)
                atomic_fetch_add(&s->refused, 1);
            json_decref(r);
        }
        json_decref(out);
    }
    th_client_free(&c);
    return NULL;
}

static void enqueue(const char *queue, unsigned seed)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    for (int b = 0; b < JOBS / 500; b++) {
        json_t *jobs = json_array();
        for (int i = 0; i < 500; i++) {
            int roll = rand_r(&seed) % 100;
            json_t *job = json_pack("{s:i}", "payload", b * 500 + i);
            if (roll >= 10) { /* key 0 is hot: half the keyed jobs */
                char key[8];
                snprintf(key, sizeof(key), "k%d", roll < 55 ? 0 : 1 + roll % (KEYS - 1));
                json_object_set_new(job, "concurrency_key", json_string(key));
            }
            json_array_append_new(jobs, job);
        }
        json_t *body = json_pack("{s:o}", "jobs", jobs);
        char *text = json_dumps(body, 0);
        json_decref(th_call(svc[0].port, "POST", path, text, 201));
        free(text);
        json_decref(body);
    }
}

/* Runs the storm on queue: WORKERS workers for RUN_S seconds, process 1 killed with SIGKILL a
 * third of the way and started again a little later. */
static void storm_run(struct storm *s)
{
    s->recs = calloc(RECORDS, sizeof(*s->recs));
    assert_non_null(s->recs);
    s->deadline = th_now() + RUN_S;
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, s), 0);
    sleep(RUN_S / 3);
    atomic_store(&ports[1], 0);
    th_service_signal(&svc[1], SIGKILL);
    assert_int_equal(th_service_wait(&svc[1], 10), -1);
    sleep(1);
    assert_int_equal(th_service_start(&svc[1], th_svc_dburl, env), 0);
    atomic_store(&ports[1], svc[1].port);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    print_message("%s: %d claims, %d leases, %d abandoned, %d settlements refused\n", s->queue,
                  atomic_load(&s->claims), atomic_load(&s->leases), atomic_load(&s->abandoned),
                  atomic_load(&s->refused));
}

/* ---- the most slots held at once ---- */

struct edge {
    double t;
    int delta, key;
};

static int edge_cmp(const void *a, const void *b)
{
    const struct edge *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->delta - y->delta; /* an end before a start at one instant: [start, end) */
}

/* The most intervals open at once, of each key (most[0..KEYS-1]) and of all (most[KEYS]). */
static void most_open(const struct rec *r, int n, int most[KEYS + 1])
{
    struct edge *e = calloc((size_t)n * 2, sizeof(*e));
    assert_non_null(e);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].end <= r[i].start)
            continue;
        e[m++] = (struct edge){r[i].start, 1, r[i].key};
        e[m++] = (struct edge){r[i].end, -1, r[i].key};
    }
    qsort(e, (size_t)m, sizeof(*e), edge_cmp);
    int open[KEYS + 1] = {0};
    memset(most, 0, sizeof(int) * (KEYS + 1));
    for (int i = 0; i < m; i++) {
        if (e[i].key >= 0) {
            open[e[i].key] += e[i].delta;
            if (open[e[i].key] > most[e[i].key])
                most[e[i].key] = open[e[i].key];
        }
        open[KEYS] += e[i].delta;
        if (open[KEYS] > most[KEYS])
            most[KEYS] = open[KEYS];
    }
    free(e);
}

/* Every attempt of the queue's jobs as the database recorded it: from its claim until it ended
 * or its lease (LEASE_S) ran out, whichever came first. *n gets how many; the caller frees. */
static struct rec *db_attempts(const char *queue, int *n, int *expired)
{
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SELECT h.job_id, h.fence, coalesce(substr(j.concurrency_key, 2)::int, -1), "
             "extract(epoch FROM h.claimed_at), extract(epoch FROM least(coalesce(h.ended_at, "
             "'infinity'), h.claimed_at + interval '%d s')), h.outcome = 'lease_expired' "
             "FROM rowlock.job_attempt_history h JOIN rowlock.jobs j ON j.id = h.job_id "
             "JOIN rowlock.queues q ON q.id = j.queue_id WHERE q.name = '%s'",
             LEASE_S, queue);
    PGresult *r = PQexec(th_svc_pg(), sql);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    *n = PQntuples(r);
    *expired = 0;
    struct rec *out = calloc((size_t)*n + 1, sizeof(*out));
    assert_non_null(out);
    for (int i = 0; i < *n; i++) {
        out[i] = (struct rec){strtoll(PQgetvalue(r, i, 0), NULL, 10),
                              strtoll(PQgetvalue(r, i, 1), NULL, 10), atoi(PQgetvalue(r, i, 2)),
                              atof(PQgetvalue(r, i, 3)), atof(PQgetvalue(r, i, 4))};
        *expired += PQgetvalue(r, i, 5)[0] == 't';
    }
    PQclear(r);
    return out;
}

static int64_t held_back(const char *queue, const char *what)
{
    return th_svc_sql_intf("SELECT coalesce((SELECT held_%s FROM rowlock.queue_limiter l JOIN "
                           "rowlock.queues q ON q.id = l.queue_id WHERE q.name = '%s' AND "
                           "l.key = ''), 0)",
                           what, queue);
}

/* The queue's limits: 10 leases at once, 3 a key, 5 for key k1 (its own). */
#define QUEUE_LIMIT 10
#define KEY_LIMIT   3
#define K1_LIMIT    5

static void concurrency_is_exact(void **state)
{
    (void)state;
    json_decref(th_call(svc[0].port, "PUT", "/queues/conc",
                        "{\"lease_seconds\": 2, \"max_attempts\": 1000, \"limits\": "
                        "{\"concurrency\": 10}, \"key_limits\": {\"concurrency\": 3}}",
                        201));
    json_decref(th_call(svc[2].port, "PUT", "/queues/conc/keys/k1",
                        "{\"limits\": {\"concurrency\": 5}}", 201));
    enqueue("conc", 7);
    struct storm s = {.queue = "conc"};
    storm_run(&s);
    int limit[KEYS + 1];
    for (int k = 0; k < KEYS; k++)
        limit[k] = k == 1 ? K1_LIMIT : KEY_LIMIT;
    limit[KEYS] = QUEUE_LIMIT;

    int n, expired, most[KEYS + 1];
    struct rec *a = db_attempts("conc", &n, &expired);
    most_open(a, n, most);
    print_message("database: %d attempts (%d expired and taken over); most at once: queue %d, "
                  "k0 %d, k1 %d, k2 %d\n",
                  n, expired, most[KEYS], most[0], most[1], most[2]);
    for (int k = 0; k <= KEYS; k++)
        if (most[k] > limit[k])
            fail_msg("database: %d leases of %s %d held slots at once; the limit is %d", most[k],
                     k == KEYS ? "the queue, key" : "key k", k, limit[k]);
    int nrec = atomic_load(&s.nrecs) < RECORDS ? atomic_load(&s.nrecs) : RECORDS;
    most_open(s.recs, nrec, most);
    print_message("workers: %d leases; most at once: queue %d, k0 %d, k1 %d\n", nrec, most[KEYS],
                  most[0], most[1]);
    for (int k = 0; k <= KEYS; k++)
        if (most[k] > limit[k])
            fail_msg("workers: %d leases of %s %d at once; the limit is %d", most[k],
                     k == KEYS ? "the queue, key" : "key k", k, limit[k]);
    /* the limits bound, and leases ran out mid-run */
    assert_true(held_back("conc", "concurrency") > 0);
    assert_true(held_back("conc", "key_concurrency") > 0);
    /* /metrics says so too, and GET of the queue */
    assert_true(th_metric(svc[2].port, "rowlock_queue_limit_held_back_total{queue=\"conc\","
                                       "limit=\"key_concurrency\"}") > 0);
    json_t *q = th_get_json(svc[0].port, "/queues/conc");
    json_t *hb = json_object_get(q, "limits_held_back");
    assert_true(json_integer_value(json_object_get(hb, "concurrency")) > 0);
    assert_int_equal(json_integer_value(json_object_get(hb, "rate")), 0);
    json_decref(q);
    assert_true(expired > 0);
    assert_true(nrec > 200);
    free(a);
    free(s.recs);
}

/* The largest count of times (sorted) in any window, less what the bucket allows it (burst +
 * rate x its length): above 0 means the budget was passed. */
static double worst_window(const double *t, int n, double rate, double burst)
{
    double worst = -1e9;
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) {
            double over = (j - i + 1) - (burst + rate * (t[j] - t[i]));
            if (over > worst)
                worst = over;
        }
    return worst;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void rate_is_exact(void **state)
{
    (void)state;
    /* the queue: 40 claims a second, bursts of 8; every key: 6 a second, bursts of 2 */
    json_decref(th_call(svc[0].port, "PUT", "/queues/rated",
                        "{\"lease_seconds\": 2, \"max_attempts\": 1000, \"limits\": {\"rate\": "
                        "{\"limit\": 40, \"period_seconds\": 1, \"burst\": 8}}, \"key_limits\": "
                        "{\"rate\": {\"limit\": 3, \"period_seconds\": 0.5, \"burst\": 2}}}",
                        201));
    enqueue("rated", 11);
    struct storm s = {.queue = "rated"};
    storm_run(&s);
    int n, expired;
    struct rec *a = db_attempts("rated", &n, &expired);
    double *t = calloc((size_t)n + 1, sizeof(double));
    assert_non_null(t);
    for (int k = -1; k < KEYS; k++) {
        char who[16];
        snprintf(who, sizeof(who), k == -1 ? "the queue" : "key k%d", k);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (k == -1 || a[i].key == k)
                t[m++] = a[i].start;
        qsort(t, (size_t)m, sizeof(double), dbl_cmp);
        double rate = k == -1 ? 40 : 6, burst = k == -1 ? 8 : 2;
        double worst = worst_window(t, m, rate, burst);
        print_message("%s: %d claims; the fullest window, against burst + rate x length: "
                      "%+.3f\n",
                      who, m, worst);
        /* (a microsecond's rounding of the recorded times) */
        if (worst > 1e-3)
            fail_msg("%s: %.3f claims past burst + rate x length in one window", who, worst);
    }
    assert_true(held_back("rated", "rate") > 0);
    assert_true(held_back("rated", "key_rate") > 0);
    /* the keys' buckets, full again a second after the storm, are deleted by the janitor; the
     * queue's stays (it holds the counts) */
    double until = th_now() + 10;
    int64_t left = -1;
    while (th_now() < until && (left = th_svc_sql_int("SELECT count(*) FROM rowlock.queue_limiter "
                                                      "WHERE key <> ''")) > 0)
        usleep(100000);
    assert_int_equal(left, 0);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.queue_limiter l JOIN "
                                    "rowlock.queues q ON q.id = l.queue_id WHERE q.name = "
                                    "'rated' AND l.key = ''"),
                     1);
    assert_true(n > 100);
    free(t);
    free(a);
    free(s.recs);
}

/* A heartbeat that found its lease live and waits for the job's row (here: a session holds it
 * FOR SHARE) while the lease runs out. A claim then must not count that lease's slot free: the
 * heartbeat, once it gets the row, extends the lease. The claim skips the locked lease and
 * counts it held, so a key limited to 1 never has 2 live leases. (Counting the slots of expired
 * leases by the claim's snapshot alone hands out the second.) */
struct beat {
    int port;
    int64_t job, fence;
    long status;
};

static void *heartbeat(void *arg)
{
    struct beat *b = arg;
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/exp/leases/%lld", (long long)b->job);
    snprintf(body, sizeof(body), "{\"owner\":\"a\",\"fence\":%lld,\"lease_seconds\":30}",
             (long long)b->fence);
    struct th_response r;
    b->status = th_http(b->port, "PATCH", path,
                        (const char *const[]){"Content-Type: "
                                              "application/json",
                                              NULL},
                        body, strlen(body), &r) == 0
                    ? r.status
                    : -1;
    if (b->status != -1)
        th_response_free(&r);
    return NULL;
}

static int64_t claim_one(int port, const char *owner, int64_t *fence)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":1}", owner);
    json_t *out = th_call(port, "POST", "/queues/exp/leases", body, 200);
    json_t *l = json_array_get(json_object_get(out, "leases"), 0);
    int64_t job = l ? json_integer_value(json_object_get(l, "job_id")) : 0;
    if (fence != NULL && l != NULL)
        *fence = json_integer_value(json_object_get(l, "fence"));
    json_decref(out);
    return job;
}

static void heartbeat_at_expiry_keeps_its_slot(void **state)
{
    (void)state;
    int port = svc[0].port;
    json_decref(th_call(port, "PUT", "/queues/exp",
                        "{\"lease_seconds\": 1, \"key_limits\": {\"concurrency\": 1}}", 201));
    json_decref(th_call(port, "POST", "/queues/exp/jobs",
                        "{\"jobs\": [{\"payload\": 1, \"concurrency_key\": \"x\"}, "
                        "{\"payload\": 2, \"concurrency_key\": \"x\"}]}",
                        201));
    struct beat b = {.port = port};
    double claimed = th_now();
    b.job = claim_one(port, "a", &b.fence);
    assert_true(b.job > 0);
    PGconn *s = th_pg(th_svc_dburl);
    char sql[160];
    PQclear(th_sql(s, "BEGIN"));
    snprintf(sql, sizeof(sql), "SELECT 1 FROM rowlock.jobs WHERE id = %lld FOR SHARE",
             (long long)b.job);
    PQclear(th_sql(s, sql));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, heartbeat, &b), 0);
    th_wait_lock_waiter(th_svc_pg(), "the heartbeat");
    usleep((useconds_t)((claimed + 1.3 - th_now()) * 1e6));
    /* the lease has run out; its heartbeat waits for the row */
    assert_int_equal(claim_one(port, "b", NULL), 0);
    PQclear(th_sql(s, "COMMIT"));
    PQfinish(s);
    pthread_join(t, NULL);
    assert_int_equal(b.status, 200);
    assert_int_equal(claim_one(port, "b", NULL), 0);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.jobs WHERE state = 'processing' "
                                    "AND lease_expires_at > now() AND concurrency_key = 'x'"),
                     1);
}

/* A claim waiting on process 1 for a key that is full is answered, with the key's next job, when
 * a completion on process 0 frees the slot: by the wake-up, well before its re-check. */
struct poll {
    int port;
    double answered;
    int64_t job;
};

static void *long_poll(void *arg)
{
    struct poll *p = arg;
    json_t *out = th_call(p->port, "POST", "/queues/woken/leases",
                          "{\"owner\":\"b\",\"max_jobs\":5,\"wait_seconds\":20}", 200);
    p->answered = th_now();
    json_t *l = json_array_get(json_object_get(out, "leases"), 0);
    p->job = l ? json_integer_value(json_object_get(l, "job_id")) : 0;
    json_decref(out);
    return NULL;
}

static void waiting_claim_is_woken_when_a_slot_frees(void **state)
{
    (void)state;
    json_decref(th_call(svc[0].port, "PUT", "/queues/woken",
                        "{\"key_limits\": {\"concurrency\": 1}}", 201));
    json_decref(th_call(svc[0].port, "POST", "/queues/woken/jobs",
                        "{\"jobs\": [{\"payload\": 1, \"concurrency_key\": \"x\"}, "
                        "{\"payload\": 2, \"concurrency_key\": \"x\"}]}",
                        201));
    int64_t fence = 0, first = 0;
    json_t *c = th_call(svc[0].port, "POST", "/queues/woken/leases",
                        "{\"owner\":\"a\",\"max_jobs\":5}", 200);
    json_t *leases = json_object_get(c, "leases");
    assert_int_equal(json_array_size(leases), 1); /* the key's one slot */
    first = json_integer_value(json_object_get(json_array_get(leases, 0), "job_id"));
    fence = json_integer_value(json_object_get(json_array_get(leases, 0), "fence"));
    json_decref(c);
    struct poll p = {.port = svc[1].port};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, long_poll, &p), 0);
    /* the claim is waiting once its process counts it */
    for (int i = 0; i < 500 && th_metric(svc[1].port, "rowlock_http_long_polls_waiting") < 1; i++)
        usleep(10 * 1000);
    assert_true(th_metric(svc[1].port, "rowlock_http_long_polls_waiting") >= 1);
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/woken/leases/%lld/complete", (long long)first);
    snprintf(body, sizeof(body), "{\"owner\":\"a\",\"fence\":%lld}", (long long)fence);
    double done = th_now();
    json_decref(th_call(svc[0].port, "POST", path, body, 200));
    pthread_join(t, NULL);
    print_message("the waiting claim was answered %.0f ms after the completion\n",
                  (p.answered - done) * 1000);
    assert_true(p.job > 0 && p.job != first);
    assert_true(p.answered - done < 2.5); /* the re-check comes after 5 s */
}

/* Among the jobs that fit, a limited claim keeps the claim order: priority, then due time. */
static void claim_order_among_the_jobs_that_fit(void **state)
{
    (void)state;
    int port = svc[2].port;
    json_decref(th_call(port, "PUT", "/queues/ordered",
                        "{\"limits\": {\"concurrency\": 4}, \"key_limits\": {\"concurrency\": 1}}",
                        201));
    json_decref(th_call(port, "POST", "/queues/ordered/jobs",
                        "{\"jobs\": [{\"payload\": \"a1\", \"concurrency_key\": \"a\", "
                        "\"priority\": 9}, {\"payload\": \"a2\", \"concurrency_key\": \"a\", "
                        "\"priority\": 9}, {\"payload\": \"b1\", \"concurrency_key\": \"b\", "
                        "\"priority\": 5}, {\"payload\": \"n1\", \"priority\": 7}, "
                        "{\"payload\": \"c1\", \"concurrency_key\": \"c\", \"priority\": 1}, "
                        "{\"payload\": \"n2\", \"priority\": 0}]}",
                        201));
    json_t *c =
        th_call(port, "POST", "/queues/ordered/leases", "{\"owner\":\"o\",\"max_jobs\":10}", 200);
    json_t *leases = json_object_get(c, "leases");
    const char *want[] = {"a1", "n1", "b1", "c1"}; /* a2: key a is full; n2: the queue is */
    assert_int_equal(json_array_size(leases), 4);
    for (size_t i = 0; i < 4; i++)
        assert_string_equal(
            json_string_value(json_object_get(json_array_get(leases, i), "payload")), want[i]);
    json_decref(c);
}

/* A free key's job behind the jobs of many full keys is found by a claim of one: 150 keys each
 * holding its one slot (limit 1) and a second job waiting, then a job of a free key last in
 * claim order. Each round of the limited claim looks past the jobs of the keys found full. */
static void a_free_key_behind_full_keys_is_claimed(void **state)
{
    (void)state;
    int port = svc[1].port;
    enum { FULL = 150 };
    json_decref(
        th_call(port, "PUT", "/queues/behind", "{\"key_limits\": {\"concurrency\": 1}}", 201));
    json_t *jobs = json_array();
    for (int i = 0; i < 2 * FULL; i++) {
        char key[16];
        snprintf(key, sizeof(key), "f%d", i % FULL);
        json_array_append_new(jobs, json_pack("{s:i, s:s}", "payload", i, "concurrency_key", key));
    }
    json_t *batch = json_pack("{s:o}", "jobs", jobs);
    char *body = json_dumps(batch, 0);
    json_decref(batch);
    json_decref(th_call(port, "POST", "/queues/behind/jobs", body, 201));
    free(body);
    json_decref(th_call(port, "POST", "/queues/behind/jobs",
                        "{\"payload\": \"free\", \"concurrency_key\": \"z\"}", 201));
    /* every full key takes its slot: one job each */
    char claim[128];
    snprintf(claim, sizeof(claim), "{\"owner\": \"holder\", \"max_jobs\": %d}", FULL);
    json_t *c = th_call(port, "POST", "/queues/behind/leases", claim, 200);
    assert_int_equal(json_array_size(json_object_get(c, "leases")), FULL);
    json_decref(c);
    c = th_call(port, "POST", "/queues/behind/leases", "{\"owner\": \"one\", \"max_jobs\": 1}",
                200);
    json_t *leases = json_object_get(c, "leases");
    assert_int_equal(json_array_size(leases), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(leases, 0), "payload")),
                        "free");
    json_decref(c);
}

/* A queue whose key limit held jobs back before it had a rate starts its rate with a full
 * bucket: burst jobs at once. */
static void a_new_queue_rate_starts_full(void **state)
{
    (void)state;
    int port = svc[0].port;
    json_decref(
        th_call(port, "PUT", "/queues/bucket", "{\"key_limits\": {\"concurrency\": 1}}", 201));
    json_decref(th_call(port, "POST", "/queues/bucket/jobs",
                        "{\"jobs\": [{\"payload\": 1, \"concurrency_key\": \"a\"}, "
                        "{\"payload\": 2, \"concurrency_key\": \"a\"}]}",
                        201));
    json_t *c = th_call(port, "POST", "/queues/bucket/leases", "{\"owner\":\"o\",\"max_jobs\":2}",
                        200); /* one, the other held back by the key */
    assert_int_equal(json_array_size(json_object_get(c, "leases")), 1);
    json_decref(c);
    assert_true(held_back("bucket", "key_concurrency") > 0);
    json_decref(th_call(port, "PUT", "/queues/bucket",
                        "{\"limits\": {\"rate\": {\"limit\": 1, \"period_seconds\": 3600, "
                        "\"burst\": 5}}}",
                        200));
    json_decref(th_call(port, "POST", "/queues/bucket/jobs",
                        "{\"jobs\": [{\"payload\": 3}, {\"payload\": 4}, {\"payload\": 5}, "
                        "{\"payload\": 6}, {\"payload\": 7}, {\"payload\": 8}]}",
                        201));
    c = th_call(port, "POST", "/queues/bucket/leases", "{\"owner\":\"o\",\"max_jobs\":10}", 200);
    assert_int_equal(json_array_size(json_object_get(c, "leases")), 5);
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_order_among_the_jobs_that_fit),
        cmocka_unit_test(a_free_key_behind_full_keys_is_claimed),
        cmocka_unit_test(a_new_queue_rate_starts_full),
        cmocka_unit_test(heartbeat_at_expiry_keeps_its_slot),
        cmocka_unit_test(waiting_claim_is_woken_when_a_slot_frees),
        cmocka_unit_test(concurrency_is_exact),
        cmocka_unit_test(rate_is_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
