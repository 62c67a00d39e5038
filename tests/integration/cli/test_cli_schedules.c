/* rowlock-cli schedules against a real service with tokens: put (every option lands in the
 * schedule the service keeps, and a second put replaces the whole schedule), get, list (NDJSON
 * in name order), fire (one job now, with the schedule's payload, priority and attempts, in its
 * fires) and delete (then get exits 3). Bad input changes nothing and says what is wrong: an
 * invalid cron exits 2 with the service's detail naming the cron field, and so do an unknown
 * zone, an unknown queue and a value out of range; a missing --cron, a --payload that is not
 * JSON or a bad verb exit 2 before any request; a token without the scope exits 1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"

#define ADMIN_TOKEN "sched-admin-token-0123456789"
#define READ_TOKEN  "sched-read-token-0123456789"
#define WRITE_TOKEN "sched-write-token-0123456789"

static int setup(void **state)
{
    (void)state;
    return cli_run_start("clisched",
                         ADMIN_TOKEN " admin\n" READ_TOKEN " read\n" WRITE_TOKEN " write\n");
}

/* Runs `rowlock-cli schedules ARGS` with token (NULL: none); its stdout in out, its stderr in
 * err. Returns its exit code. */
static int cli(const char *token, const char *args, char *out, size_t outsize, char *err,
               size_t errsize)
{
    char env[256], line[2048];
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN=%s", token ? token : "");
    snprintf(line, sizeof(line), "schedules %s", args);
    return cli_run(env, NULL, line, out, outsize, err, errsize);
}

/* An HTTP call with the admin token; its status in *status, its JSON answer (the caller's). */
static json_t *admin(const char *method, const char *path, const char *body, long *status)
{
    return cli_run_http(ADMIN_TOKEN, method, path, body, status);
}

static const char *str(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(not a string)";
}

