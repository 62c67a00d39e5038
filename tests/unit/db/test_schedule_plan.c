/* db_schedule_plan (db/schedules.c): which of a schedule's due ticks a firing pass fires, given
 * the time now. Ticks within the grace fire; older ones are misfires, skipped under "skip" and,
 * under "catch_up", fired when among the catch_up_max newest (the older skipped); ticks fire
 * oldest first, never one after now; at most DB_SCHEDULE_FIRES_MAX fires and
 * DB_SCHEDULE_WALK_MAX ticks walked in one plan, the rest left due; an expression that fires no
 * more leaves no next tick. Zones come from the system's database (UTC here: the daylight-saving
 * cases are db/cron.c's tests and the integration test's). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "db/schedules.h"

static struct db_tz *utc;
static struct db_schedule_plan plan; /* large: not on the stack */

static int setup(void **state)
{
    (void)state;
    char err[DB_TZ_ERROR_SIZE];
    utc = db_tz_load("UTC", err, sizeof(err));
    return utc != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    db_tz_free(utc);
    return 0;
}

static struct db_cron cron(const char *text)
{
    struct db_cron c;
    char err[DB_CRON_ERROR_SIZE];
    assert_int_equal(db_cron_parse(text, &c, err, sizeof(err)), 0);
    return c;
}

/* 2026-06-01T12:00:00Z, the "now" of most cases: a whole second */
#define NOW ((int64_t)1780315200)

static void run(const char *expr, int64_t due, double now, enum db_misfire m, int cap, int grace)
{
    struct db_cron c = cron(expr);
    db_schedule_plan(&c, utc, due, now, m, cap, grace, &plan);
}

/* The fires are consecutive per-second ticks from first to last. */
static void assert_seconds(int64_t first, int64_t last)
{
    assert_int_equal(plan.nfires, last - first + 1);
    for (int i = 0; i < plan.nfires; i++)
        assert_int_equal(plan.fires[i], first + i);
}

static void on_time_ticks_all_fire_up_to_now(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 5, (double)NOW + 0.25, DB_MISFIRE_SKIP, 10, 60);
    assert_seconds(NOW - 5, NOW);
    assert_int_equal(plan.misfires, 0);
    assert_int_equal(plan.skipped, 0);
    assert_int_equal(plan.next, NOW + 1); /* the first tick after now, not yet due */
}

static void nothing_is_due_before_its_tick(void **state)
{
    (void)state;
    run("* * * * * *", NOW + 1, (double)NOW + 0.999, DB_MISFIRE_CATCH_UP, 10, 60);
    assert_int_equal(plan.nfires, 0);
    assert_int_equal(plan.next, NOW + 1);
    run("* * * * *", NOW + 60, (double)NOW + 59.5, DB_MISFIRE_SKIP, 10, 60);
    assert_int_equal(plan.nfires, 0);
    assert_int_equal(plan.next, NOW + 60);
}

/* 100 ticks behind, a grace of 10 s: ticks NOW-100 .. NOW-11 are misfires, NOW-10 .. NOW are on
 * time. */
static void skip_drops_every_misfire(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 100, (double)NOW, DB_MISFIRE_SKIP, 10, 10);
    assert_seconds(NOW - 10, NOW);
    assert_int_equal(plan.misfires, 90);
    assert_int_equal(plan.skipped, 90);
    assert_int_equal(plan.next, NOW + 1);
}

static void catch_up_fires_the_newest_misfires_first_in_order(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 100, (double)NOW, DB_MISFIRE_CATCH_UP, 10, 10);
    /* the 10 newest misfires, then the on-time ticks: oldest first throughout */
    assert_seconds(NOW - 20, NOW);
    assert_int_equal(plan.misfires, 90);
    assert_int_equal(plan.skipped, 80);
    assert_int_equal(plan.next, NOW + 1);
    /* a bound above the misfires: every one fires */
    run("* * * * * *", NOW - 100, (double)NOW, DB_MISFIRE_CATCH_UP, 1000, 10);
    assert_seconds(NOW - 100, NOW);
    assert_int_equal(plan.misfires, 90);
    assert_int_equal(plan.skipped, 0);
    /* catch_up_max 1: the newest misfire alone */
    run("*/10 * * * * *", NOW - 100, (double)NOW, DB_MISFIRE_CATCH_UP, 1, 10);
    assert_int_equal(plan.nfires, 3);
    assert_int_equal(plan.fires[0], NOW - 20);
    assert_int_equal(plan.fires[1], NOW - 10);
    assert_int_equal(plan.fires[2], NOW);
    assert_int_equal(plan.misfires, 9); /* NOW-100 .. NOW-20 */
    assert_int_equal(plan.skipped, 8);
}

