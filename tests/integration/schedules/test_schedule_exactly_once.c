/* Exactly once under kill -9: three rowlock processes on one database fire SCHEDULES per-second
 * schedules (`* * * * * *`, misfire catch_up with an hour's grace, so that no tick may be
 * skipped, however long the processes are down) for CHAOS_S seconds, while the test kills one
 * of them with SIGKILL at random moments (half of them just after a whole second, when the
 * firing passes of the new tick run) and starts it again, never leaving fewer than one running.
 * Then all three run until every schedule has caught up with the end of the chaos, and stop.
 *
 * Every row ever inserted into rowlock.schedule_fires is copied by a trigger the test installs
 * into a table of its own (the service's upkeep trims the fire history to the newest few as it
 * runs). The verdict, by the database's clock: for each schedule, every whole second from its
 * first tick (the first second after its creation) to its last fire has exactly one fire and
 * one job, and no fire lies outside that window; every job was created at or after its tick,
 * never before; the jobs of the queue are exactly the fires' jobs, each with its schedule's
 * payload; each schedule's fired counts its jobs, and it skipped none.
 *
 * The two defences, each removed from a build run through ROWLOCK_TEST_SCHEDULES_BINARY (the
 * negative controls): without the due schedules' row lock (FOR UPDATE SKIP LOCKED) two passes
 * plan the same tick; the tick's identity (primary key schedule and tick, ON CONFLICT DO
 * NOTHING) still refuses the second job, but the advance is no longer one pass's, and fired
 * counts the ticks planned twice: the counters check fails. Without the identity alone nothing
 * fails: the lock keeps each tick to one pass. Without both, ticks get two jobs. A kill -9 in a
 * firing transaction rolls it back whole, and a restarted process (or another) fires the tick.
 * ROWLOCK_TEST_SEED repeats a run's random choices. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define NPROC      3
#define SCHEDULES  10
#define CHAOS_S    62.0 /* the window: at least 60 ticks of each schedule */
#define CATCH_UP_S 30.0 /* to fire every tick up to the end of the chaos, once all run again */
#define KILLS_MIN  8    /* a run with fewer was not the chaos it claims */

static struct th_service procs[NPROC];
static const char *binary;
static unsigned seed;

static int start_proc(int i)
{
    return th_service_start_binary(&procs[i], binary, th_svc_dburl, NULL);
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NPROC; i++)
        if (procs[i].pid > 0)
            th_service_stop(&procs[i]);
    return th_svc_teardown(state);
}

/* Every row inserted into rowlock.schedule_fires, kept in a table of the test's own (the fire
 * history is trimmed as the service runs; a rolled back insert leaves no copy either). */
