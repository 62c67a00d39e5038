/* The per-key gate of head writes (ROWLOCK_KEY_WRITERS): 16 threads PATCH one hot key, each its
 * own field, over and over. With ROWLOCK_KEY_WRITERS=1 no backend of the database ever waits on
 * a lock (a sampler polls pg_stat_activity throughout): the PATCHes queue in the process, one at
 * a time reaches the row lock, the gate-wait metric counts the queued ones, and every update
 * composes (the head ends with each thread's last value). With ROWLOCK_KEY_WRITERS=0 the same
 * load does show backends waiting on the lock, so the sampler would see them. And queued writes
 * hold no handler thread: with ROWLOCK_WORKERS=2 behind a gate of 1 and the hot key's row held
 * locked from outside, /metrics shows the queued writes suspended and reads of another key keep
 * being answered. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define THREADS 16
#define PATCHES 25

static int setup(void **state)
{
    (void)state;
    return th_svc_db("key_gate");
}

struct sampler {
    atomic_int stop;
    int most; /* most backends seen waiting on a lock at once */
    int samples;
};

static void *sample(void *arg)
{
    struct sampler *s = arg;
    PGconn *c = th_pg(th_svc_dburl);
    while (!atomic_load(&s->stop)) {
        /* waits on another transaction's row lock; not the relation-extension locks that
         * concurrent inserts into the log take now and then */
        PGresult *r = th_sql(c, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                "current_database() AND wait_event_type = 'Lock' AND "
                                "wait_event IN ('transactionid', 'tuple')");
        int n = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (n > s->most)
            s->most = n;
        s->samples++;
    }
    PQfinish(c);
    return NULL;
}

struct patcher {
    int port, index, failures;
    const char *path;
};

/* Reads another key's head over and over until told to stop; counts the answers. */
struct prober {
    int port;
    const char *path;
    atomic_int stop, answered, unexpected;
};

static void *probe(void *arg)
{
    struct prober *p = arg;
    while (!atomic_load(&p->stop)) {
        struct th_response r;
        if (th_http(p->port, "GET", p->path, NULL, NULL, 0, &r) == 0 && r.status == 404 &&
            strcmp(th_problem_code(&r), "head_not_found") == 0)
            atomic_fetch_add(&p->answered, 1);
        else
            atomic_fetch_add(&p->unexpected, 1);
        th_response_free(&r);
    }
    return NULL;
}

static void *patch_loop(void *arg)
{
    struct patcher *p = arg;
    const char *headers[] = {"Content-Type: application/merge-patch+json", NULL};
    for (int i = 1; i <= PATCHES; i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"w%d\":%d}", p->index, i);
        struct th_response r;
        if (th_http(p->port, "PATCH", p->path, headers, body, strlen(body), &r) != 0 ||
            r.status != 200)
            p->failures++;
        th_response_free(&r);
    }
    return NULL;
}

/* Starts a fresh service with ROWLOCK_KEY_WRITERS=writers and ROWLOCK_WORKERS=workers and
 * creates topic `topic`. The statement timeout (the lock_timeout too) outlasts any wait here. */