/* A tick exactly grace seconds old is on time; one a moment older is a misfire. */
static void grace_boundary(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 61, (double)NOW, DB_MISFIRE_SKIP, 10, 60);
    assert_seconds(NOW - 60, NOW);
    assert_int_equal(plan.misfires, 1);
    assert_int_equal(plan.skipped, 1);
    run("* * * * * *", NOW - 60, (double)NOW + 0.001, DB_MISFIRE_SKIP, 10, 60);
    assert_seconds(NOW - 59, NOW);
    assert_int_equal(plan.misfires, 1); /* 60.001 s old */
    run("0 * * * *", NOW - 3600, (double)NOW, DB_MISFIRE_SKIP, 10, 3600);
    assert_int_equal(plan.nfires, 2);
    assert_int_equal(plan.misfires, 0);
    run("0 * * * *", NOW - 3600, (double)NOW + 0.5, DB_MISFIRE_SKIP, 10, 3600);
    assert_int_equal(plan.nfires, 1);
    assert_int_equal(plan.fires[0], NOW);
    assert_int_equal(plan.misfires, 1);
}

/* 1,500 on-time ticks behind: 1,000 fire, the next tick is the 1,001st, still due. */
static void fires_cap_leaves_the_rest_due(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 1500, (double)NOW, DB_MISFIRE_SKIP, 10, 86400);
    assert_seconds(NOW - 1500, NOW - 1500 + DB_SCHEDULE_FIRES_MAX - 1);
    assert_int_equal(plan.next, NOW - 1500 + DB_SCHEDULE_FIRES_MAX);
    assert_true(plan.next <= NOW);
    assert_int_equal(plan.misfires, 0);
    assert_int_equal(plan.skipped, 0);
    /* the next pass goes on from there and catches up */
    run("* * * * * *", plan.next, (double)NOW, DB_MISFIRE_SKIP, 10, 86400);
    assert_seconds(NOW - 500, NOW);
    assert_int_equal(plan.next, NOW + 1);
}

/* Misfires fill the 1,000 fires of a plan (catch_up_max 1000): the on-time ticks after them
 * are left due for the next pass, never dropped. */
static void fires_cap_with_catch_up_keeps_on_time_ticks_due(void **state)
{
    (void)state;
    run("* * * * * *", NOW - 5000, (double)NOW, DB_MISFIRE_CATCH_UP, 1000, 1);
    assert_seconds(NOW - 1001, NOW - 2); /* the 1,000 newest misfires */
    assert_int_equal(plan.misfires, 4999);
    assert_int_equal(plan.skipped, 3999);
    assert_int_equal(plan.next, NOW - 1);
    run("* * * * * *", plan.next, (double)NOW, DB_MISFIRE_CATCH_UP, 1000, 1);
    assert_seconds(NOW - 1, NOW);
    assert_int_equal(plan.misfires, 0);
}

/* After a long outage a skipping schedule walks at most DB_SCHEDULE_WALK_MAX ticks in one plan
 * and goes on from the first it did not walk. */
static void walk_cap_leaves_the_rest_due(void **state)
{
    (void)state;
    int64_t due = NOW - 2 * DB_SCHEDULE_WALK_MAX;
    run("* * * * * *", due, (double)NOW, DB_MISFIRE_SKIP, 10, 60);
    assert_int_equal(plan.nfires, 0);
    assert_int_equal(plan.misfires, DB_SCHEDULE_WALK_MAX);
    assert_int_equal(plan.skipped, DB_SCHEDULE_WALK_MAX);
    assert_int_equal(plan.next, due + DB_SCHEDULE_WALK_MAX);
}

/* 29 February at 00:00: its last day before the end of year 9999 is 9996-02-29; a plan past
 * it fires that tick and leaves no next one. */
static void expression_that_fires_no_more(void **state)
{
    (void)state;
    struct tm tm = {.tm_year = 9996 - 1900, .tm_mon = 1, .tm_mday = 29};
    int64_t last = (int64_t)timegm(&tm);
    run("0 0 29 2 *", last, (double)last + 10, DB_MISFIRE_SKIP, 10, 60);
    assert_int_equal(plan.nfires, 1);
    assert_int_equal(plan.fires[0], last);
    assert_int_equal(plan.next, -1);
    /* the same as a misfire under catch_up */
    run("0 0 29 2 *", last, (double)last + 86400 * 400, DB_MISFIRE_CATCH_UP, 10, 60);
    assert_int_equal(plan.nfires, 1);
    assert_int_equal(plan.misfires, 1);
    assert_int_equal(plan.skipped, 0);
    assert_int_equal(plan.next, -1);
    /* and under skip: no fire, no next tick */
    run("0 0 29 2 *", last, (double)last + 86400 * 400, DB_MISFIRE_SKIP, 10, 60);
    assert_int_equal(plan.nfires, 0);
    assert_int_equal(plan.skipped, 1);
    assert_int_equal(plan.next, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(on_time_ticks_all_fire_up_to_now),
        cmocka_unit_test(nothing_is_due_before_its_tick),
        cmocka_unit_test(skip_drops_every_misfire),
        cmocka_unit_test(catch_up_fires_the_newest_misfires_first_in_order),
        cmocka_unit_test(grace_boundary),
        cmocka_unit_test(fires_cap_leaves_the_rest_due),
        cmocka_unit_test(fires_cap_with_catch_up_keeps_on_time_ticks_due),
        cmocka_unit_test(walk_cap_leaves_the_rest_due),
        cmocka_unit_test(expression_that_fires_no_more),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