static const char audit_sql[] =
    "CREATE TABLE public.fires_seen (schedule_id bigint, fire_at timestamptz, "
    "  enqueued_at timestamptz, job_id bigint, manual boolean); "
    "CREATE FUNCTION public.fire_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "  INSERT INTO public.fires_seen VALUES (NEW.schedule_id, NEW.fire_at, NEW.enqueued_at, "
    "  NEW.job_id, NEW.manual); RETURN NULL; END $$; "
    "CREATE TRIGGER fire_seen AFTER INSERT ON rowlock.schedule_fires "
    "  FOR EACH ROW EXECUTE FUNCTION public.fire_seen()";

static int setup(void **state)
{
    binary = getenv("ROWLOCK_TEST_SCHEDULES_BINARY");
    if (binary == NULL || binary[0] == '\0')
        binary = ROWLOCK_BINARY;
    const char *s = getenv("ROWLOCK_TEST_SEED");
    seed = s && s[0] ? (unsigned)strtoul(s, NULL, 10) : (unsigned)time(NULL) ^ (unsigned)getpid();
    fprintf(stderr, "ROWLOCK_TEST_SEED=%u, processes from %s\n", seed, binary);
    int ok = th_svc_db("sched_exactly_once") == 0;
    for (int i = 0; ok && i < NPROC; i++)
        ok = start_proc(i) == 0;
    if (!ok) {
        teardown(state);
        return -1;
    }
    PQclear(th_sql(th_svc_pg(), audit_sql));
    json_decref(th_call(procs[0].port, "PUT", "/queues/ticks", "{}", 201));
    for (int i = 0; i < SCHEDULES; i++) {
        char path[64], body[256];
        snprintf(path, sizeof(path), "/schedules/every-second-%d", i);
        snprintf(body, sizeof(body),
                 "{\"cron\":\"* * * * * *\",\"queue\":\"ticks\",\"payload\":{\"schedule\":%d},"
                 "\"misfire\":\"catch_up\",\"catch_up_max\":1000,"
                 "\"misfire_grace_seconds\":3600}",
                 i);
        json_decref(th_call(procs[i % NPROC].port, "PUT", path, body, 201));
    }
    return 0;
}

static int running(void)
{
    int n = 0;
    for (int i = 0; i < NPROC; i++)
        n += procs[i].pid > 0;
    return n;
}

/* A random process that is running (up = 1) or not (up = 0); -1 when none is. */
static int pick(int up)
{
    int start = rand_r(&seed) % NPROC;
    for (int k = 0; k < NPROC; k++) {
        int i = (start + k) % NPROC;
        if ((procs[i].pid > 0) == up)
            return i;
    }
    return -1;
}

/* Sleeps 0.2 to 2.5 s, or (every other time) until just after the next whole second. */
static void chaos_pause(void)
{
    if (rand_r(&seed) % 2) {
        usleep((useconds_t)(200000 + rand_r(&seed) % 2300000));
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long to_next = 1000000 - ts.tv_nsec / 1000;
    usleep((useconds_t)(to_next + rand_r(&seed) % 80000));
}

/* Kills and restarts processes for CHAOS_S seconds; returns how many kills. */
static int chaos(void)
{
    int kills = 0, restarts = 0;
    for (double end = th_now() + CHAOS_S; th_now() < end;) {
        chaos_pause();
        int down = pick(0);
        if (down >= 0 && (running() == 1 || rand_r(&seed) % 2)) {
            assert_int_equal(start_proc(down), 0);
            restarts++;
        } else if (running() > 1) {
            int victim = pick(1);
            th_service_signal(&procs[victim], SIGKILL);
            assert_int_equal(th_service_wait(&procs[victim], 10), -1);
            kills++;
        }
    }
    for (int i = 0; i < NPROC; i++)
        if (procs[i].pid <= 0) {
            assert_int_equal(start_proc(i), 0);
            restarts++;
        }
    fprintf(stderr, "chaos: %d kills, %d restarts in %.0f s\n", kills, restarts, CHAOS_S);
    return kills;
}

/* The integer sql answers (first column of the first row). */
static long long sql_int(const char *sql)
{
    return (long long)th_svc_sql_int(sql);
}

/* Prints the rows of sql (up to 20) under a title, when it has any; returns how many. */
static int report(const char *title, const char *sql)
{
    PGresult *r = th_sql(th_svc_pg(), sql);
    int n = PQntuples(r);
    for (int i = 0; i < n && i < 20; i++) {
        fprintf(stderr, "%s:", title);
        for (int k = 0; k < PQnfields(r); k++)
            fprintf(stderr, " %s=%s", PQfname(r, k), PQgetvalue(r, i, k));
        fputc('\n', stderr);
    }
    PQclear(r);
    return n;
}

/* Waits until every schedule has fired its tick of the second end (UTC seconds). */
static void await_caught_up(long long end)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM rowlock.schedules WHERE last_fire_at IS NULL OR "
             "last_fire_at < to_timestamp(%lld)",
             end);
    for (double give_up = th_now() + CATCH_UP_S; th_now() < give_up; usleep(200000))
        if (sql_int(sql) == 0)
            return;
    report("behind", "SELECT name, next_fire_at, last_fire_at FROM rowlock.schedules");
    fail_msg("the schedules did not catch up with the end of the chaos within %.0f s", CATCH_UP_S);
}

/* Each schedule's window: its first tick (the whole second after its creation) to its last. */
#define WINDOWS                                                                                    \
    "WITH w AS (SELECT id, name, date_trunc('second', created_at) + interval '1 s' AS first, "     \
    "last_fire_at AS last FROM rowlock.schedules) "

