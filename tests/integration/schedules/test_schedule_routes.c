/* The /schedules routes on a running service: PUT creates (201) and replaces (200, keeping the
 * next tick while the expression and the zone stay, re-anchoring it when either changes or the
 * schedule is unpaused), GET one with its next ticks and last fires, the list in pages, fire now
 * (201: a job in the queue with the schedule's payload, recorded as a manual fire, the next tick
 * left alone), DELETE; bad input refused with invalid_schedule naming its field and changing
 * nothing (rows, sequences, upkeep); and DELETE of a queue that a schedule targets refused with
 * queue_has_schedules, the queue and its jobs left as they were. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_bad.h"

#define JSON "application/json"
#define N(a) (sizeof(a) / sizeof((a)[0]))

static int setup(void **state)
{
    (void)state;
    if (th_svc_start("sched_routes", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/queues/q", "{\"max_attempts\":3}", 201));
    json_decref(th_svc_call("PUT", "/queues/other", "{}", 201));
    return 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_int_t num(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* ---- create, replace, read ---- */

static void put_creates_with_defaults(void **state)
{
    (void)state;
    json_t *s = th_svc_call("PUT", "/schedules/nightly",
                            "{\"cron\":\"30 2 * * *\",\"time_zone\":\"Europe/Berlin\","
                            "\"queue\":\"q\",\"payload\":{\"job\":\"report\"},\"priority\":5}",
                            201);
    assert_string_equal(str(s, "name"), "nightly");
    assert_string_equal(str(s, "cron"), "30 2 * * *");
    assert_string_equal(str(s, "time_zone"), "Europe/Berlin");
    assert_string_equal(str(s, "queue"), "q");
    assert_string_equal(str(json_object_get(s, "payload"), "job"), "report");
    assert_int_equal(num(s, "priority"), 5);
    assert_true(json_is_null(json_object_get(s, "max_attempts")));
    assert_string_equal(str(s, "misfire"), "skip");
    assert_int_equal(num(s, "catch_up_max"), 10);
    assert_int_equal(num(s, "misfire_grace_seconds"), 60);
    assert_int_equal(num(s, "jitter_seconds"), 0);
    assert_true(json_is_false(json_object_get(s, "paused")));
    assert_true(json_is_null(json_object_get(s, "last_fire_at")));
    assert_int_equal(num(s, "fired"), 0);
    assert_int_equal(num(s, "skipped"), 0);
    char next[64];
    snprintf(next, sizeof(next), "%s", str(s, "next_fire_at"));
    /* the next tick is 02:30 in Berlin, after now, by PostgreSQL's own zone data */
    char sql[512];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM (SELECT '%s'::timestamptz AS t) x WHERE t > now() "
             "AND t <= now() + interval '1 day 1 hour' "
             "AND to_char(t AT TIME ZONE 'Europe/Berlin', 'HH24:MI:SS') = '02:30:00'",
             next);
    assert_int_equal(th_svc_sql_int(sql), 1);
    json_decref(s);
}

static void put_replaces_keeping_or_reanchoring_the_next_tick(void **state)
{
    (void)state;
    json_t *s = th_svc_get("/schedules/nightly");
    char next[64];
    snprintf(next, sizeof(next), "%s", str(s, "next_fire_at"));
    json_decref(s);
    /* a replace that keeps the expression and the zone keeps the next tick */
    s = th_svc_call("PUT", "/schedules/nightly",
                    "{\"cron\":\"30 2 * * *\",\"time_zone\":\"Europe/Berlin\",\"queue\":\"other\","
                    "\"payload\":[1,2],\"max_attempts\":7,\"misfire\":\"catch_up\","
                    "\"catch_up_max\":1000,\"misfire_grace_seconds\":86400,"
                    "\"jitter_seconds\":3600}",
                    200);
    assert_string_equal(str(s, "next_fire_at"), next);
    assert_string_equal(str(s, "queue"), "other");
    assert_int_equal(json_array_size(json_object_get(s, "payload")), 2);
    assert_int_equal(num(s, "priority"), 0);
    assert_int_equal(num(s, "max_attempts"), 7);
    assert_string_equal(str(s, "misfire"), "catch_up");
    assert_int_equal(num(s, "catch_up_max"), 1000);
    assert_int_equal(num(s, "misfire_grace_seconds"), 86400);
    assert_int_equal(num(s, "jitter_seconds"), 3600);
    json_decref(s);

    /* a new expression re-anchors it: the first of January, 00:00 UTC */
    s = th_svc_call("PUT", "/schedules/nightly", "{\"cron\":\"@yearly\",\"queue\":\"q\"}", 200);
    assert_string_not_equal(str(s, "next_fire_at"), next);
    assert_non_null(strstr(str(s, "next_fire_at"), "-01-01T00:00:00"));
    assert_string_equal(str(s, "time_zone"), "UTC");
    json_decref(s);

    /* paused: no next tick; unpaused: the first tick after now again */
    s = th_svc_call("PUT", "/schedules/nightly",
                    "{\"cron\":\"@yearly\",\"queue\":\"q\",\"paused\":true}", 200);
    assert_true(json_is_null(json_object_get(s, "next_fire_at")));
    assert_int_equal(json_array_size(json_object_get(s, "next_fires")), 0);
    json_decref(s);
    s = th_svc_call("PUT", "/schedules/nightly", "{\"cron\":\"@yearly\",\"queue\":\"q\"}", 200);
    assert_non_null(strstr(str(s, "next_fire_at"), "-01-01T00:00:00"));
    json_decref(s);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.schedules"), 1);
}

