/* rowlock-cli queues against a real service with tokens: put (the argument, or stdin) creates a
 * queue whose limits get shows and whose claims obey; get --config prints a body put takes, so
 * that a copy and an edit of one member keep all the others; list prints every queue (NDJSON, in
 * name order, with its counts); delete is refused while a job is processing (exit 4) unless
 * --force, and even so while a schedule targets the queue. Bad input exits 2 and changes
 * nothing: JSON that does not parse (nothing sent), a value or member the service refuses (its
 * reason), an option on the wrong verb; an unknown queue exits 3; a token without the scope
 * exits 1, and the help names the scopes the routes require. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"

#define ADMIN_TOKEN "queues-admin-token-0123456789"
#define READ_TOKEN  "queues-read-token-0123456789"
#define WRITE_TOKEN "queues-write-token-0123456789"

#define MAIL_CONFIG                                                                                \
    "{\"max_attempts\": 3, \"limits\": {\"concurrency\": 2, \"rate\": {\"limit\": 10, "            \
    "\"period_seconds\": 1}}, \"key_limits\": {\"concurrency\": 1}}"

static char out[16384], err[4096];

static int setup(void **state)
{
    (void)state;
    return cli_run_start("cliqueues",
                         ADMIN_TOKEN " admin\n" READ_TOKEN " read\n" WRITE_TOKEN " write\n");
}

/* Runs `rowlock-cli queues ARGS` with token (NULL: none) and stdin_text (NULL: empty); its
 * stdout in out, its stderr in err. Returns its exit code. */
static int cli(const char *token, const char *stdin_text, const char *args)
{
    char env[256], line[2048];
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN=%s", token ? token : "");
    snprintf(line, sizeof(line), "queues %s", args);
    return cli_run(env, stdin_text, line, out, sizeof(out), err, sizeof(err));
}

/* An HTTP call as admin that must answer want; its JSON answer (the caller's). */
static json_t *admin(const char *method, const char *path, const char *body, long want)
{
    long status;
    json_t *j = cli_run_http(ADMIN_TOKEN, method, path, body, &status);
    if (status != want)
        fail_msg("%s %s answered %ld, not %ld", method, path, status, want);
    return j;
}

static long long num(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

/* The concurrency of a queue's limits member ("limits" or "key_limits"). */
static long long concurrency(const json_t *q, const char *member)
{
    return num(json_object_get(q, member), "concurrency");
}

/* The queue's configuration, as the CLI's get --config prints it (the caller's). */
static json_t *config_of(const char *queue)
{
    char args[256];
    snprintf(args, sizeof(args), "get %s --config", queue);
    assert_int_equal(cli(READ_TOKEN, NULL, args), 0);
    json_t *c = json_loads(out, 0, NULL);
    assert_non_null(c);
    return c;
}

/* put with limits: the answer and get show them, and the service's claims obey them. */
static void put_then_get_shows_the_limits(void **state)
{
    (void)state;
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "put mail '" MAIL_CONFIG "'"), 0);
    json_t *q = json_loads(out, 0, NULL);
    assert_non_null(q);
    assert_string_equal(json_string_value(json_object_get(q, "name")), "mail");
    assert_int_equal(num(q, "max_attempts"), 3);
    json_decref(q);

    assert_int_equal(cli(READ_TOKEN, NULL, "get mail"), 0);
    q = json_loads(out, 0, NULL);
    assert_non_null(q);
    assert_int_equal(num(q, "max_attempts"), 3);
    assert_int_equal(num(q, "lease_seconds"), 30); /* left out: the default */
    assert_int_equal(concurrency(q, "limits"), 2);
    json_t *rate = json_object_get(json_object_get(q, "limits"), "rate");
    assert_int_equal(num(rate, "limit"), 10);
    assert_true(json_real_value(json_object_get(rate, "period_seconds")) == 1.0);
    assert_int_equal(num(rate, "burst"), 10);
    assert_int_equal(concurrency(q, "key_limits"), 1);
    assert_int_equal(num(json_object_get(q, "counts"), "pending"), 0);
    json_decref(q);

    /* four jobs of four keys: the queue's concurrency of 2 lets two be claimed */
    json_decref(admin("POST", "/queues/mail/jobs",
                      "{\"jobs\": [{\"payload\": 1, \"concurrency_key\": \"a\"}, {\"payload\": 2, "
                      "\"concurrency_key\": \"b\"}, {\"payload\": 3, \"concurrency_key\": \"c\"}, "
                      "{\"payload\": 4, \"concurrency_key\": \"d\"}]}",
                      201));
    json_t *claim =
        admin("POST", "/queues/mail/leases", "{\"owner\": \"w\", \"max_jobs\": 10}", 200);
    assert_int_equal(json_array_size(json_object_get(claim, "leases")), 2);
    json_decref(claim);
    assert_int_equal(cli(READ_TOKEN, NULL, "get mail"), 0);
    q = json_loads(out, 0, NULL);
    assert_int_equal(num(json_object_get(q, "counts"), "processing"), 2);
    assert_int_equal(num(json_object_get(q, "counts"), "pending"), 2);
    json_decref(q);
}

