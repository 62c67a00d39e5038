/* db/combine.c, with run functions standing in for the database.
 *
 * Deterministic tests order the callers explicitly: a run function held at a gate until the test
 * opens it, and each caller started only once the one before it is waiting (seen on the
 * combiner's list), so what each asserts does not depend on scheduling: callers that arrive
 * while their key runs are combined, oldest first, into batches of at most max_batch callers
 * that end at the first caller that would take them past max_weight; batches of other keys run
 * meanwhile; no more batches of one key run at once than per_key; a caller alone runs alone.
 *
 * A race of threads making calls on two queues of two pools then checks what must hold under
 * any schedule: each call run exactly once and answered by the batch that ran it, a batch of one
 * key, within max_batch and max_weight, no more batches of one key at once than per_key, and
 * nobody left waiting. */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "db/combine.h"

#define THREADS 8
#define CALLS   200
#define KEYS    4 /* two queues on each of two pools */

static struct db_combiner *cb;
static atomic_int running[KEYS], most_same;
static atomic_int bad_batches, runs_total;
static int pools[2]; /* their addresses stand in for two pools */
static const char *queues[2] = {"a", "b"};

struct call {
    int key, thread, seq;
    int runs;      /* times a batch ran this call: written by the batch's runner */
    int batch_of;  /* the size of that batch */
    int leader_id; /* thread*CALLS+seq of the batch's leader */
};

static void raise_to(atomic_int *most, int now)
{
    int m = atomic_load(most);
    while (now > m && !atomic_compare_exchange_weak(most, &m, now))
        ;
}

static int key_of(const struct db_pool *pool, const char *queue)
{
    return (pool == (const struct db_pool *)&pools[1]) * 2 + (strcmp(queue, "b") == 0);
}

static void run(struct db_pool *pool, struct db_combine_req **batch, size_t n)
{
    int key = key_of(pool, batch[0]->queue);
    raise_to(&most_same, atomic_fetch_add(&running[key], 1) + 1);
    size_t weight = 0;
    for (size_t i = 0; i < n; i++)
        weight += batch[i]->weight;
    /* a caller heavier than max_weight runs, alone */
    if (n == 0 || n > cb->max_batch || (n > 1 && weight > cb->max_weight))
        atomic_fetch_add(&bad_batches, 1);
    const struct call *lead = batch[0]->arg;
    for (size_t i = 0; i < n; i++) {
        struct call *c = batch[i]->arg;
        if (batch[i]->pool != pool || strcmp(batch[i]->queue, batch[0]->queue) != 0)
            atomic_fetch_add(&bad_batches, 1);
        c->runs++;
        c->batch_of = (int)n;
        c->leader_id = lead->thread * CALLS + lead->seq;
    }
    atomic_fetch_add(&runs_total, 1);
    sched_yield(); /* a transaction's time, for others to arrive (no assertion relies on it) */
    atomic_fetch_sub(&running[key], 1);
}

static struct call calls[THREADS][CALLS];

static void *caller(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < CALLS; i++) {
        struct call *c = &calls[t][i];
        c->key = (t + i) % KEYS;
        c->thread = t;
        c->seq = i;
        struct db_combine_req req = {
            .queue = queues[c->key % 2], .weight = (size_t)(1 + (t + i) % 4), .arg = c};
        db_combine(cb, (struct db_pool *)&pools[c->key / 2], &req, run);
        if (c->runs != 1 || key_of(req.pool, req.queue) != c->key)
            atomic_fetch_add(&bad_batches, 1);
    }
    return NULL;
}

/* THREADS threads make CALLS calls each through a combiner of per_key; checks what every race
 * must show and returns the most batches of one key that ran at once. */