static void get_shows_next_ticks_and_unknown_is_404(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/schedules/every-minute",
                            "{\"cron\":\"* * * * *\",\"queue\":\"q\",\"paused\":false}", 201));
    json_t *s = th_svc_get("/schedules/every-minute");
    json_t *next = json_object_get(s, "next_fires");
    assert_int_equal(json_array_size(next), 5);
    assert_string_equal(json_string_value(json_array_get(next, 0)), str(s, "next_fire_at"));
    /* one minute apart, on whole minutes, by the database's reading of them */
    for (size_t i = 1; i < 5; i++) {
        char sql[256];
        snprintf(sql, sizeof(sql),
                 "SELECT extract(epoch FROM '%s'::timestamptz - '%s'::timestamptz)::int8 + "
                 "extract(second FROM '%s'::timestamptz)::int8",
                 json_string_value(json_array_get(next, i)),
                 json_string_value(json_array_get(next, i - 1)),
                 json_string_value(json_array_get(next, i)));
        assert_int_equal(th_svc_sql_int(sql), 60);
    }
    assert_int_equal(json_array_size(json_object_get(s, "last_fires")), 0);
    json_decref(s);
    th_svc_get_problem("/schedules/none", 404, "schedule_not_found");
    th_svc_get_problem("/schedules/.bad", 400, "invalid_name");
    json_decref(th_svc_call("DELETE", "/schedules/every-minute", NULL, 200));
}

/* ---- the list ---- */

static void list_pages_in_name_order(void **state)
{
    (void)state;
    static const char *const names[] = {"p-c", "p-a", "p-e", "p-b", "p-d"};
    for (size_t i = 0; i < N(names); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/schedules/%s", names[i]);
        json_decref(th_svc_call("PUT", path, "{\"cron\":\"@daily\",\"queue\":\"q\"}", 201));
    }
    /* pages of two from after "p" (before every one of them), then on from each next */
    static const char *const want[] = {"p-a", "p-b", "p-c", "p-d", "p-e"};
    char path[128];
    snprintf(path, sizeof(path), "/schedules?limit=2&after=p");
    size_t seen = 0;
    for (int page = 0; page < 4; page++) {
        json_t *l = th_svc_get(path);
        json_t *items = json_object_get(l, "schedules");
        for (size_t i = 0; i < json_array_size(items); i++, seen++) {
            json_t *it = json_array_get(items, i);
            assert_true(seen < N(want));
            assert_string_equal(str(it, "name"), want[seen]);
            assert_null(json_object_get(it, "next_fires")); /* the list shows no detail */
            assert_string_equal(str(it, "cron"), "@daily");
        }
        json_t *next = json_object_get(l, "next");
        if (json_is_null(next)) {
            json_decref(l);
            break;
        }
        assert_int_equal(json_array_size(items), 2);
        snprintf(path, sizeof(path), "/schedules?limit=2&after=%s", json_string_value(next));
        json_decref(l);
    }
    assert_int_equal(seen, N(want));
    json_t *all = th_svc_get("/schedules?limit=1000");
    assert_true(json_array_size(json_object_get(all, "schedules")) >= N(names));
    json_decref(all);
    for (size_t i = 0; i < N(names); i++) {
        snprintf(path, sizeof(path), "/schedules/%s", names[i]);
        json_decref(th_svc_call("DELETE", path, NULL, 200));
    }
}

/* ---- fire now, DELETE ---- */