static long long num(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static void queue_create(const char *name)
{
    char path[256];
    long status;
    snprintf(path, sizeof(path), "/queues/%s", name);
    json_decref(admin("PUT", path, "{}", &status));
    assert_true(status == 200 || status == 201);
}

/* put with every option, then what the service keeps is what was asked: its answer, and the
 * resource read afterwards. */
static void put_lands_every_option(void **state)
{
    char out[16384], err[4096];
    long status;
    queue_create("reports");
    assert_int_equal(cli(ADMIN_TOKEN,
                         "put nightly --cron '30 2 * * *' --time-zone Europe/Berlin --queue reports"
                         " --payload '{\"report\": \"daily\"}' --misfire catch_up --catch-up-max 3"
                         " --grace 120 --jitter 5 --priority 7 --max-attempts 2",
                         out, sizeof(out), err, sizeof(err)),
                     0);
    json_t *printed = json_loads(out, 0, NULL);
    assert_non_null(printed);
    assert_string_equal(str(printed, "name"), "nightly");
    assert_int_equal(json_array_size(json_object_get(printed, "next_fires")), 5);
    json_decref(printed);
    json_t *s = admin("GET", "/schedules/nightly", NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(str(s, "cron"), "30 2 * * *");
    assert_string_equal(str(s, "time_zone"), "Europe/Berlin");
    assert_string_equal(str(s, "queue"), "reports");
    assert_string_equal(str(json_object_get(s, "payload"), "report"), "daily");
    assert_string_equal(str(s, "misfire"), "catch_up");
    assert_int_equal(num(s, "catch_up_max"), 3);
    assert_int_equal(num(s, "misfire_grace_seconds"), 120);
    assert_int_equal(num(s, "jitter_seconds"), 5);
    assert_int_equal(num(s, "priority"), 7);
    assert_int_equal(num(s, "max_attempts"), 2);
    assert_true(json_is_false(json_object_get(s, "paused")));
    /* 02:30 in Berlin is 00:30 or 01:30 UTC, whichever offset the next tick has */
    const char *next = str(s, "next_fire_at");
    assert_true(strstr(next, "T00:30:00.000000Z") != NULL ||
                strstr(next, "T01:30:00.000000Z") != NULL);
    json_decref(s);
}

/* fire: one job now in the schedule's queue, with its payload, priority and attempts; get shows
 * it among the fires; list prints each schedule as a line, in name order; a second put replaces
 * the whole schedule (what it leaves out is the default again); delete, then get exits 3. */
static void fire_get_list_replace_delete(void **state)
{
    char out[16384], err[4096], path[256];
    long status;
    assert_int_equal(cli(WRITE_TOKEN, "fire nightly", out, sizeof(out), err, sizeof(err)), 0);
    json_t *fired = json_loads(out, 0, NULL);
    assert_non_null(fired);
    long long job = num(fired, "job_id");
    assert_true(job > 0);
    assert_string_equal(str(fired, "queue"), "reports");
    json_decref(fired);
    snprintf(path, sizeof(path), "/queues/reports/jobs/%lld", job);
    json_t *j = admin("GET", path, NULL, &status);
    assert_int_equal(status, 200);
    assert_string_equal(str(json_object_get(j, "payload"), "report"), "daily");
    assert_int_equal(num(j, "priority"), 7);
    assert_int_equal(num(j, "max_attempts"), 2);
    json_decref(j);

    assert_int_equal(cli(READ_TOKEN, "get nightly", out, sizeof(out), err, sizeof(err)), 0);
    json_t *s = json_loads(out, 0, NULL);
    json_t *last = json_array_get(json_object_get(s, "last_fires"), 0);
    assert_int_equal(num(last, "job_id"), job);
    assert_true(json_is_true(json_object_get(last, "manual")));
    json_decref(s);

    assert_int_equal(cli(ADMIN_TOKEN, "put hourly --cron @hourly --queue reports", out, sizeof(out),
                         err, sizeof(err)),
                     0);
    assert_int_equal(cli(ADMIN_TOKEN, "put nightly --cron '30 2 * * *' --queue reports --paused",
                         out, sizeof(out), err, sizeof(err)),
                     0);
    assert_int_equal(cli(READ_TOKEN, "list", out, sizeof(out), err, sizeof(err)), 0);
    char *second = strchr(out, '\n');
    assert_non_null(second);
    *second++ = '\0';
    json_t *a = json_loads(out, 0, NULL), *b = json_loads(second, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(str(a, "name"), "hourly");
    assert_string_equal(str(b, "name"), "nightly");
    assert_true(json_is_true(json_object_get(b, "paused")));
    assert_true(json_is_null(json_object_get(b, "next_fire_at")));
    assert_string_equal(str(b, "time_zone"), "UTC");
    assert_string_equal(str(b, "misfire"), "skip");
    assert_int_equal(num(b, "priority"), 0);
    assert_true(json_is_null(json_object_get(b, "max_attempts")));
    assert_null(json_object_get(b, "next_fires"));
    assert_string_equal(strchr(second, '\n'), "\n"); /* two lines, no more */
    json_decref(a);
    json_decref(b);

    assert_int_equal(cli(ADMIN_TOKEN, "delete nightly", out, sizeof(out), err, sizeof(err)), 0);
    json_t *d = json_loads(out, 0, NULL);
    assert_true(json_is_true(json_object_get(d, "deleted")));
    json_decref(d);
    assert_int_equal(cli(READ_TOKEN, "get nightly", out, sizeof(out), err, sizeof(err)), 3);
    assert_non_null(strstr(err, "rowlock-cli: schedule_not_found: "));
    assert_int_equal(cli(WRITE_TOKEN, "fire nightly", out, sizeof(out), err, sizeof(err)), 3);
    assert_int_equal(cli(ADMIN_TOKEN, "delete nightly", out, sizeof(out), err, sizeof(err)), 3);
}

/* Each bad put, and the line it must print; the service's detail, or the CLI's own reason. */
static const struct {
    const char *args, *says;
} bad_puts[] = {
    {"--cron '0 0 32 * *' --queue reports",
     "rowlock-cli: invalid_schedule: cron: field 3 (day of month): 32 is out of range 1-31"},
    {"--cron '0 0 30 2 *' --queue reports", "the expression can never fire"},
    {"--cron '* * * *' --queue reports", "rowlock-cli: invalid_schedule: cron: expected 5 fields"},
    {"--cron @daily --time-zone Mars/Olympus --queue reports",
     "rowlock-cli: invalid_schedule: time_zone: unknown time zone"},
    {"--cron @daily --queue nosuch", "rowlock-cli: invalid_schedule: queue: no such queue"},
    {"--cron @daily --queue reports --catch-up-max 5000",
     "\"catch_up_max\" must be an integer from 1 to 1000"},
    {"--cron @daily --queue reports --jitter -1",
     "\"jitter_seconds\" must be an integer from 0 to 3600"},
    {"--cron @daily --queue reports --misfire later", "misfire: must be"},
    {"--queue reports", "rowlock-cli: usage: schedules put NAME needs --cron EXPR and --queue Q"},
    {"--cron @daily", "needs --cron EXPR and --queue Q"},
    {"--cron @daily --queue reports --payload '{x'", "rowlock-cli: usage: --payload is not JSON"},
    {"--cron @daily --queue reports --grace soon", "--grace must be an integer (got 'soon')"},
};

static void bad_input_says_why_and_changes_nothing(void **state)
{
    char out[16384], err[4096], args[512];
    long status;
    for (size_t i = 0; i < sizeof(bad_puts) / sizeof(bad_puts[0]); i++) {
        snprintf(args, sizeof(args), "put bad %s", bad_puts[i].args);
        assert_int_equal(cli(ADMIN_TOKEN, args, out, sizeof(out), err, sizeof(err)), 2);
        if (strstr(err, bad_puts[i].says) == NULL)
            fail_msg("schedules %s printed %s, not %s", args, err, bad_puts[i].says);
        assert_string_equal(out, "");
    }
    static const char *const usages[] = {"frobnicate bad",        "get", "get a b", "list extra",
                                         "get bad --cron @daily", ""};
    for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++)
        assert_int_equal(cli(ADMIN_TOKEN, usages[i], out, sizeof(out), err, sizeof(err)), 2);
    json_decref(admin("GET", "/schedules/bad", NULL, &status));
    assert_int_equal(status, 404);
}

/* A token without the scope: put and delete need admin, fire write, list and get read. */
static void scopes_are_the_services(void **state)
{
    char out[16384], err[4096];
    long status;
    assert_int_equal(cli(READ_TOKEN, "put scoped --cron @daily --queue reports", out, sizeof(out),
                         err, sizeof(err)),
                     1);
    assert_non_null(strstr(err, "rowlock-cli: forbidden: "));
    assert_int_equal(cli(WRITE_TOKEN, "put scoped --cron @daily --queue reports", out, sizeof(out),
                         err, sizeof(err)),
                     1);
    json_decref(admin("GET", "/schedules/scoped", NULL, &status));
    assert_int_equal(status, 404);
    assert_int_equal(cli(READ_TOKEN, "fire hourly", out, sizeof(out), err, sizeof(err)), 1);
    assert_int_equal(cli(WRITE_TOKEN, "delete hourly", out, sizeof(out), err, sizeof(err)), 1);
    assert_int_equal(cli(WRITE_TOKEN, "list", out, sizeof(out), err, sizeof(err)), 1);
    assert_int_equal(cli(NULL, "get hourly", out, sizeof(out), err, sizeof(err)), 1);
    assert_non_null(strstr(err, "rowlock-cli: unauthorized: "));
    json_decref(admin("GET", "/schedules/hourly", NULL, &status));
    assert_int_equal(status, 200);
    /* the help says so */
    assert_int_equal(cli(NULL, "--help", out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "usage: rowlock-cli schedules list"));
    assert_non_null(
        strstr(out, "scopes: list and get need read, put and delete admin, fire write"));
    assert_string_equal(err, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_lands_every_option),
        cmocka_unit_test(fire_get_list_replace_delete),
        cmocka_unit_test(bad_input_says_why_and_changes_nothing),
        cmocka_unit_test(scopes_are_the_services),
    };
    return cmocka_run_group_tests(tests, setup, cli_run_teardown);
}