static int race(size_t per_key)
{
    struct db_combiner c = DB_COMBINER_INIT(per_key, 10, 4);
    cb = &c;
    memset(calls, 0, sizeof(calls));
    atomic_store(&most_same, 0);
    atomic_store(&bad_batches, 0);
    atomic_store(&runs_total, 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&bad_batches), 0);
    unsigned long long ncalls, nbatches;
    db_combine_counts(cb, &ncalls, &nbatches);
    assert_int_equal(ncalls, THREADS * CALLS);
    assert_int_equal(nbatches, (unsigned long long)atomic_load(&runs_total));
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < CALLS; j++)
            assert_int_equal(calls[i][j].runs, 1);
    assert_null(cb->head); /* nobody left waiting */
    cb = NULL;
    return atomic_load(&most_same);
}

static void racing_calls_are_each_run_once_in_batches_of_one_key(void **state)
{
    (void)state;
    assert_int_equal(race(1), 1); /* one batch of a key at a time */
}

/* With two batches of a key allowed at once, a caller already taken into a running batch must
 * not lead another while it waits for its answer (it would be run twice). */
static void two_batches_of_a_key_at_once(void **state)
{
    (void)state;
    assert_in_range(race(2), 1, 2);
}

/* ---- explicit ordering: a run function held at a gate per key ---- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open[KEYS], in_run[KEYS], most_in_run;

#define MAX_LOGGED 16
static int logged_batches, logged[MAX_LOGGED][DB_COMBINE_BATCH_MAX + 1]; /* ids, then -1 */

struct gated {
    int id, key;
    size_t weight;
    struct call c;
    int done; /* db_combine returned: under gate_mu */
    pthread_t thread;
};

/* Logs the batch (caller ids in order), then holds it until its key's gate opens. */
static void gated_run(struct db_pool *pool, struct db_combine_req **batch, size_t n)
{
    int key = key_of(pool, batch[0]->queue);
    pthread_mutex_lock(&gate_mu);
    assert_true(logged_batches < MAX_LOGGED);
    for (size_t i = 0; i < n; i++) {
        struct gated *g = batch[i]->arg;
        logged[logged_batches][i] = g->id;
        g->c.runs++;
        g->c.batch_of = (int)n;
    }
    logged[logged_batches++][n] = -1;
    in_run[key]++;
    int total = 0;
    for (int k = 0; k < KEYS; k++)
        total += in_run[k];
    most_in_run = total > most_in_run ? total : most_in_run;
    pthread_cond_broadcast(&gate_cond);
    while (!gate_open[key])
        pthread_cond_wait(&gate_cond, &gate_mu);
    in_run[key]--;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_mu);
}

static void *gated_caller(void *arg)
{
    struct gated *g = arg;
    struct db_combine_req req = {.queue = queues[g->key % 2], .weight = g->weight, .arg = g};
    db_combine(cb, (struct db_pool *)&pools[g->key / 2], &req, gated_run);
    pthread_mutex_lock(&gate_mu);
    g->done = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_mu);
    return NULL;
}

/* The waits below take however long the scheduler needs; one that has not happened after this
 * long never will (the combiner broke): the test stops there, callers still held. */
#define STUCK_S 10

static void stuck(const char *what)
{
    print_error("stuck for %d s waiting until %s\n", STUCK_S, what);
    exit(EXIT_FAILURE);
}

static struct timespec stuck_at(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STUCK_S;
    return until;
}

/* Waits until key has `batches` batches in gated_run. */
static void wait_in_run(int key, int batches)
{
    struct timespec until = stuck_at();
    pthread_mutex_lock(&gate_mu);
    while (in_run[key] != batches)
        if (pthread_cond_timedwait(&gate_cond, &gate_mu, &until) != 0 && in_run[key] != batches)
            stuck("a batch runs");
    pthread_mutex_unlock(&gate_mu);
}

/* Waits until g's call has returned, and joins its thread. */
static void wait_done(struct gated *g)
{
    struct timespec until = stuck_at();
    pthread_mutex_lock(&gate_mu);
    while (!g->done)
        if (pthread_cond_timedwait(&gate_cond, &gate_mu, &until) != 0 && !g->done)
            stuck("a call returns");
    pthread_mutex_unlock(&gate_mu);
    pthread_join(g->thread, NULL);
}