/* put from stdin; get --config is a body put takes: it copies a queue, and an edit of one member
 * of it keeps every other. */
static void config_round_trips_through_stdin(void **state)
{
    (void)state;
    assert_int_equal(cli(ADMIN_TOKEN, "{\"lease_seconds\": 90, \"limits\": {\"concurrency\": 5}}",
                         "put reports"),
                     0);
    json_t *q = admin("GET", "/queues/reports", NULL, 200);
    assert_int_equal(num(q, "lease_seconds"), 90);
    assert_int_equal(concurrency(q, "limits"), 5);
    json_decref(q);

    json_t *mail = config_of("mail");
    static const char *const not_config[] = {"name", "created_at", "paused", "counts",
                                             "limits_held_back"};
    for (size_t i = 0; i < sizeof(not_config) / sizeof(not_config[0]); i++)
        assert_null(json_object_get(mail, not_config[i]));
    char *text = json_dumps(mail, 0);
    assert_int_equal(cli(ADMIN_TOKEN, text, "put mail-copy"), 0);
    free(text);
    json_t *copy = config_of("mail-copy");
    assert_true(json_equal(copy, mail));
    json_decref(copy);

    /* the edit of one member, as the help shows it (jq's part done here) */
    json_object_set_new(mail, "max_attempts", json_integer(7));
    text = json_dumps(mail, 0);
    assert_int_equal(cli(ADMIN_TOKEN, text, "put mail"), 0);
    free(text);
    q = admin("GET", "/queues/mail", NULL, 200);
    assert_int_equal(num(q, "max_attempts"), 7);
    assert_int_equal(concurrency(q, "limits"), 2);
    assert_int_equal(num(json_object_get(json_object_get(q, "limits"), "rate"), "limit"), 10);
    assert_int_equal(concurrency(q, "key_limits"), 1);
    assert_int_equal(num(json_object_get(q, "counts"), "processing"), 2); /* jobs untouched */
    json_decref(q);
    json_decref(mail);
}

/* list: one JSON line per queue, in name order, each with its configuration and counts. */
static void list_shows_every_queue(void **state)
{
    (void)state;
    static const char *const names[] = {"mail", "mail-copy", "reports"};
    assert_int_equal(cli(READ_TOKEN, NULL, "list"), 0);
    char *line = out;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        json_t *q = json_loads(line, 0, NULL);
        assert_non_null(q);
        assert_string_equal(json_string_value(json_object_get(q, "name")), names[i]);
        assert_non_null(json_object_get(q, "counts"));
        if (i == 0) {
            assert_int_equal(concurrency(q, "limits"), 2);
            assert_int_equal(num(json_object_get(q, "counts"), "processing"), 2);
        }
        json_decref(q);
        line = nl + 1;
    }
    assert_string_equal(line, ""); /* no other queue */
}

/* Each bad put and what it must say: the CLI's reason (nothing sent) or the service's. */
static const struct {
    const char *body, *says;
} bad_puts[] = {
    {"{\"max_attempts\": 4", "rowlock-cli: usage: the body is not JSON: "},
    {"", "rowlock-cli: usage: the body is not JSON: "},
    {"{\"max_attempts\": 0}",
     "rowlock-cli: invalid_config: \"max_attempts\" must be an integer from 1 to 1000000"},
    {"{\"limits\": {\"rate\": {\"limit\": 5}}}", "has a \"limit\" and a \"period_seconds\""},
    {"{\"limits\": {\"concurrency\": \"two\"}}", "\"concurrency\""},
    {"{\"paused\": true}", "rowlock-cli: invalid_config: unknown member \"paused\""},
    {"[3]", "rowlock-cli: invalid_config: the body must be a JSON object"},
};

static void bad_input_exits_2_and_changes_nothing(void **state)
{
    (void)state;
    json_t *before = admin("GET", "/queues/mail", NULL, 200);
    for (size_t i = 0; i < sizeof(bad_puts) / sizeof(bad_puts[0]); i++) {
        /* as the argument, and on stdin; for the queue, and for a new one */
        assert_int_equal(cli(ADMIN_TOKEN, bad_puts[i].body, "put mail"), 2);
        if (strstr(err, bad_puts[i].says) == NULL)
            fail_msg("put of %s printed %s, not %s", bad_puts[i].body, err, bad_puts[i].says);
        assert_string_equal(out, "");
        char args[256];
        snprintf(args, sizeof(args), "put fresh '%s'", bad_puts[i].body);
        assert_int_equal(cli(ADMIN_TOKEN, NULL, args), 2);
        assert_non_null(strstr(err, bad_puts[i].says));
    }
    static const char *const usages[] = {"",
                                         "frobnicate mail",
                                         "get",
                                         "get mail extra",
                                         "list extra",
                                         "put",
                                         "put mail '{}' '{}'",
                                         "get mail --force",
                                         "put mail --config '{}'",
                                         "delete mail --config",
                                         "list --force"};
    for (size_t i = 0; i < sizeof(usages) / sizeof(usages[0]); i++)
        assert_int_equal(cli(ADMIN_TOKEN, NULL, usages[i]), 2);
    json_t *after = admin("GET", "/queues/mail", NULL, 200);
    assert_int_equal(num(json_object_get(after, "counts"), "processing"), 2);
    assert_int_equal(num(json_object_get(after, "counts"), "pending"), 2);
    json_object_del(before, "counts"); /* the oldest pending job's age goes on growing */
    json_object_del(after, "counts");
    assert_true(json_equal(after, before)); /* its updated_at too */
    json_decref(after);
    json_decref(before);
    json_decref(admin("GET", "/queues/fresh", NULL, 404));
}

