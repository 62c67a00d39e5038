/* JSON numbers are refused at the edge when what would be stored is not what was sent, or far
 * larger. Every route that stores client JSON answers 400 number_out_of_range for a number
 * outside a double's normal range (1e-400, which jansson would read as 0, just as 1e400), and for
 * a body whose numbers, written back in plain notation as PostgreSQL's jsonb does (1e300 as 301
 * digits), would grow by more than the body's length plus 4,096 bytes; the refused request
 * changes nothing. Numbers at the edges of the range are stored and read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static const char *const out_of_range[] = {"1e308", "1e-400", "1e400", "-1.8E+308", "1e-320"};
#define NOUT (sizeof(out_of_range) / sizeof(out_of_range[0]))

static int setup(void **state)
{
    if (th_svc_start("json_number_range", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/q", "{\"max_attempts\": 3}", 201));
    json_decref(th_svc_call("PUT", "/ledgers/l", "{}", 201));
    return 0;
}

/* Sends body (a printf format with one %s for the number) with the Content-Type ct, once per
 * out-of-range number; each must be a 400 number_out_of_range whose detail names the rule. */
static void refused_each(const char *method, const char *path, const char *ct, const char *fmt)
{
    for (size_t i = 0; i < NOUT; i++) {
        char body[1024], hdr[96];
        snprintf(body, sizeof(body), fmt, out_of_range[i]);
        snprintf(hdr, sizeof(hdr), "Content-Type: %s", ct);
        const char *headers[] = {hdr, NULL};
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, method, path, headers, body, strlen(body), &r), 0);
        if (r.status != 400)
            fprintf(stderr, "%s %s %s -> %ld %s\n", method, path, body, r.status, r.body);
        th_assert_problem(&r, 400, "number_out_of_range");
        const char *detail = json_string_value(json_object_get(r.json, "detail"));
        assert_non_null(detail);
        assert_non_null(strstr(detail, out_of_range[i]));
        assert_non_null(strstr(detail, "at least 1e-307 and below 1e308"));
        th_response_free(&r);
    }
}

static void refused(const char *method, const char *path, const char *fmt)
{
    refused_each(method, path, "application/json", fmt);
}

static void topic_writes_refuse_and_store_nothing(void **state)
{
    refused("POST", "/topics/t/messages", "{\"key\": \"k\", \"value\": {\"n\": %s}}");
    refused("POST", "/topics/t/messages",
            "{\"messages\": [{\"key\": \"a\", \"value\": 1}, {\"key\": \"b\", \"value\": [%s]}]}");
    refused("PUT", "/topics/t/keys/k/head", "{\"n\": %s}");
    refused_each("PATCH", "/topics/t/keys/k/head", "application/merge-patch+json", "{\"n\": %s}");
    json_t *t = th_svc_get("/topics/t");
    json_t *counts = json_object_get(t, "counts");
    assert_int_equal(json_integer_value(json_object_get(counts, "messages")), 0);
    assert_int_equal(json_integer_value(json_object_get(counts, "heads")), 0);
    json_decref(t);
    th_svc_get_problem("/topics/t/keys/k/head", 404, "head_not_found");
}

/* A job's payload, its progress, result and error: a worker's writes are refused before the
 * lease is touched, so the lease and the job stay as they were. */
static void queue_writes_refuse_and_change_nothing(void **state)
{
    refused("POST", "/queues/q/jobs", "{\"payload\": {\"n\": %s}}");
    refused("POST", "/queues/q/jobs", "{\"jobs\": [{\"payload\": 1}, {\"payload\": %s}]}");
    json_t *queue = th_svc_get("/queues/q");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(queue, "counts"), "pending")), 0);
    json_decref(queue);
    json_decref(th_svc_call("POST", "/queues/q/jobs", "{\"payload\": {\"n\": 1}}", 201));
    json_t *claim =
        th_svc_call("POST", "/queues/q/leases", "{\"owner\": \"w\", \"max_jobs\": 1}", 200);
    json_t *lease = json_array_get(json_object_get(claim, "leases"), 0);
    assert_non_null(lease);
    json_int_t id = json_integer_value(json_object_get(lease, "job_id"));
    json_int_t fence = json_integer_value(json_object_get(lease, "fence"));
    json_decref(claim);
    char path[128], fmt[256];
    snprintf(path, sizeof(path), "/queues/q/leases/%lld", (long long)id);
    snprintf(fmt, sizeof(fmt), "{\"owner\": \"w\", \"fence\": %lld, \"progress\": {\"n\": %%s}}",
             (long long)fence);
    refused("PATCH", path, fmt);
    snprintf(path, sizeof(path), "/queues/q/leases/%lld/complete", (long long)id);
    snprintf(fmt, sizeof(fmt), "{\"owner\": \"w\", \"fence\": %lld, \"result\": {\"n\": %%s}}",
             (long long)fence);
    refused("POST", path, fmt);
    snprintf(path, sizeof(path), "/queues/q/leases/%lld/fail", (long long)id);
    snprintf(fmt, sizeof(fmt), "{\"owner\": \"w\", \"fence\": %lld, \"error\": {\"n\": %%s}}",
             (long long)fence);
    refused("POST", path, fmt);

    snprintf(path, sizeof(path), "/queues/q/jobs/%lld", (long long)id);
    json_t *job = th_svc_get(path);
    assert_string_equal(json_string_value(json_object_get(job, "state")), "processing");
    assert_true(json_is_null(json_object_get(job, "progress")));
    assert_true(json_is_null(json_object_get(job, "result")));
    assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
    json_decref(job);
}

