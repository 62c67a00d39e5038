/* service/gate.c: a key's gate lets at most its limit of holders in at once (threads racing
 * through it never exceed the limit, and do reach it), holders of other keys are not held up,
 * a gate of limit 0 or a NULL gate lets everyone in, and a waiter says it waited. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

#include "service/gate.h"

#define THREADS 8
#define ROUNDS  200

struct race {
    struct svc_gate *gate;
    atomic_int inside, most, waited;
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
        int waited = 0;
        unsigned t = svc_gate_enter(r->gate, "topic", "hot", &waited);
        int now = atomic_fetch_add(&r->inside, 1) + 1;
        int most = atomic_load(&r->most);
        while (now > most && !atomic_compare_exchange_weak(&r->most, &most, now))
            ;
        atomic_fetch_add(&r->waited, waited);
        pause_us(20);
        atomic_fetch_sub(&r->inside, 1);
        svc_gate_exit(r->gate, t);
    }
    return NULL;
}

static int race(int limit, int *waited)
{
    struct race r = {svc_gate_new(limit), 0, 0, 0};
    assert_non_null(r.gate);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, racer, &r), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    svc_gate_free(r.gate);
    *waited = atomic_load(&r.waited);
    return atomic_load(&r.most);
}

static void a_key_never_has_more_holders_than_its_limit(void **state)
{
    (void)state;
    int waited = 0;
    assert_int_equal(race(1, &waited), 1);
    assert_true(waited > 0);
    assert_int_equal(race(2, &waited), 2);
    assert_true(waited > 0);
}

static void limit_zero_lets_everyone_in(void **state)
{
    (void)state;
    int waited = 0;
    assert_true(race(0, &waited) > 2);
    assert_int_equal(waited, 0);
}

struct other {
    struct svc_gate *gate;
    atomic_int done;
};

static void *enter_other_key(void *arg)
{
    struct other *o = arg;
    int waited = 1;
    unsigned t = svc_gate_enter(o->gate, "topic", "cold", &waited);
    svc_gate_exit(o->gate, t);
    atomic_store(&o->done, waited ? 2 : 1);
    return NULL;
}

static void other_keys_are_not_held_up(void **state)
{
    (void)state;
    struct other o = {svc_gate_new(1), 0};
    unsigned held = svc_gate_enter(o.gate, "topic", "hot", NULL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, enter_other_key, &o), 0);
    for (int i = 0; i < 2000 && atomic_load(&o.done) == 0; i++)
        pause_us(500);
    assert_int_equal(atomic_load(&o.done), 1); /* through, without waiting, while hot is held */
    pthread_join(t, NULL);
    svc_gate_exit(o.gate, held);
    svc_gate_free(o.gate);
}

static void a_null_gate_lets_everyone_in(void **state)
{
    (void)state;
    int waited = 1;
    unsigned t = svc_gate_enter(NULL, "topic", "hot", &waited);
    assert_int_equal(waited, 0);
    svc_gate_exit(NULL, t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_key_never_has_more_holders_than_its_limit),
        cmocka_unit_test(limit_zero_lets_everyone_in),
        cmocka_unit_test(other_keys_are_not_held_up),
        cmocka_unit_test(a_null_gate_lets_everyone_in),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