static void unknown_queue_exits_3(void **state)
{
    (void)state;
    static const char *const args[] = {"get nosuch", "get nosuch --config", "delete nosuch",
                                       "delete nosuch --force"};
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        assert_int_equal(cli(ADMIN_TOKEN, NULL, args[i]), 3);
        assert_non_null(strstr(err, "rowlock-cli: queue_not_found: there is no queue nosuch"));
        assert_string_equal(out, "");
    }
}

/* delete: refused while jobs are processing unless --force, and with a schedule even so; a
 * queue deleted reads as 3 afterwards. */
static void delete_refused_while_processing_unless_forced(void **state)
{
    (void)state;
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "delete mail"), 4);
    assert_non_null(strstr(err, "rowlock-cli: queue_busy: "));
    json_decref(admin("GET", "/queues/mail", NULL, 200));
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "delete mail --force"), 0);
    json_t *d = json_loads(out, 0, NULL);
    assert_true(json_is_true(json_object_get(d, "deleted")));
    assert_int_equal(num(d, "processing_deleted"), 2);
    json_decref(d);
    assert_int_equal(cli(READ_TOKEN, NULL, "get mail"), 3);

    json_decref(
        admin("PUT", "/schedules/nightly", "{\"cron\": \"@daily\", \"queue\": \"reports\"}", 201));
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "delete reports --force"), 4);
    assert_non_null(strstr(err, "rowlock-cli: queue_has_schedules: "));
    json_decref(admin("DELETE", "/schedules/nightly", NULL, 200));
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "delete reports"), 0);
    assert_int_equal(cli(ADMIN_TOKEN, NULL, "delete reports"), 3);
}

/* A token without the scope: put and delete need admin, list and get read; the help says so. */
static void scopes_are_the_routes(void **state)
{
    (void)state;
    static const struct {
        const char *token, *args, *code;
    } refused[] = {
        {READ_TOKEN, "put scoped '{}'", "forbidden"},
        {WRITE_TOKEN, "put scoped '{}'", "forbidden"},
        {READ_TOKEN, "delete mail-copy", "forbidden"},
        {WRITE_TOKEN, "delete mail-copy --force", "forbidden"},
        {WRITE_TOKEN, "get mail-copy", "forbidden"},
        {WRITE_TOKEN, "list", "forbidden"},
        {NULL, "get mail-copy", "unauthorized"},
    };
    char says[64];
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_int_equal(cli(refused[i].token, NULL, refused[i].args), 1);
        snprintf(says, sizeof(says), "rowlock-cli: %s: ", refused[i].code);
        assert_non_null(strstr(err, says));
    }
    json_decref(admin("GET", "/queues/scoped", NULL, 404));
    json_decref(admin("GET", "/queues/mail-copy", NULL, 200));
    assert_int_equal(cli(READ_TOKEN, NULL, "list"), 0);

    assert_int_equal(cli(NULL, NULL, "--help"), 0);
    assert_non_null(strstr(out, "usage: rowlock-cli queues list\n"));
    assert_non_null(strstr(out, "scopes: list and get need read, put and delete admin.\n"));
    assert_string_equal(err, "");
    assert_int_equal(cli_run(NULL, NULL, "--help", out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "  queues list|get|put|delete [QUEUE] ...: "));
    assert_non_null(strstr(out, "queues list|get, schedules list|get"));
    assert_non_null(strstr(out, "queues put|delete,\nschedules put|delete"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_then_get_shows_the_limits),
        cmocka_unit_test(config_round_trips_through_stdin),
        cmocka_unit_test(list_shows_every_queue),
        cmocka_unit_test(bad_input_exits_2_and_changes_nothing),
        cmocka_unit_test(unknown_queue_exits_3),
        cmocka_unit_test(delete_refused_while_processing_unless_forced),
        cmocka_unit_test(scopes_are_the_routes),
    };
    return cmocka_run_group_tests(tests, setup, cli_run_teardown);
}
