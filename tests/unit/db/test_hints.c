/* Unit tests of db/hints.c: a hint is found by its exact name only; setting 0 forgets it; a
 * name longer than DB_HINT_NAME_MAX is never remembered; names that share a set keep their hints
 * side by side until the set is full, then one is pushed out and loses only its hint; ten
 * thousand resources keep their hints (with the former 256 hashed slots, most did not). */
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
    db_hint_clear(&hints);
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
    assert_int_equal(db_hint_count(&hints), 0); /* nor kept cut down to what fits */
    db_hint_set(&hints, fits, 7);
    assert_int_equal(db_hint_get(&hints, fits), 7);
    db_hint_set(&hints, too_long, 8);
    assert_int_equal(db_hint_get(&hints, too_long), 0);
    assert_int_equal(db_hint_get(&hints, fits), 7); /* not cut down to the name that fits */
}

/* n names of the set "a" belongs to. */
static void names_of_set(char names[][16], int n)
{
    size_t want = db_hint_set_of("a");
    for (int i = 0, found = 0; found < n; i++) {
        snprintf(names[found], 16, "n%d", i);
        found += db_hint_set_of(names[found]) == want;
    }
}

/* A set holds DB_HINT_WAYS names side by side; one more pushes out the one filled first, which
 * loses only its hint; forgetting a name frees its way for another. */
static void test_full_set_loses_only_one_hint(void **state)
{
    char n[DB_HINT_WAYS][16];
    names_of_set(n, DB_HINT_WAYS);
    db_hint_set(&hints, "a", 1);
    for (int i = 0; i < DB_HINT_WAYS - 1; i++)
        db_hint_set(&hints, n[i], 10 + i);
    assert_int_equal(db_hint_get(&hints, "a"), 1);
    for (int i = 0; i < DB_HINT_WAYS - 1; i++)
        assert_int_equal(db_hint_get(&hints, n[i]), 10 + i);
    db_hint_set(&hints, n[DB_HINT_WAYS - 1], 99); /* the set is full: "a" goes */
    assert_int_equal(db_hint_get(&hints, "a"), 0);
    for (int i = 0; i < DB_HINT_WAYS - 1; i++)
        assert_int_equal(db_hint_get(&hints, n[i]), 10 + i);
    assert_int_equal(db_hint_get(&hints, n[DB_HINT_WAYS - 1]), 99);
    db_hint_set(&hints, "a", 0); /* forgetting a, whose hint is gone, leaves the others */
    assert_int_equal(db_hint_count(&hints), DB_HINT_WAYS);
    db_hint_set(&hints, n[0], 0); /* a way freed: "a" comes back without pushing anyone out */
    db_hint_set(&hints, "a", 1);
    assert_int_equal(db_hint_get(&hints, "a"), 1);
    for (int i = 1; i < DB_HINT_WAYS; i++)
        assert_true(db_hint_get(&hints, n[i]) != 0);
}

/* Ten thousand topics and a thousand queues' names (as the bench names them) keep their hints:
 * all but a few pushed out of full sets (256 hashed slots kept at most 256 of them). */
static void test_ten_thousand_resources(void **state)
{
    static char names[11000][24];
    for (int i = 0; i < 11000; i++) {
        snprintf(names[i], sizeof(names[i]), i < 10000 ? "topic-%d" : "queue-%d", i);
        db_hint_set(&hints, names[i], i + 1);
    }
    int kept = 0;
    for (int i = 0; i < 11000; i++) {
        int64_t id = db_hint_get(&hints, names[i]);
        assert_true(id == 0 || id == i + 1);
        kept += id != 0;
    }
    print_message("kept %d of 11000\n", kept);
    assert_int_equal((size_t)kept, db_hint_count(&hints));
    assert_true(kept >= 10990);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_get_forget, setup),
        cmocka_unit_test_setup(test_name_length_edge, setup),
        cmocka_unit_test_setup(test_full_set_loses_only_one_hint, setup),
        cmocka_unit_test_setup(test_ten_thousand_resources, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
