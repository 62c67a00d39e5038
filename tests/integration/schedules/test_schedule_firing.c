/* The firing pass driven directly (db_schedules_fire_due, the database's now()), with
 * schedules' next ticks moved back in SQL.
 *
 * A tick's identity: a tick already fired, handed to the pass again (a schedule row restored
 * from before its advance), makes no second job: the record of the tick (primary key schedule,
 * tick, manual) refuses it. This is the defence that stands when the row lock does not.
 *
 * Daylight saving through the firing protocol and PostgreSQL: two schedules `30 2 * * *` in
 * Europe/Berlin, their next tick moved back (in SQL) to two days before the spring-forward day
 * and two days before the fall-back day of the last year that had both, then fired by the
 * firing pass itself (db_schedules_fire_due, the database's now()) with misfire catch_up: every
 * tick from there to now is a misfire caught up, so the transitions' ticks are planned, locked,
 * enqueued and recorded as a live pass would, only later. The fires are then read with
 * PostgreSQL's own zone data: on the spring-forward day (02:30 does not exist) one fire, at
 * 03:00 CEST = 01:00 UTC; on the fall-back day (02:30 happens twice) one fire, at the first
 * 02:30 (CEST) = 00:30 UTC; every other day one fire at 02:30 local; each fire's job in the queue,
 * created at or after its tick, never before. A test cannot wait for a real transition; the
 * next fire times around them are db/cron.c's unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "db/queues.h"
#include "db/schedules.h"
#include "harness.h"
#include "harness_db.h"

static struct db_pool *pool;
static PGconn *sql;

static int setup(void **state)
{
    (void)state;
    if (th_db_open("sched_dst", 2, &pool, &sql) != 0)
        return -1;
    struct db_queue_config cfg = {3, 60, 0, 0, 3600, 0, 0, 0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}};
    struct db_queue q;
    enum db_queue_verdict v;
    struct db_error err;
    return db_queues_put(pool, "q", &cfg, &q, &v, &err) == DB_OK && v == DB_Q_CREATED ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    th_db_close(pool, sql);
    return 0;
}

/* The integer that sql (a printf format) answers in its first column. */
static long long sql_int(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static long long sql_int(const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    PGresult *r = th_sql(sql, text);
    long long v = PQgetisnull(r, 0, 0) ? -1 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

/* UTC seconds of y-m-d h:mi. */
static int64_t utc(int y, int m, int d, int h, int mi)
{
    struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
    return (int64_t)timegm(&tm);
}

/* The day of the month of the last Sunday of month m of year y (the EU's transition days). */
static int last_sunday(int y, int m)
{
    for (int d = 31;; d--) {
        struct tm tm = {.tm_year = y - 1900, .tm_mon = m - 1, .tm_mday = d, .tm_hour = 12};
        time_t t = timegm(&tm);
        struct tm back;
        gmtime_r(&t, &back);
        if (back.tm_mon == m - 1 && back.tm_wday == 0)
            return d;
    }
}

/* Creates schedule name with cfg through the db/ workflow, as PUT does. */
static void create(const char *name, const struct db_schedule_config *cfg)
{
    struct db_cron c;
    char why[DB_CRON_ERROR_SIZE];
    assert_int_equal(db_cron_parse(cfg->cron, &c, why, sizeof(why)), 0);
    const struct db_tz *z = db_tz_get(cfg->time_zone, why, sizeof(why));
    assert_non_null(z);
    struct db_schedule s;
    enum db_schedule_verdict v;
    struct db_error err;
    assert_int_equal(db_schedules_put(pool, name, cfg, &c, z, &s, &v, &err), DB_OK);
    assert_int_equal(v, DB_S_CREATED);
    db_schedule_clear(&s);
}

/* A schedule `30 2 * * *` in Europe/Berlin catching up every misfire, its next tick moved to
 * the instant from (UTC seconds). */
static void daily_from(const char *name, int64_t from)
{
    struct db_schedule_config cfg = {.cron = "30 2 * * *",
                                     .time_zone = "Europe/Berlin",
                                     .queue = "q",
                                     .payload = "{\"dst\":true}",
                                     .misfire = DB_MISFIRE_CATCH_UP,
                                     .catch_up_max = DB_SCHEDULE_CATCH_UP_MAX,
                                     .misfire_grace_seconds = 60};
    create(name, &cfg);
    char text[256];
    snprintf(text, sizeof(text),
             "UPDATE rowlock.schedules SET next_fire_at = to_timestamp(%lld) WHERE name = '%s'",
             (long long)from, name);
    PQclear(th_sql(sql, text));
}

/* Runs firing passes until one finds nothing due; returns what they fired in all. */
static struct db_schedules_fired fire_all(void)
{
    struct db_schedules_fired total = {0}, f;
    for (int pass = 0; pass < 20; pass++) {
        struct db_error err;
        assert_int_equal(db_schedules_fire_due(pool, &f, &err), DB_OK);
        total.fires += f.fires;
        total.misfires += f.misfires;
        total.skipped += f.skipped;
        if (f.fires == 0 && !f.full)
            return total;
    }
    fail_msg("the firing passes did not run out of due ticks in 20 passes");
    return total;
}

/* The fires of schedule name on the local (Berlin) day y-m-d: how many, and whether one is at
 * the UTC instant at. */
static void assert_one_fire_on(const char *name, int y, int m, int d, int64_t at)
{
    char day[40];
    snprintf(day, sizeof(day), "%04d-%02d-%02d", y, m, d);
    long long n = sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN rowlock.schedules s "
                          "ON s.id = f.schedule_id WHERE s.name = '%s' AND (f.fire_at AT TIME "
                          "ZONE 'Europe/Berlin')::date = '%s'",
                          name, day);
    long long exact = sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                              "rowlock.schedules s ON s.id = f.schedule_id WHERE s.name = '%s' "
                              "AND f.fire_at = to_timestamp(%lld)",
                              name, (long long)at);
    if (n != 1 || exact != 1) {
        PGresult *r = th_sql(sql, "SELECT s.name, f.fire_at FROM rowlock.schedule_fires f JOIN "
                                  "rowlock.schedules s ON s.id = f.schedule_id "
                                  "ORDER BY 1, 2");
        for (int i = 0; i < PQntuples(r); i++)
            if (strstr(PQgetvalue(r, i, 1), day) != NULL)
                fprintf(stderr, "%s fired at %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        PQclear(r);
        fail_msg("%s on %s: %lld fires, %lld at %lld (UTC seconds)", name, day, n, exact,
                 (long long)at);
    }
}

/* Every local day from the first fire to the last has exactly one; each is at 02:30 local but
 * for `shifted` of them (the spring-forward day's 03:00); each fire's job is in queue q with the
 * schedule's payload, created at or after its tick; the schedule's counters agree. */
static void assert_daily(const char *name, int64_t first, long long shifted)
{
    long long n = sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN rowlock.schedules s "
                          "ON s.id = f.schedule_id WHERE s.name = '%s'",
                          name);
    assert_true(n > 30);
    assert_int_equal(sql_int("SELECT extract(epoch FROM min(f.fire_at))::int8 FROM "
                             "rowlock.schedule_fires f JOIN rowlock.schedules s ON s.id = "
                             "f.schedule_id WHERE s.name = '%s'",
                             name),
                     first);
    assert_int_equal(
        sql_int("SELECT count(DISTINCT (f.fire_at AT TIME ZONE 'Europe/Berlin')::date) "
                "FROM rowlock.schedule_fires f JOIN rowlock.schedules s ON s.id = "
                "f.schedule_id WHERE s.name = '%s'",
                name),
        n);
    assert_int_equal(sql_int("SELECT (max(f.fire_at AT TIME ZONE 'Europe/Berlin')::date - "
                             "min(f.fire_at AT TIME ZONE 'Europe/Berlin')::date) + 1 FROM "
                             "rowlock.schedule_fires f JOIN rowlock.schedules s ON s.id = "
                             "f.schedule_id WHERE s.name = '%s'",
                             name),
                     n);
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                             "rowlock.schedules s ON s.id = f.schedule_id WHERE s.name = '%s' AND "
                             "to_char(f.fire_at AT TIME ZONE 'Europe/Berlin', 'HH24:MI:SS') <> "
                             "'02:30:00'",
                             name),
                     shifted);
    /* the jobs: one per fire, never created before its tick */
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                             "rowlock.schedules s ON s.id = f.schedule_id JOIN rowlock.jobs j ON "
                             "j.id = f.job_id JOIN rowlock.job_bodies b ON b.job_id = j.id JOIN "
                             "rowlock.queues q ON q.id = j.queue_id WHERE s.name = '%s' AND "
                             "q.name = 'q' AND j.state = 'pending' AND j.created_at >= f.fire_at "
                             "AND j.run_at >= f.fire_at AND b.payload = '{\"dst\":true}' AND NOT "
                             "f.manual",
                             name),
                     n);
    /* the schedule: its fires counted, none skipped, the last one remembered, the next after
     * now at 02:30 local (03:00 on a spring-forward day) */
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedules s WHERE name = '%s' AND "
                             "fired = %lld AND skipped = 0 AND last_fire_at = (SELECT "
                             "max(fire_at) FROM rowlock.schedule_fires WHERE schedule_id = s.id) "
                             "AND next_fire_at > now() AND next_fire_at <= now() + interval "
                             "'25 hours' AND to_char(next_fire_at AT TIME ZONE 'Europe/Berlin', "
                             "'HH24:MI:SS') IN ('02:30:00', '03:00:00')",
                             name, n),
                     1);
}

