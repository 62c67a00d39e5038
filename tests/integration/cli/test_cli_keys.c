/* rowlock-cli keys against a real service: put gives a key limits of its own (concurrency, and a
 * rate with its period and burst), which get and the service show and the queue's claims obey;
 * get of a key without its own shows the queue's key_limits; list prints the keys with limits of
 * their own (NDJSON, in key order); delete takes them back (then delete again exits 3). Bad
 * input exits 2 and changes nothing: a rate without a period (the service's reason), a limit out
 * of range, an option that is not a number, options on get, a missing key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"

static int setup(void **state)
{
    (void)state;
    return th_svc_start("clikeys", NULL);
}

/* Runs `rowlock-cli keys ARGS`; its stdout in out, its stderr in err; returns its exit code. */
static int cli(const char *args, char *out, size_t outsize, char *err, size_t errsize)
{
    char line[2048];
    snprintf(line, sizeof(line), "keys %s", args);
    return cli_run(NULL, NULL, line, out, outsize, err, errsize);
}

/* The number of jobs a claim of max_jobs hands out now. */
static size_t claim(int max_jobs)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\": \"w\", \"max_jobs\": %d}", max_jobs);
    json_t *r = th_svc_call("POST", "/queues/q/leases", body, 200);
    size_t n = json_array_size(json_object_get(r, "leases"));
    json_decref(r);
    return n;
}

static void keys_put_get_list_delete(void **state)
{
    (void)state;
    char out[8192], err[4096];
    json_decref(th_svc_call("PUT", "/queues/q", "{\"key_limits\": {\"concurrency\": 1}}", 201));
    json_t *jobs = json_array();
    for (int i = 0; i < 6; i++)
        json_array_append_new(jobs, json_pack("{s:i, s:s}", "payload", i, "concurrency_key",
                                              i < 4 ? "big" : "small"));
    json_t *body = json_pack("{s:o}", "jobs", jobs);
    char *text = json_dumps(body, 0);
    json_decref(th_svc_call("POST", "/queues/q/jobs", text, 201));
    free(text);
    json_decref(body);

    /* a key without limits of its own has the queue's */
    assert_int_equal(cli("get q small", out, sizeof(out), err, sizeof(err)), 0);
    json_t *k = json_loads(out, 0, NULL);
    assert_false(json_is_true(json_object_get(k, "own_limits")));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(k, "limits_in_effect"), "concurrency")),
        1);
    json_decref(k);

    assert_int_equal(cli("put q big --concurrency 3 --rate 100 --period 0.5 --burst 7", out,
                         sizeof(out), err, sizeof(err)),
                     0);
    k = json_loads(out, 0, NULL);
    assert_true(json_is_true(json_object_get(k, "own_limits")));
    json_t *rate = json_object_get(json_object_get(k, "limits"), "rate");
    assert_int_equal(json_integer_value(json_object_get(rate, "limit")), 100);
    assert_true(json_real_value(json_object_get(rate, "period_seconds")) == 0.5);
    assert_int_equal(json_integer_value(json_object_get(rate, "burst")), 7);
    json_decref(k);
    /* the claims obey it: 3 of big, 1 of small */
    assert_int_equal(claim(10), 4);
    assert_int_equal(claim(10), 0);

    assert_int_equal(cli("put q small --concurrency 2", out, sizeof(out), err, sizeof(err)), 0);
    assert_int_equal(cli("list q", out, sizeof(out), err, sizeof(err)), 0);
    char *second = strchr(out, '\n');
    assert_non_null(second);
    assert_non_null(strstr(out, "\"key\":\"big\""));
    assert_true(strstr(out, "\"key\":\"big\"") < second);
    assert_non_null(strstr(second, "\"key\":\"small\""));
    assert_int_equal(claim(10), 1); /* small's second slot */

    /* bad input: exit 2, nothing changed */
    assert_int_equal(cli("put q big --rate 5", out, sizeof(out), err, sizeof(err)), 2);
    assert_non_null(strstr(err, "period_seconds"));
    assert_int_equal(cli("put q big --concurrency 0", out, sizeof(out), err, sizeof(err)), 2);
    assert_int_equal(cli("put q big --concurrency x", out, sizeof(out), err, sizeof(err)), 2);
    assert_int_equal(cli("get q big --concurrency 2", out, sizeof(out), err, sizeof(err)), 2);
    assert_int_equal(cli("put q", out, sizeof(out), err, sizeof(err)), 2);
    assert_int_equal(cli("get q big", out, sizeof(out), err, sizeof(err)), 0);
    k = json_loads(out, 0, NULL);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(k, "limits"), "concurrency")), 3);
    json_decref(k);

    assert_int_equal(cli("delete q big", out, sizeof(out), err, sizeof(err)), 0);
    assert_int_equal(cli("delete q big", out, sizeof(out), err, sizeof(err)), 3);
    assert_int_equal(cli("get nosuch big", out, sizeof(out), err, sizeof(err)), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(keys_put_get_list_delete)};
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