/* Waits until `waiting` callers are on the combiner's waiting list. */
static void wait_waiting(size_t waiting)
{
    time_t until = time(NULL) + STUCK_S;
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&cb->mutex);
        for (const struct db_combine_req *r = cb->head; r != NULL; r = r->next)
            n++;
        pthread_mutex_unlock(&cb->mutex);
        if (n == waiting)
            return;
        if (n > waiting || time(NULL) > until)
            stuck("callers wait");
        sched_yield();
    }
}

static void start(struct gated *g)
{
    assert_int_equal(pthread_create(&g->thread, NULL, gated_caller, g), 0);
}

static void open_gate(int key)
{
    pthread_mutex_lock(&gate_mu);
    gate_open[key] = 1;
    pthread_cond_broadcast(&gate_cond);
    pthread_mutex_unlock(&gate_mu);
}

static int gated_setup(void **state)
{
    memset(gate_open, 0, sizeof(gate_open));
    memset(in_run, 0, sizeof(in_run));
    most_in_run = 0;
    logged_batches = 0;
    return 0;
}

/* Asserts the logged batches, each a list of ids ended by -1, the whole ended by -2. */
static void assert_batches(const int *want)
{
    int b = 0;
    for (; *want != -2; b++) {
        assert_true(b < logged_batches);
        for (int i = 0;; i++, want++) {
            if (logged[b][i] != *want)
                fail_msg("batch %d, place %d: caller %d, expected %d", b, i, logged[b][i], *want);
            if (*want == -1)
                break;
        }
        want++;
    }
    assert_int_equal(logged_batches, b);
}

/* Caller 0 of key 0 runs, held; callers 1..n of key 0, with these weights, arrive one after
 * another while it runs; then the gate opens. */
static void combine_behind_one(struct db_combiner *c, const size_t *weights, int n, const int *want)
{
    cb = c;
    struct gated g[8] = {{0}};
    assert_true(n < 8);
    g[0] = (struct gated){.id = 0, .key = 0, .weight = 1};
    start(&g[0]);
    wait_in_run(0, 1);
    for (int i = 1; i <= n; i++) {
        g[i] = (struct gated){.id = i, .key = 0, .weight = weights[i - 1]};
        start(&g[i]);
        wait_waiting((size_t)i); /* on the list before the next one starts */
    }
    open_gate(0);
    for (int i = 0; i <= n; i++) {
        wait_done(&g[i]);
        assert_int_equal(g[i].c.runs, 1);
    }
    assert_batches(want);
    unsigned long long ncalls, nbatches;
    db_combine_counts(c, &ncalls, &nbatches);
    assert_int_equal(ncalls, (unsigned long long)n + 1);
    assert_int_equal(nbatches, (unsigned long long)logged_batches);
    assert_null(c->head);
    cb = NULL;
}

/* Callers that arrive while their key runs are combined, oldest first, up to max_batch. */
static void waiting_calls_are_combined_up_to_max_batch(void **state)
{
    struct db_combiner c = DB_COMBINER_INIT(1, 10, 4);
    static const size_t weights[] = {1, 1, 1, 1, 1, 1};
    static const int want[] = {0, -1, 1, 2, 3, 4, -1, 5, 6, -1, -2};
    combine_behind_one(&c, weights, 6, want);
}

/* A batch ends at the first caller that would take it past max_weight, though a later one
 * would fit: callers keep their order. A caller heavier than max_weight leads a batch alone. */
static void a_batch_ends_at_the_first_caller_past_max_weight(void **state)
{
    struct db_combiner c = DB_COMBINER_INIT(1, 10, 8);
    static const size_t weights[] = {4, 4, 3, 1, 1, 12, 1};
    static const int want[] = {0, -1, 1, 2, -1, 3, 4, 5, -1, 6, -1, 7, -1, -2};
    combine_behind_one(&c, weights, 7, want);
}