static void transitions_fire_once_each(void **state)
{
    (void)state;
    /* the last year whose both transitions are past, with a margin of a week */
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    int y = tm.tm_year + 1900;
    int spring = last_sunday(y, 3), fall = last_sunday(y, 10);
    if ((int64_t)now < utc(y, 10, fall, 0, 0) + 7 * 86400) {
        y--;
        spring = last_sunday(y, 3);
        fall = last_sunday(y, 10);
    }
    /* 02:30 CET two days before spring, 02:30 CEST two days before fall */
    int64_t from_spring = utc(y, 3, spring - 2, 1, 30), from_fall = utc(y, 10, fall - 2, 0, 30);
    daily_from("spring", from_spring);
    daily_from("fall", from_fall);

    struct db_schedules_fired f = fire_all();
    long long fired = sql_int("SELECT count(*) FROM rowlock.schedule_fires");
    assert_int_equal(f.fires, fired);
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.jobs"), fired);
    /* every tick was past its grace, caught up (but for a tick of each schedule that is due
     * within its grace of now: the run between 01:30 and 01:31 UTC) */
    assert_true(f.misfires <= fired && f.misfires >= fired - 2);
    assert_int_equal(f.skipped, 0);

    /* spring forward: 02:00 CET -> 03:00 CEST at 01:00 UTC; 02:30 never happens */
    assert_one_fire_on("spring", y, 3, spring - 1, utc(y, 3, spring - 1, 1, 30));
    assert_one_fire_on("spring", y, 3, spring, utc(y, 3, spring, 1, 0));
    assert_one_fire_on("spring", y, 3, spring + 1, utc(y, 3, spring + 1, 0, 30));
    /* fall back: 03:00 CEST -> 02:00 CET at 01:00 UTC; 02:30 happens at 00:30 and 01:30 UTC */
    assert_one_fire_on("fall", y, 10, fall - 1, utc(y, 10, fall - 1, 0, 30));
    assert_one_fire_on("fall", y, 10, fall, utc(y, 10, fall, 0, 30));
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                             "rowlock.schedules s ON s.id = f.schedule_id WHERE s.name = 'fall' "
                             "AND f.fire_at = to_timestamp(%lld)",
                             (long long)utc(y, 10, fall, 1, 30)),
                     0);
    assert_one_fire_on("fall", y, 10, fall + 1, utc(y, 10, fall + 1, 1, 30));

    assert_daily("spring", from_spring, 1);
    assert_daily("fall", from_fall, 0);

    /* fired: a pass now finds nothing due */
    f = fire_all();
    assert_int_equal(f.fires, 0);
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.jobs"), fired);
}