static void fire_now_enqueues_the_payload_and_keeps_the_next_tick(void **state)
{
    (void)state;
    json_t *s = th_svc_call("PUT", "/schedules/manual",
                            "{\"cron\":\"@yearly\",\"queue\":\"q\",\"payload\":{\"n\":42},"
                            "\"priority\":9,\"max_attempts\":2}",
                            201);
    char next[64];
    snprintf(next, sizeof(next), "%s", str(s, "next_fire_at"));
    json_decref(s);
    json_t *f = th_svc_call("POST", "/schedules/manual/fire", NULL, 201);
    json_int_t job = num(f, "job_id");
    assert_true(job > 0);
    assert_string_equal(str(f, "queue"), "q");
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM (SELECT '%s'::timestamptz AS t) x "
             "WHERE t <= now() AND t > now() - interval '1 minute'",
             str(f, "fire_at"));
    assert_int_equal(th_svc_sql_int(sql), 1);
    char path[128];
    snprintf(path, sizeof(path), "/queues/q/jobs/%" JSON_INTEGER_FORMAT, job);
    json_t *j = th_svc_get(path);
    assert_string_equal(str(j, "state"), "pending");
    assert_int_equal(num(json_object_get(j, "payload"), "n"), 42);
    assert_int_equal(num(j, "priority"), 9);
    assert_int_equal(num(j, "max_attempts"), 2);
    json_decref(j);
    /* recorded as a manual fire; the next tick and the tick count stay */
    s = th_svc_get("/schedules/manual");
    assert_string_equal(str(s, "next_fire_at"), next);
    assert_int_equal(num(s, "fired"), 0);
    assert_true(json_is_null(json_object_get(s, "last_fire_at")));
    json_t *last = json_object_get(s, "last_fires");
    assert_int_equal(json_array_size(last), 1);
    assert_int_equal(num(json_array_get(last, 0), "job_id"), job);
    assert_true(json_is_true(json_object_get(json_array_get(last, 0), "manual")));
    assert_string_equal(str(json_array_get(last, 0), "fire_at"), str(f, "fire_at"));
    json_decref(s);
    /* a second fire is a second job */
    json_t *f2 = th_svc_call("POST", "/schedules/manual/fire", NULL, 201);
    assert_true(num(f2, "job_id") > job);
    json_decref(f2);
    json_decref(f);
    json_decref(th_svc_call("POST", "/schedules/none/fire", NULL, 404));
}

static void delete_removes_the_schedule_and_its_fires_not_its_jobs(void **state)
{
    (void)state;
    json_decref(
        th_svc_call("PUT", "/schedules/gone", "{\"cron\":\"@yearly\",\"queue\":\"q\"}", 201));
    json_t *f = th_svc_call("POST", "/schedules/gone/fire", NULL, 201);
    json_int_t job = num(f, "job_id");
    json_decref(f);
    json_t *d = th_svc_call("DELETE", "/schedules/gone", NULL, 200);
    assert_string_equal(str(d, "name"), "gone");
    assert_true(json_is_true(json_object_get(d, "deleted")));
    json_decref(d);
    th_svc_get_problem("/schedules/gone", 404, "schedule_not_found");
    json_t *again = th_svc_call("DELETE", "/schedules/gone", NULL, 404);
    assert_string_equal(str(again, "code"), "schedule_not_found");
    json_decref(again);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.schedule_fires f WHERE NOT "
                                    "EXISTS (SELECT 1 FROM rowlock.schedules s "
                                    "WHERE s.id = f.schedule_id)"),
                     0);
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.jobs WHERE id = %" JSON_INTEGER_FORMAT,
             job);
    assert_int_equal(th_svc_sql_int(sql), 1);
}

/* ---- bad input ---- */

static const struct th_read schedule_reads[] = {
    {"schedules", "/schedules?limit=1000", NULL, NULL},
    {"schedule_rows", NULL, "SELECT * FROM rowlock.schedules ORDER BY id", NULL},
    {"fires", NULL, "SELECT * FROM rowlock.schedule_fires ORDER BY schedule_id, fire_at", NULL},
    {"jobs", NULL, "SELECT * FROM rowlock.jobs ORDER BY id", NULL},
    {"queues", NULL, "SELECT * FROM rowlock.queues ORDER BY id", NULL},
    /* the rows, not their due times, which the service's upkeep moves meanwhile */
    {"upkeep", NULL, "SELECT family, resource_id FROM rowlock.upkeep ORDER BY 1, 2", NULL},
    {"schedule_seq", NULL, "SELECT last_value, is_called FROM rowlock.schedules_id_seq", NULL},
    {"job_seq", NULL, "SELECT last_value, is_called FROM rowlock.jobs_id_seq", NULL},
};
static const struct th_state schedule_state = {schedule_reads, N(schedule_reads), NULL};

