/* Unit tests of db/hints.c: a hint is found by its exact name only; setting 0 forgets it; a
 * name too long for a slot (129 bytes with its NUL) is never remembered; two names that share a
 * slot only lose each other's hint (the later one wins, forgetting one leaves the other's alone).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "db/hints.h"

static struct db_hints hints = DB_HINTS_INIT;

static int setup(void **state)
{
    memset(hints.slot, 0, sizeof(hints.slot));
    return 0;
}

static void test_set_get_forget(void **state)
{
    assert_int_equal(db_hint_get(&hints, "orders"), 0);
    db_hint_set(&hints, "orders", 42);
    assert_int_equal(db_hint_get(&hints, "orders"), 42);
    assert_int_equal(db_hint_get(&hints, "order"), 0);
    assert_int_equal(db_hint_get(&hints, "orders2"), 0);
    db_hint_set(&hints, "orders", INT64_MAX);
    assert_true(db_hint_get(&hints, "orders") == INT64_MAX);
    db_hint_set(&hints, "orders", 0);
    assert_int_equal(db_hint_get(&hints, "orders"), 0);
    db_hint_set(&hints, "", 5); /* the empty name is a name like any other */
    assert_int_equal(db_hint_get(&hints, ""), 5);
}

static void test_name_length_edge(void **state)
{
    char fits[129], too_long[130];
    memset(fits, 'n', 128);
    fits[128] = '\0';
    memset(too_long, 'n', 129);
    too_long[129] = '\0';
    db_hint_set(&hints, too_long, 8);
    assert_int_equal(db_hint_get(&hints, too_long), 0);
    for (int i = 0; i < DB_HINT_SLOTS; i++) /* nor kept cut down to what fits, in any slot */
        if (hints.slot[i].name[0] != '\0' || hints.slot[i].id != 0)
            fail_msg("slot %d holds %.20s... = %lld", i, hints.slot[i].name,
                     (long long)hints.slot[i].id);
    db_hint_set(&hints, fits, 7);
    assert_int_equal(db_hint_get(&hints, fits), 7);
    db_hint_set(&hints, too_long, 8);
    assert_int_equal(db_hint_get(&hints, too_long), 0);
    assert_int_equal(db_hint_get(&hints, fits), 7); /* not cut down to the name that fits */
}

/* Two names of one slot: found by trying names until one lands where "a" does. */
static void colliding_names(char *a, char *b, size_t size)
{
    snprintf(a, size, "a");
    db_hint_set(&hints, a, 1);
    for (int i = 0; i < 100000; i++) {
        snprintf(b, size, "n%d", i);
        db_hint_set(&hints, b, 2);
        if (db_hint_get(&hints, a) == 0) /* b took a's slot */
            return;
        db_hint_set(&hints, b, 0);
    }
    fail_msg("no name shares a slot with \"a\"");
}

static void test_collision_loses_only_the_hint(void **state)
{
    char a[32], b[32];
    colliding_names(a, b, sizeof(a));
    assert_int_equal(db_hint_get(&hints, b), 2);
    assert_int_equal(db_hint_get(&hints, a), 0);
    db_hint_set(&hints, a, 0); /* forgetting a, whose hint is gone, leaves b's */
    assert_int_equal(db_hint_get(&hints, b), 2);
    db_hint_set(&hints, a, 1);
    assert_int_equal(db_hint_get(&hints, a), 1);
    assert_int_equal(db_hint_get(&hints, b), 0);
}

/* Every slot holds its own name: DB_HINT_SLOTS names that each land in a different slot keep
 * their ids side by side. */
static void test_slots_side_by_side(void **state)
{
    static char names[400][16];
    int kept = 0;
    for (int i = 0; i < 400; i++) {
        snprintf(names[i], sizeof(names[i]), "topic-%d", i);
        db_hint_set(&hints, names[i], i + 1);
    }
    for (int i = 0; i < 400; i++) {
        int64_t id = db_hint_get(&hints, names[i]);
        assert_true(id == 0 || id == i + 1);
        kept += id != 0;
    }
    assert_in_range(kept, 100, DB_HINT_SLOTS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_get_forget, setup),
        cmocka_unit_test_setup(test_name_length_edge, setup),
        cmocka_unit_test_setup(test_collision_loses_only_the_hint, setup),
        cmocka_unit_test_setup(test_slots_side_by_side, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