/* A per-minute schedule in UTC three minutes behind fires its three missed ticks (catch_up);
 * moved back to the first of them again, the pass plans the same ticks once more, and neither
 * a job nor a record more comes of them. */
static void a_tick_fired_again_makes_no_second_job(void **state)
{
    (void)state;
    struct db_schedule_config cfg = {.cron = "* * * * *",
                                     .time_zone = "UTC",
                                     .queue = "q",
                                     .payload = "{\"again\":true}",
                                     .misfire = DB_MISFIRE_CATCH_UP,
                                     .catch_up_max = 10,
                                     .misfire_grace_seconds = 60};
    create("again", &cfg);
    const char *back = "UPDATE rowlock.schedules SET next_fire_at = date_trunc('minute', "
                       "(SELECT min(fire_at) FROM rowlock.schedule_fires f WHERE f.schedule_id = "
                       "id AND NOT manual)) WHERE name = 'again'";
    PQclear(th_sql(sql, "UPDATE rowlock.schedules SET next_fire_at = date_trunc('minute', "
                        "now()) - interval '3 minutes' WHERE name = 'again'"));
    fire_all();
    const char *jobs = "SELECT count(*) FROM rowlock.jobs j JOIN rowlock.job_bodies b ON "
                       "b.job_id = j.id WHERE b.payload = '{\"again\": true}'";
    long long ticks = sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                              "rowlock.schedules s ON s.id = f.schedule_id WHERE s.name = 'again'");
    assert_true(ticks >= 3);
    assert_int_equal(sql_int("%s", jobs), ticks);

    PQclear(th_sql(sql, back));
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedules WHERE name = 'again' AND "
                             "next_fire_at <= now() - interval '2 minutes'"),
                     1);
    struct db_schedules_fired f = fire_all();
    assert_int_equal(f.fires, 0);
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedule_fires f JOIN "
                             "rowlock.schedules s ON s.id = f.schedule_id WHERE s.name = 'again'"),
                     ticks);
    assert_int_equal(sql_int("%s", jobs), ticks);
    /* and the schedule went on past now */
    assert_int_equal(sql_int("SELECT count(*) FROM rowlock.schedules WHERE name = 'again' AND "
                             "next_fire_at > now()"),
                     1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transitions_fire_once_each),
        cmocka_unit_test(a_tick_fired_again_makes_no_second_job),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
