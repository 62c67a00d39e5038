/* A JSON member the queue routes cannot encode for the database (json_dumps failing, as it does
 * out of memory) is a 500 internal_error that writes nothing: never a write without the member
 * (a heartbeat without its progress, a job completed with a null result) and never a 400 that
 * blames the request. The service runs with dumps_fail.c preloaded, which fails json_dumps for
 * the values holding DUMPS_FAIL_MARKER; each refused request names a real lease (its owner and
 * fence) or a valid job, so that only the encoding is wrong, and after them the jobs, their rows,
 * bodies and attempts are what they were. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dumps_fail.h"
#include "harness_bad.h"
#include "harness_svc.h"

static int64_t job[2], fence[2]; /* two jobs claimed by w1 */

#define MARKED "{\"m\":\"" DUMPS_FAIL_MARKER "\"}"
#define N(a)   (sizeof(a) / sizeof((a)[0]))

static int setup(void **state)
{
    (void)state;
    /* an ASan build checks that its runtime is loaded first; the preloaded fault comes first */
    static char asan[512];
    const char *had = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%sverify_asan_link_order=0", had ? had : "",
             had && had[0] ? ":" : "");
    const char *env[] = {"LD_PRELOAD=" DUMPS_FAIL_LIBRARY, asan, NULL};
    if (th_svc_start("queue_unencodable_member", env) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/queues/q", "{}", 201));
    for (int i = 0; i < 2; i++)
        json_decref(th_svc_call("POST", "/queues/q/jobs", "{\"payload\":{\"a\":1}}", 201));
    json_t *c = th_svc_call("POST", "/queues/q/leases", "{\"owner\":\"w1\",\"max_jobs\":2}", 200);
    for (int i = 0; i < 2; i++) {
        json_t *l = json_array_get(json_object_get(c, "leases"), (size_t)i);
        job[i] = json_integer_value(json_object_get(l, "job_id"));
        fence[i] = json_integer_value(json_object_get(l, "fence"));
    }
    json_decref(c);
    /* the fault touches only the marked values: a progress without the marker is stored */
    char path[96], body[128];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64, job[0]);
    snprintf(body, sizeof(body), "{\"owner\":\"w1\",\"fence\":%" PRId64 ",\"progress\":{\"p\":1}}",
             fence[0]);
    json_decref(th_svc_call("PATCH", path, body, 200));
    return job[0] > 0 && job[1] > 0 ? 0 : -1;
}

/* The jobs as served and as stored, as one JSON text (malloc'd). */
static char *snapshot(void)
{
    json_t *s = json_object();
    json_object_set_new(s, "jobs", th_get_json(th_svc.port, "/queues/q/jobs?limit=1000"));
    PGconn *c = th_svc_pg();
    json_object_set_new(s, "job_rows", th_sql_rows(c, "SELECT * FROM rowlock.jobs ORDER BY id"));
    json_object_set_new(s, "bodies",
                        th_sql_rows(c, "SELECT * FROM rowlock.job_bodies ORDER BY job_id"));
    json_object_set_new(
        s, "attempts", th_sql_rows(c, "SELECT * FROM rowlock.job_attempts ORDER BY job_id, fence"));
    char *text = json_dumps(s, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(s);
    return text;
}

/* Heartbeat, complete and fail of a live lease, each with its member unencodable. */
static void lease_members_are_500_and_write_nothing(void **state)
{
    (void)state;
    char path[3][96], body[3][160];
    const char *verb[] = {"", "/complete", "/fail"};
    const char *member[] = {"progress", "result", "error"};
    for (int i = 0; i < 3; i++) {
        snprintf(path[i], sizeof(path[i]), "/queues/q/leases/%" PRId64 "%s", job[0], verb[i]);
        snprintf(body[i], sizeof(body[i]), "{\"owner\":\"w1\",\"fence\":%" PRId64 ",\"%s\":%s}",
                 fence[0], member[i], MARKED);
    }
    const struct th_bad bad[] = {
        {"PATCH", path[0], "application/json", body[0], 500, "internal_error"},
        {"POST", path[1], "application/json", body[1], 500, "internal_error"},
        {"POST", path[2], "application/json", body[2], 500, "internal_error"},
    };
    th_expect_problems(th_svc.port, snapshot, bad, N(bad));
}

/* A settlement whose second item's result is unencodable settles neither item. */
static void settlement_result_is_500_and_settles_nothing(void **state)
{
    (void)state;
    char body[320];
    snprintf(body, sizeof(body),
             "{\"owner\":\"w1\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":%" PRId64
             ",\"result\":1},{\"job_id\":%" PRId64 ",\"fence\":%" PRId64 ",\"result\":%s}]}",
             job[0], fence[0], job[1], fence[1], MARKED);
    const struct th_bad bad[] = {
        {"POST", "/queues/q/leases:complete", "application/json", body, 500, "internal_error"},
    };
    th_expect_problems(th_svc.port, snapshot, bad, N(bad));
}

/* One job, and a batch whose second job's payload is unencodable: no job is enqueued. */
static void enqueued_payload_is_500_and_enqueues_nothing(void **state)
{
    (void)state;
    const struct th_bad bad[] = {
        {"POST", "/queues/q/jobs", "application/json", "{\"payload\":" MARKED "}", 500,
         "internal_error"},
        {"POST", "/queues/q/jobs", "application/json",
         "{\"jobs\":[{\"payload\":1},{\"payload\":" MARKED "}]}", 500, "internal_error"},
    };
    th_expect_problems(th_svc.port, snapshot, bad, N(bad));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lease_members_are_500_and_write_nothing),
        cmocka_unit_test(settlement_result_is_500_and_settles_nothing),
        cmocka_unit_test(enqueued_payload_is_500_and_enqueues_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
