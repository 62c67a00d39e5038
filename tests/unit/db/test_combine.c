/* db/combine.c, with a run function standing in for the database: threads racing calls on two
 * queues of two pools get each call run exactly once and answered by the batch that ran it; a
 * batch holds calls of one key only, at most max_batch of them and, beyond its leader, no more
 * weight than max_weight; two batches of one key never run at once while batches of different
 * keys do; calls that arrive while their key runs are combined (fewer batches than calls); a
 * caller alone runs alone. */
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

static struct db_combiner cb = DB_COMBINER_INIT(10, 4);
static atomic_int running[KEYS], overlap_same, most_any;
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

static int key_of(const struct db_pool *pool, const char *queue)
{
    return (pool == (const struct db_pool *)&pools[1]) * 2 + (strcmp(queue, "b") == 0);
}

static void run(struct db_pool *pool, struct db_combine_req **batch, size_t n)
{
    int key = key_of(pool, batch[0]->queue);
    if (atomic_fetch_add(&running[key], 1) != 0)
        atomic_fetch_add(&overlap_same, 1);
    int now = 0;
    for (int k = 0; k < KEYS; k++)
        now += atomic_load(&running[k]);
    int most = atomic_load(&most_any);
    while (now > most && !atomic_compare_exchange_weak(&most_any, &most, now))
        ;
    size_t weight = 0;
    for (size_t i = 0; i < n; i++)
        weight += batch[i]->weight;
    /* a caller heavier than max_weight runs, alone */
    if (n == 0 || n > cb.max_batch || (n > 1 && weight > cb.max_weight))
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
        db_combine(&cb, (struct db_pool *)&pools[c->key / 2], &req, run);
        if (c->runs != 1 || key_of(req.pool, req.queue) != c->key)
            atomic_fetch_add(&bad_batches, 1);
    }
    return NULL;
}

static void racing_calls_are_each_run_once_in_batches_of_one_key(void **state)
{
    (void)state;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, caller, (void *)(intptr_t)i), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&bad_batches), 0);
    assert_int_equal(atomic_load(&overlap_same), 0);
    assert_true(atomic_load(&most_any) > 1); /* other keys' batches do run meanwhile */
    unsigned long long ncalls, nbatches;
    db_combine_counts(&cb, &ncalls, &nbatches);
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
    assert_null(cb.head); /* nobody left waiting */
}

static void alone_runs_alone(void **state)
{
    (void)state;
    struct db_combiner one = DB_COMBINER_INIT(10, 4);
    struct call c = {0, 0, 0, 0, 0, 0};
    struct db_combine_req req = {.queue = "a", .weight = 50, .arg = &c};
    db_combine(&one, (struct db_pool *)&pools[0], &req, run);
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
        cmocka_unit_test(alone_runs_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
