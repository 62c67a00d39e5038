/* db/combine.c, with a run function standing in for the database: threads racing calls on two
 * queues of two pools get each call run exactly once and answered by the batch that ran it; a
 * batch holds calls of one key only, at most max_batch of them and, beyond its leader, no more
 * weight than max_weight; no more batches of one key run at once than per_key (with 2, a caller
 * already in a running batch never leads another) while batches of different keys do; calls that
 * arrive while their key runs are combined (fewer batches than calls); a caller alone runs alone.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "db/combine.h"

#define THREADS 8
#define CALLS   200
#define KEYS    4 /* two queues on each of two pools */

static struct db_combiner *cb;
static atomic_int running[KEYS], most_same, most_any;
static atomic_int bad_batches, runs_total;
static int pools[2]; /* their addresses stand in for two pools */
static const char *queues[2] = {"a", "b"};

struct call {
    int key, thread, seq;
    int runs;      /* times a batch ran this call: written by the batch's runner */
    int batch_of;  /* the size of that batch */
    int leader_id; /* thread*CALLS+seq of the batch's leader */
};

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

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
    int now = 0;
    for (int k = 0; k < KEYS; k++)
        now += atomic_load(&running[k]);
    raise_to(&most_any, now);
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
    pause_us(300); /* a transaction's time, for others to arrive */
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
    atomic_store(&most_any, 0);
    atomic_store(&bad_batches, 0);
    atomic_store(&runs_total, 0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&bad_batches), 0);
    assert_true(atomic_load(&most_any) > 1); /* other keys' batches do run meanwhile */
    unsigned long long ncalls, nbatches;
    db_combine_counts(cb, &ncalls, &nbatches);
    assert_int_equal(ncalls, THREADS * CALLS);
    assert_int_equal(nbatches, (unsigned long long)atomic_load(&runs_total));
    assert_true(nbatches < ncalls); /* calls were combined */
    int combined = 0;
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < CALLS; j++) {
            assert_int_equal(calls[i][j].runs, 1);
            combined += calls[i][j].batch_of > 1;
        }
    assert_true(combined > 0);
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
 * not lead another while it waits for its answer. */
static void two_batches_of_a_key_at_once(void **state)
{
    (void)state;
    assert_in_range(race(2), 1, 2);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