/* A PUT body refused as invalid_schedule: the field it must name (NULL: none) and a phrase its
 * detail must hold (NULL: any). */
struct bad_put {
    const char *path, *body, *field, *detail;
};

static void expect_bad_puts(const struct bad_put *cases, size_t n)
{
    char *before = th_bad_snapshot(&schedule_state);
    assert_non_null(before);
    for (size_t i = 0; i < n; i++) {
        struct th_response r;
        assert_int_equal(th_bad_send("PUT", cases[i].path, JSON, cases[i].body, &r), 0);
        const char *field = json_string_value(json_object_get(r.json, "field"));
        const char *detail = json_string_value(json_object_get(r.json, "detail"));
        int ok = r.status == 400 && strcmp(th_problem_code(&r), "invalid_schedule") == 0 &&
                 (cases[i].field ? field && strcmp(field, cases[i].field) == 0 : field == NULL) &&
                 (cases[i].detail == NULL || (detail && strstr(detail, cases[i].detail)));
        if (!ok)
            fprintf(stderr,
                    "PUT %s %s: expected 400 invalid_schedule field %s (\"%s\"), got %ld %s\n",
                    cases[i].path, cases[i].body, cases[i].field ? cases[i].field : "none",
                    cases[i].detail ? cases[i].detail : "", r.status, r.body ? r.body : "");
        assert_true(ok);
        th_response_free(&r);
    }
    th_bad_unchanged(&schedule_state, before);
    free(before);
}

/* Bad PUT bodies, each refused naming its field (and a phrase of its detail). */
static const struct bad_put bodies[] = {
    {NULL, "{\"cron\":\"0 0 32 * *\",\"queue\":\"q\"}", "cron", "field 3 (day of month)"},
    {NULL, "{\"cron\":\"61 * * * * *\",\"queue\":\"q\"}", "cron", "field 1 (second)"},
    {NULL, "{\"cron\":\"* * * 13 *\",\"queue\":\"q\"}", "cron", "field 4 (month)"},
    {NULL, "{\"cron\":\"* * * * MON-XYZ\",\"queue\":\"q\"}", "cron", "field 5"},
    {NULL, "{\"cron\":\"0 0 30 2 *\",\"queue\":\"q\"}", "cron", "never fire"},
    {NULL, "{\"cron\":\"* * *\",\"queue\":\"q\"}", "cron", "found 3"},
    {NULL, "{\"cron\":\"@reboot\",\"queue\":\"q\"}", "cron", "@reboot"},
    {NULL, "{\"cron\":\"\",\"queue\":\"q\"}", "cron", NULL},
    {NULL, "{\"queue\":\"q\"}", "cron", "required"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":\"Mars/Olympus_Mons\"}", "time_zone",
     "Mars/Olympus_Mons"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":\"../etc/passwd\"}", "time_zone",
     NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":\"/etc/localtime\"}", "time_zone",
     NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":\"localtime\"}", "time_zone", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":\"\"}", "time_zone", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"nope\"}", "queue", "no such queue"},
    {NULL, "{\"cron\":\"@daily\"}", "queue", "required"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"a/b\"}", "queue", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"catch_up_max\":1001}", "catch_up_max", "1000"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"catch_up_max\":0}", "catch_up_max", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"misfire_grace_seconds\":0}",
     "misfire_grace_seconds", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"misfire_grace_seconds\":86401}",
     "misfire_grace_seconds", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"jitter_seconds\":3601}", "jitter_seconds", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"max_attempts\":0}", "max_attempts", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"misfire\":\"later\"}", "misfire", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"colour\":\"red\"}", "colour", "colour"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"Cron\":\"@daily\"}", "Cron", NULL},
    {NULL, "{\"cron\":5,\"queue\":\"q\"}", "cron", "string"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":[\"q\"]}", "queue", "string"},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"time_zone\":null}", "time_zone", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"priority\":\"1\"}", "priority", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"priority\":1.5}", "priority", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"paused\":\"yes\"}", "paused", NULL},
    {NULL, "{\"cron\":\"@daily\",\"queue\":\"q\",\"misfire\":false}", "misfire", NULL},
    {NULL, "[\"@daily\"]", NULL, "object"},
};