static void ledger_and_schedule_writes_refuse(void **state)
{
    refused("POST", "/ledgers/l/transactions",
            "{\"digest\": \"tx-1\", \"writes\": [{\"object_id\": \"o\", \"version\": 1, "
            "\"type\": \"T\", \"data\": {\"n\": %s}}]}");
    refused("POST", "/ledgers/l/transactions",
            "{\"digest\": \"tx-1\", \"events\": [{\"type\": \"E\", \"data\": %s}]}");
    refused("POST", "/ledgers/l/checkpoints",
            "{\"sequence\": 1, \"transactions\": [{\"digest\": \"tx-1\", \"displays\": "
            "[{\"type\": \"T\", \"version\": 1, \"data\": %s}]}]}");
    th_svc_get_problem("/ledgers/l/transactions/tx-1", 404, "transaction_not_found");
    th_svc_get_problem("/ledgers/l/objects/o", 404, "object_not_found");
    refused("PUT", "/schedules/s",
            "{\"cron\": \"0 0 * * *\", \"queue\": \"q\", \"payload\": {\"n\": %s}}");
    th_svc_get_problem("/schedules/s", 404, "schedule_not_found");
}

/* The edges of the range and zeros written with any exponent PostgreSQL takes are stored and
 * read back; a number written out at length comes back as long as it has to, and no longer. */
static void numbers_in_range_are_stored(void **state)
{
    static const char body[] = "[1e-307, -9.99e307, 999999999999999999999999.0, 0.5, "
                               "9223372036854775807, 0e1000, -0.0e-999, 12.5e-3]";
    json_decref(th_svc_call("PUT", "/topics/t/keys/edges/head", body, 200));
    json_t *head = th_svc_get("/topics/t/keys/edges/head");
    json_t *v = json_object_get(head, "value");
    assert_int_equal(json_array_size(v), 8);
    assert_true(json_real_value(json_array_get(v, 0)) == 1e-307);
    assert_true(json_real_value(json_array_get(v, 1)) == -9.99e307);
    assert_int_equal(json_integer_value(json_array_get(v, 4)), 9223372036854775807LL);
    assert_true(json_number_value(json_array_get(v, 5)) == 0);
    assert_true(json_real_value(json_array_get(v, 7)) == 12.5e-3);
    json_decref(head);
    /* the log page holds them written out in full: within the body's length twice over plus
     * the slack, and the page's own few hundred bytes */
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/topics/t/messages?after=0", NULL, NULL, 0, &r),
                     0);
    assert_int_equal(r.status, 200);
    json_t *page = json_loadb(r.body, r.len, JSON_DECODE_INT_AS_REAL, NULL);
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 1);
    json_decref(page);
    assert_true(r.len > 600); /* 1e-307 and 9.99e307 came back written out */
    assert_true(r.len < 2 * sizeof(body) + 4096 + 512);
    th_response_free(&r);
}

/* Numbers that each fit but together would be stored far larger than sent: 40 of 1e300 (240
 * bytes sent, 12,040 written out) are refused, naming the growth; 10 of them are stored. */
static void a_body_growing_past_its_slack_is_refused(void **state)
{
    char many[512] = "{\"key\": \"g\", \"value\": [", few[256];
    for (int i = 0; i < 40; i++)
        strcat(many, i ? ", 1e300" : "1e300");
    strcat(many, "]}");
    struct th_response r;
    const char *json[] = {"Content-Type: application/json", NULL};
    assert_int_equal(
        th_http(th_svc.port, "POST", "/topics/t/messages", json, many, strlen(many), &r), 0);
    th_assert_problem(&r, 400, "number_out_of_range");
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    assert_non_null(detail);
    assert_non_null(strstr(detail, "11840 bytes longer than sent"));
    th_response_free(&r);
    json_t *t = th_svc_get("/topics/t");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(t, "counts"), "messages")),
                     1);
    json_decref(t);
    snprintf(few, sizeof(few), "%s", "{\"key\": \"g\", \"value\": [1e300");
    for (int i = 1; i < 10; i++)
        strcat(few, ", 1e300");
    strcat(few, "]}");
    json_decref(th_svc_call("POST", "/topics/t/messages", few, 201));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(topic_writes_refuse_and_store_nothing),
        cmocka_unit_test(queue_writes_refuse_and_change_nothing),
        cmocka_unit_test(ledger_and_schedule_writes_refuse),
        cmocka_unit_test(numbers_in_range_are_stored),
        cmocka_unit_test(a_body_growing_past_its_slack_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