static void start_on_topic(struct th_service *svc, const char *writers, const char *workers,
                           const char *topic)
{
    char gate[64], threads[64], path[128];
    snprintf(gate, sizeof(gate), "ROWLOCK_KEY_WRITERS=%s", writers);
    snprintf(threads, sizeof(threads), "ROWLOCK_WORKERS=%s", workers);
    const char *env[] = {threads, "ROWLOCK_POOL_SIZE=32", "ROWLOCK_STATEMENT_TIMEOUT_MS=60000",
                         gate, NULL};
    assert_int_equal(th_service_start(svc, th_svc_dburl, env), 0);
    snprintf(path, sizeof(path), "/topics/%s", topic);
    const char *json[] = {"Content-Type: application/json", NULL};
    struct th_response r;
    assert_int_equal(th_http(svc->port, "PUT", path, json, "{}", 2, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
}

static void patchers_start(struct patcher *p, pthread_t *t, int port, const char *path)
{
    for (int i = 0; i < THREADS; i++) {
        p[i] = (struct patcher){port, i, 0, path};
        assert_int_equal(pthread_create(&t[i], NULL, patch_loop, &p[i]), 0);
    }
}

/* Joins the patchers; every PATCH succeeded, and every thread's last value is in the head: no
 * update was lost. */
static void patchers_join(struct patcher *p, pthread_t *t)
{
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(p[i].failures, 0);
    struct th_response r;
    assert_int_equal(th_http(p[0].port, "GET", p[0].path, NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *value = json_object_get(r.json, "value");
    for (int i = 0; i < THREADS; i++) {
        char field[16];
        snprintf(field, sizeof(field), "w%d", i);
        assert_int_equal(json_integer_value(json_object_get(value, field)), PATCHES);
    }
    th_response_free(&r);
}

/* PATCHes of topic's keys queued in the process behind the gate, so far. */
static double gate_waits(int port, const char *topic)
{
    char series[200];
    snprintf(series, sizeof(series), "rowlock_topic_head_write_gate_waits_total{topic=\"%s\"}",
             topic);
    return th_metric(port, series);
}

/* Runs the load against a fresh service (start_on_topic) on its key "hot"; returns the most
 * backends the sampler saw waiting on a lock. */
static int run_load(const char *writers, const char *workers, const char *topic, double *queued)
{
    struct th_service svc;
    start_on_topic(&svc, writers, workers, topic);
    char path[128];
    snprintf(path, sizeof(path), "/topics/%s/keys/hot/head", topic);
    struct sampler s = {0, 0, 0};
    pthread_t sampler;
    assert_int_equal(pthread_create(&sampler, NULL, sample, &s), 0);
    struct patcher p[THREADS];
    pthread_t t[THREADS];
    patchers_start(p, t, svc.port, path);
    patchers_join(p, t);
    atomic_store(&s.stop, 1);
    pthread_join(sampler, NULL);
    *queued = gate_waits(svc.port, topic);
    fprintf(stderr,
            "ROWLOCK_KEY_WRITERS=%s: at most %d backends waiting on a lock (%d samples), "
            "%.0f PATCHes queued in the process\n",
            writers, s.most, s.samples, *queued);
    assert_true(s.samples > 10);
    assert_int_equal(th_service_stop(&svc), 0);
    return s.most;
}

static void one_writer_a_key_never_waits_on_the_lock(void **state)
{
    (void)state;
    double queued = 0;
    assert_int_equal(run_load("1", "32", "gated", &queued), 0);
    assert_true(queued > 0);
}

static void without_the_gate_writers_wait_on_the_lock(void **state)
{
    (void)state;
    double queued = -1;
    assert_true(run_load("0", "32", "open", &queued) > 0);
    assert_true(queued <= 0); /* nothing queued in the process (the counter may be absent) */
}

/* With ROWLOCK_WORKERS=2 behind a gate of 1, a session outside holds the hot key's head row
 * locked: the first PATCH waits on it in the database (one handler thread and one connection),
 * the other 15 queue behind the gate. /metrics shows them suspended, and reads of another key
 * keep being answered on the second thread, all while the lock is held: so the queued writes
 * hold no thread. Without the gate (ROWLOCK_TEST_KEY_WRITERS=0, the negative control) two
 * waiting PATCHes take both threads and no read is answered until the lock goes. */
static void queued_writes_hold_no_handler_thread(void **state)
{
    (void)state;
    const char *writers = getenv("ROWLOCK_TEST_KEY_WRITERS");
    struct th_service svc;
    start_on_topic(&svc, writers ? writers : "1", "2", "few_workers");
    const char *hot = "/topics/few_workers/keys/hot/head";
    const char *merge[] = {"Content-Type: application/merge-patch+json", NULL};
    struct th_response r;
    assert_int_equal(th_http(svc.port, "PATCH", hot, merge, "{\"w\":0}", 7, &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);

    PGconn *holder = th_pg(th_svc_dburl);
    PQclear(th_sql(holder, "BEGIN"));
    PQclear(th_sql(holder, "SELECT 1 FROM rowlock.topic_heads h JOIN rowlock.topics t "
                           "ON t.id = h.topic_id WHERE t.name = 'few_workers' AND h.key = 'hot' "
                           "FOR UPDATE OF h"));
    struct patcher p[THREADS];
    pthread_t t[THREADS];
    patchers_start(p, t, svc.port, hot);
    double waiting = 0, give_up = th_now() + 30;
    while (waiting < THREADS - 1 && th_now() < give_up) {
        waiting = th_metric(svc.port, "rowlock_http_long_polls_waiting");
        usleep(20000);
    }
    struct prober pr = {.port = svc.port, .path = "/topics/few_workers/keys/other/head"};
    pthread_t prober;
    assert_int_equal(pthread_create(&prober, NULL, probe, &pr), 0);
    give_up = th_now() + 10;
    while (atomic_load(&pr.answered) < 20 && th_now() < give_up)
        usleep(20000);
    int answered = atomic_load(&pr.answered); /* all of them with the hot key's row locked */
    PQclear(th_sql(holder, "COMMIT"));
    PQfinish(holder);
    patchers_join(p, t);
    atomic_store(&pr.stop, 1);
    pthread_join(prober, NULL);
    double queued = gate_waits(svc.port, "few_workers");
    fprintf(stderr,
            "2 workers, the hot key locked: %.0f writes suspended, %d reads of another key "
            "answered, %.0f PATCHes queued in the process\n",
            waiting, answered, queued);
    assert_int_equal(th_service_stop(&svc), 0);
    assert_int_equal(atomic_load(&pr.unexpected), 0);
    assert_true(waiting >= THREADS - 1);
    assert_true(answered >= 20);
    assert_true(queued > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_writer_a_key_never_waits_on_the_lock),
        cmocka_unit_test(without_the_gate_writers_wait_on_the_lock),
        cmocka_unit_test(queued_writes_hold_no_handler_thread),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