static void every_tick_enqueued_exactly_once(void **state)
{
    (void)state;
    int kills = chaos();
    long long end = sql_int("SELECT floor(extract(epoch FROM now()))::int8");
    await_caught_up(end);
    for (int i = 0; i < NPROC; i++)
        assert_int_equal(th_service_stop(&procs[i]), 0);

    /* the window: at least 60 ticks of each schedule */
    assert_int_equal(sql_int(WINDOWS "SELECT count(*) FROM w WHERE last < first + interval "
                                     "'59 s' OR last IS NULL"),
                     0);
    /* every second of every window: exactly one fire */
    int bad = report("tick", WINDOWS "SELECT w.name, t.t AS tick, count(f.job_id) AS fires "
                                     "FROM w CROSS JOIN LATERAL generate_series(w.first, w.last, "
                                     "interval '1 s') t LEFT JOIN public.fires_seen f ON "
                                     "f.schedule_id = w.id AND f.fire_at = t.t GROUP BY 1, 2 "
                                     "HAVING count(f.job_id) <> 1 ORDER BY 2, 1");
    /* and none elsewhere: before the first tick, after the last, off a whole second, manual */
    bad += report("stray", WINDOWS "SELECT w.name, f.fire_at FROM public.fires_seen f JOIN w ON "
                                   "w.id = f.schedule_id WHERE f.fire_at < w.first OR f.fire_at "
                                   "> w.last OR f.fire_at <> date_trunc('second', f.fire_at) OR "
                                   "f.manual ORDER BY 2");
    /* never early, by the database's clock; each job the fire's, with its schedule's payload */
    bad += report("early", "SELECT f.schedule_id, f.fire_at, j.id, j.created_at, j.run_at, "
                           "f.enqueued_at FROM public.fires_seen f JOIN rowlock.jobs j ON j.id "
                           "= f.job_id WHERE j.created_at < f.fire_at OR j.run_at < f.fire_at "
                           "OR f.enqueued_at < f.fire_at");
    bad += report("job", "SELECT f.schedule_id, f.fire_at, f.job_id FROM public.fires_seen f "
                         "LEFT JOIN rowlock.jobs j ON j.id = f.job_id LEFT JOIN "
                         "rowlock.job_bodies b ON b.job_id = j.id JOIN rowlock.schedules s ON "
                         "s.id = f.schedule_id WHERE j.id IS NULL OR b.payload IS DISTINCT FROM "
                         "s.payload OR j.queue_id <> s.queue_id");
    bad += report("orphan job", "SELECT j.id, j.created_at FROM rowlock.jobs j WHERE NOT EXISTS "
                                "(SELECT 1 FROM public.fires_seen f WHERE f.job_id = j.id)");
    /* what the schedules say of themselves */
    bad += report("counters", "SELECT s.name, s.fired, s.skipped, (SELECT count(*) FROM "
                              "public.fires_seen f WHERE f.schedule_id = s.id) AS jobs FROM "
                              "rowlock.schedules s WHERE s.skipped <> 0 OR s.fired <> (SELECT "
                              "count(*) FROM public.fires_seen f WHERE f.schedule_id = s.id)");
    long long jobs = sql_int("SELECT count(*) FROM rowlock.jobs");
    long long ticks = sql_int(WINDOWS "SELECT sum(extract(epoch FROM last - first)::int8 + 1) "
                                      "FROM w");
    long long distinct = sql_int("SELECT count(*) FROM (SELECT DISTINCT schedule_id, fire_at FROM "
                                 "public.fires_seen) x");
    fprintf(stderr, "%lld ticks, %lld distinct fired, %lld jobs, %d kills\n", ticks, distinct, jobs,
            kills);
    assert_int_equal(bad, 0);
    assert_int_equal(jobs, ticks);
    assert_int_equal(distinct, ticks);
    assert_true(ticks >= 60 * SCHEDULES);
    assert_true(kills >= KILLS_MIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_tick_enqueued_exactly_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
