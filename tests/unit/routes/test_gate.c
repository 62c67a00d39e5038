/* service/gate.c: a slot takes at most the gate's limit of holders (threads racing for places
 * never exceed it, and do reach it), a place given back can be taken again, a forced entry goes
 * past the limit, slots are independent, the same key always maps to the same slot, giving a
 * place back says whether a refused caller waits for it, and a gate of limit 0 or a NULL gate
 * lets everyone in. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "routes/gate.h"

#define THREADS 8
#define ROUNDS  300

struct race {
    struct svc_gate *gate;
    unsigned slot;
    atomic_int inside, most, refused;
};

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void *racer(void *arg)
{
    struct race *r = arg;
    for (int i = 0; i < ROUNDS; i++) {
        int retry = 0;
        while (!svc_gate_try_enter(r->gate, r->slot, 0, retry)) {
            atomic_fetch_add(&r->refused, 1);
            retry = 1;
            pause_us(5);
        }
        int now = atomic_fetch_add(&r->inside, 1) + 1;
        int most = atomic_load(&r->most);
        while (now > most && !atomic_compare_exchange_weak(&r->most, &most, now))
            ;
        pause_us(20);
        atomic_fetch_sub(&r->inside, 1);
        svc_gate_exit(r->gate, r->slot);
    }
    return NULL;
}

/* THREADS threads take and give back places of one slot; the most inside at once. */
static int race(int limit, int *refused)
{
    struct race r = {svc_gate_new(limit), svc_gate_slot("topic", "hot"), 0, 0, 0};
    assert_non_null(r.gate);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, racer, &r), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    svc_gate_free(r.gate);
    *refused = atomic_load(&r.refused);
    return atomic_load(&r.most);
}

static void a_slot_never_has_more_holders_than_the_limit(void **state)
{
    (void)state;
    int refused = 0;
    assert_int_equal(race(1, &refused), 1);
    assert_true(refused > 0);
    assert_int_equal(race(2, &refused), 2);
    assert_true(refused > 0);
}

static void limit_zero_lets_everyone_in(void **state)
{
    (void)state;
    int refused = 0;
    assert_true(race(0, &refused) > 2);
    assert_int_equal(refused, 0);
}

static void places_are_given_back_forced_past_and_waited_for(void **state)
{
    (void)state;
    struct svc_gate *g = svc_gate_new(1);
    unsigned hot = svc_gate_slot("topic", "hot"), cold = svc_gate_slot("topic", "cold");
    assert_int_equal(svc_gate_slot("topic", "hot"), hot);
    assert_true(hot != cold);
    assert_int_equal(svc_gate_try_enter(g, hot, 0, 0), 1);
    assert_int_equal(svc_gate_try_enter(g, cold, 0, 0), 1); /* another slot */
    assert_int_equal(svc_gate_try_enter(g, hot, 1, 0), 1);  /* forced: two inside */
    assert_int_equal(svc_gate_exit(g, hot), 0);             /* nobody was refused */
    assert_int_equal(svc_gate_try_enter(g, hot, 0, 0), 0);  /* still one inside: refused */
    assert_int_equal(svc_gate_try_enter(g, hot, 0, 1), 0);  /* and again, counted once */
    assert_int_equal(svc_gate_exit(g, hot), 1);             /* someone waits for this place */
    assert_int_equal(svc_gate_try_enter(g, hot, 0, 1), 1);  /* the waiter takes it */
    assert_int_equal(svc_gate_exit(g, hot), 0);             /* and nobody waits any more */
    assert_int_equal(svc_gate_exit(g, cold), 0);
    svc_gate_free(g);
}

static void a_null_gate_lets_everyone_in(void **state)
{
    (void)state;
    unsigned slot = svc_gate_slot("topic", "hot");
    for (int i = 0; i < 3; i++)
        assert_int_equal(svc_gate_try_enter(NULL, slot, 0, 0), 1);
    assert_int_equal(svc_gate_exit(NULL, slot), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_slot_never_has_more_holders_than_the_limit),
        cmocka_unit_test(limit_zero_lets_everyone_in),
        cmocka_unit_test(places_are_given_back_forced_past_and_waited_for),
        cmocka_unit_test(a_null_gate_lets_everyone_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