/* While a batch of key 0 is held running (per_key 1), a batch of the same pool's other queue and
 * one of the other pool run and finish, and a caller of key 0 waits for it. */
static void other_keys_run_while_a_key_runs(void **state)
{
    struct db_combiner c = DB_COMBINER_INIT(1, 10, 4);
    cb = &c;
    struct gated held = {.id = 0, .key = 0, .weight = 1}, same = {.id = 1, .key = 0, .weight = 1};
    struct gated queue_b = {.id = 2, .key = 1, .weight = 1},
                 pool_1 = {.id = 3, .key = 2, .weight = 1};
    open_gate(1);
    open_gate(2);
    start(&held);
    wait_in_run(0, 1);
    start(&same);
    wait_waiting(1);
    start(&queue_b);
    wait_done(&queue_b); /* finished while key 0 is held */
    start(&pool_1);
    wait_done(&pool_1);
    pthread_mutex_lock(&gate_mu);
    assert_int_equal(same.c.runs, 0); /* still waiting: its key runs */
    pthread_mutex_unlock(&gate_mu);
    wait_waiting(1);
    assert_int_equal(most_in_run, 2);
    open_gate(0);
    wait_done(&held);
    wait_done(&same);
    static const int want[] = {0, -1, 2, -1, 3, -1, 1, -1, -2};
    assert_batches(want);
    cb = NULL;
}

/* With per_key 2, a second batch of key 0 starts while the first is held; a third caller
 * waits for one of them to finish. */
static void per_key_batches_of_a_key_at_once(void **state)
{
    struct db_combiner c = DB_COMBINER_INIT(2, 10, 4);
    cb = &c;
    struct gated g[3] = {{.id = 0, .key = 0, .weight = 1},
                         {.id = 1, .key = 0, .weight = 1},
                         {.id = 2, .key = 0, .weight = 1}};
    start(&g[0]);
    wait_in_run(0, 1);
    start(&g[1]);
    wait_in_run(0, 2); /* both run at once */
    start(&g[2]);
    wait_waiting(1);
    pthread_mutex_lock(&gate_mu);
    assert_int_equal(in_run[0], 2); /* not a third */
    pthread_mutex_unlock(&gate_mu);
    open_gate(0);
    for (int i = 0; i < 3; i++) {
        wait_done(&g[i]);
        assert_int_equal(g[i].c.runs, 1);
    }
    static const int want[] = {0, -1, 1, -1, 2, -1, -2};
    assert_batches(want);
    cb = NULL;
}

static void alone_runs_alone(void **state)
{
    (void)state;
    struct db_combiner one = DB_COMBINER_INIT(1, 10, 4);
    cb = &one;
    struct call c = {0, 0, 0, 0, 0, 0};
    struct db_combine_req req = {.queue = "a", .weight = 50, .arg = &c};
    db_combine(&one, (struct db_pool *)&pools[0], &req, run);
    cb = NULL;
    assert_int_equal(c.runs, 1);
    assert_int_equal(c.batch_of, 1); /* heavier than max_weight, alone */
    unsigned long long ncalls, nbatches;
    db_combine_counts(&one, &ncalls, &nbatches);
    assert_int_equal(ncalls, 1);
    assert_int_equal(nbatches, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(racing_calls_are_each_run_once_in_batches_of_one_key),
        cmocka_unit_test(two_batches_of_a_key_at_once),
        cmocka_unit_test(alone_runs_alone),
        cmocka_unit_test_setup(waiting_calls_are_combined_up_to_max_batch, gated_setup),
        cmocka_unit_test_setup(a_batch_ends_at_the_first_caller_past_max_weight, gated_setup),
        cmocka_unit_test_setup(other_keys_run_while_a_key_runs, gated_setup),
        cmocka_unit_test_setup(per_key_batches_of_a_key_at_once, gated_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