/* Each bad body, sent to a new name (a create) and to an existing schedule (a replace). */
static void bad_bodies_name_their_field_and_change_nothing(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/schedules/kept",
                            "{\"cron\":\"@yearly\",\"queue\":\"q\",\"payload\":{\"k\":1}}", 201));
    static const char *const paths[] = {"/schedules/new", "/schedules/kept"};
    struct bad_put cases[2 * N(bodies)];
    for (size_t p = 0; p < 2; p++)
        for (size_t i = 0; i < N(bodies); i++) {
            cases[p * N(bodies) + i] = bodies[i];
            cases[p * N(bodies) + i].path = paths[p];
        }
    expect_bad_puts(cases, N(cases));
    /* the refused names of the path, on every route */
    const char *names[TH_BAD_NAMES];
    th_bad_names(names);
    static const struct th_req routes[] = {
        {"PUT", "/schedules/%s", JSON, "{\"cron\":\"@daily\",\"queue\":\"q\"}"},
        {"GET", "/schedules/%s", NULL, NULL},
        {"DELETE", "/schedules/%s", NULL, NULL},
        {"POST", "/schedules/%s/fire", NULL, NULL},
    };
    for (size_t i = 0; i < TH_BAD_NAMES; i++)
        th_bad_expect_named(&schedule_state, routes, N(routes), names[i], 0, 400, "invalid_name");
    static const char *const lists[] = {"?limit=0", "?limit=1001", "?limit=x"};
    th_bad_expect_gets(&schedule_state, "/schedules", lists, N(lists), 400, "invalid_parameter");
    json_decref(th_svc_call("DELETE", "/schedules/kept", NULL, 200));
}

/* ---- the queue a schedule targets ---- */

static void queue_with_schedules_is_not_deleted(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/target", "{}", 201));
    json_decref(
        th_svc_call("PUT", "/schedules/aims", "{\"cron\":\"@yearly\",\"queue\":\"target\"}", 201));
    json_decref(th_svc_call("POST", "/queues/target/jobs", "{\"payload\":{\"mine\":1}}", 201));
    json_decref(th_svc_call("POST", "/schedules/aims/fire", NULL, 201));
    static const struct th_read reads[] = {
        {"queues", "/queues?limit=1000", NULL, "oldest_pending_age_seconds"},
        {"queue_rows", NULL, "SELECT * FROM rowlock.queues ORDER BY id", NULL},
        {"jobs", NULL, "SELECT * FROM rowlock.jobs ORDER BY id", NULL},
        {"bodies", NULL, "SELECT * FROM rowlock.job_bodies ORDER BY job_id", NULL},
        {"schedule_rows", NULL, "SELECT * FROM rowlock.schedules ORDER BY id", NULL},
        {"fires", NULL, "SELECT * FROM rowlock.schedule_fires ORDER BY schedule_id, fire_at", NULL},
    };
    const struct th_state s = {reads, N(reads), NULL};
    static const struct th_bad del[] = {
        {"DELETE", "/queues/target", NULL, NULL, 409, "queue_has_schedules"},
        {"DELETE", "/queues/target?force=true", NULL, NULL, 409, "queue_has_schedules"},
    };
    th_bad_expect(&s, del, N(del));
    json_t *q = th_svc_get("/queues/target");
    assert_int_equal(num(json_object_get(q, "counts"), "pending"), 2);
    json_decref(q);
    /* retargeted, the schedule no longer holds the queue */
    json_decref(
        th_svc_call("PUT", "/schedules/aims", "{\"cron\":\"@yearly\",\"queue\":\"q\"}", 200));
    json_decref(th_svc_call("DELETE", "/queues/target", NULL, 200));
    th_svc_get_problem("/queues/target", 404, "queue_not_found");
    json_decref(th_svc_call("DELETE", "/schedules/aims", NULL, 200));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_creates_with_defaults),
        cmocka_unit_test(put_replaces_keeping_or_reanchoring_the_next_tick),
        cmocka_unit_test(get_shows_next_ticks_and_unknown_is_404),
        cmocka_unit_test(list_pages_in_name_order),
        cmocka_unit_test(fire_now_enqueues_the_payload_and_keeps_the_next_tick),
        cmocka_unit_test(delete_removes_the_schedule_and_its_fires_not_its_jobs),
        cmocka_unit_test(bad_bodies_name_their_field_and_change_nothing),
        cmocka_unit_test(queue_with_schedules_is_not_deleted),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
