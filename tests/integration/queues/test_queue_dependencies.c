/* Jobs that wait for their parents, through the REST API: a DAG enqueued in one request by refs
 * runs in its order (a child is claimable only once every parent succeeded); parents named by id
 * in another queue; a parent already succeeded settles nothing, one failed refuses a child whose
 * policy is cancel (409 parent_failed, nothing enqueued) and counts settled for a child whose
 * policy is run; unknown parents, cycles and bad references are 400 and enqueue nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    (void)state;
    return th_svc_start("qdeps", NULL);
}

/* Claims up to max jobs of queue for owner; their payloads (ints) in out, fences in fences;
 * returns how many. */
static size_t claim(const char *queue, int max, int64_t *ids, int64_t *fences)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"max_jobs\":%d}", max);
    json_t *c = th_svc_call("POST", path, body, 200);
    json_t *leases = json_object_get(c, "leases");
    size_t n = json_array_size(leases);
    for (size_t i = 0; i < n; i++) {
        ids[i] = json_integer_value(json_object_get(json_array_get(leases, i), "job_id"));
        fences[i] = json_integer_value(json_object_get(json_array_get(leases, i), "fence"));
    }
    json_decref(c);
    return n;
}

static void complete(const char *queue, int64_t id, int64_t fence)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases/%lld/complete", queue, (long long)id);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld}", (long long)fence);
    json_decref(th_svc_call("POST", path, body, 200));
}

static const char *state_of(json_t *enq, size_t i)
{
    return json_string_value(
        json_object_get(json_array_get(json_object_get(enq, "jobs"), i), "state"));
}

static int64_t id_of(json_t *enq, size_t i)
{
    return json_integer_value(
        json_object_get(json_array_get(json_object_get(enq, "jobs"), i), "id"));
}

static int has(const int64_t *ids, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

/* a -> b, a -> c, (b, c) -> d: a runs, then b and c, then d once both succeeded. */
static void a_diamond_runs_in_its_order(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/diamond", "{}", 201));
    json_t *e = th_svc_call(
        "POST", "/queues/diamond/jobs",
        "{\"jobs\":[{\"ref\":\"d\",\"payload\":4,\"parents\":[\"b\",\"c\"]},"
        "{\"ref\":\"b\",\"payload\":2,\"parents\":[\"a\"]},{\"ref\":\"a\",\"payload\":1},"
        "{\"ref\":\"c\",\"payload\":3,\"parents\":[\"a\"]}]}",
        201);
    assert_string_equal(state_of(e, 0), "waiting");
    assert_string_equal(state_of(e, 1), "waiting");
    assert_string_equal(state_of(e, 2), "pending");
    assert_string_equal(state_of(e, 3), "waiting");
    int64_t d = id_of(e, 0), b = id_of(e, 1), a = id_of(e, 2), c = id_of(e, 3);
    json_decref(e);
    int64_t ids[8], fences[8];
    assert_int_equal(claim("diamond", 8, ids, fences), 1);
    assert_int_equal(ids[0], a);
    complete("diamond", a, fences[0]);
    size_t n = claim("diamond", 8, ids, fences);
    assert_int_equal(n, 2);
    assert_true(has(ids, n, b) && has(ids, n, c));
    int64_t fb = ids[0] == b ? fences[0] : fences[1], fc = ids[0] == c ? fences[0] : fences[1];
    complete("diamond", b, fb);
    assert_int_equal(claim("diamond", 8, ids, fences), 0); /* d still waits for c */
    assert_int_equal(
        th_svc_sql_intf("SELECT waiting_on FROM rowlock.jobs WHERE id = %lld", (long long)d), 1);
    complete("diamond", c, fc);
    assert_int_equal(claim("diamond", 8, ids, fences), 1);
    assert_int_equal(ids[0], d);
}

/* A parent by id, in another queue; one already succeeded settles nothing. */
static void parents_by_id_across_queues(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/up", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/down", "{}", 201));
    json_t *e =
        th_svc_call("POST", "/queues/up/jobs", "{\"jobs\":[{\"payload\":1},{\"payload\":2}]}", 201);
    int64_t p1 = id_of(e, 0), p2 = id_of(e, 1);
    json_decref(e);
    int64_t ids[4], fences[4];
    assert_int_equal(claim("up", 1, ids, fences), 1);
    complete("up", ids[0], fences[0]); /* p1 succeeded */
    char body[256];
    snprintf(body, sizeof(body), "{\"payload\":9,\"parents\":[%lld,%lld]}", (long long)p1,
             (long long)p2);
    e = th_svc_call("POST", "/queues/down/jobs", body, 201);
    assert_string_equal(json_string_value(json_object_get(e, "state")), "waiting");
    int64_t child = json_integer_value(json_object_get(e, "id"));
    json_decref(e);
    assert_int_equal(
        th_svc_sql_intf("SELECT waiting_on FROM rowlock.jobs WHERE id = %lld", (long long)child),
        1);
    assert_int_equal(claim("down", 4, ids, fences), 0);
    assert_int_equal(claim("up", 1, ids, fences), 1);
    assert_int_equal(ids[0], p2);
    complete("up", p2, fences[0]);
    assert_int_equal(claim("down", 4, ids, fences), 1);
    assert_int_equal(ids[0], child);
}

/* A failed parent: 409 parent_failed for a child that would be cancelled with it (nothing
 * enqueued), a pending child for one whose policy is run. */
static void a_failed_parent_by_policy(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/pf", "{}", 201));
    json_t *e = th_svc_call("POST", "/queues/pf/jobs", "{\"payload\":1,\"max_attempts\":1}", 201);
    int64_t p = json_integer_value(json_object_get(e, "id"));
    json_decref(e);
    int64_t ids[2], fences[2];
    assert_int_equal(claim("pf", 1, ids, fences), 1);
    char path[128], body[256];
    snprintf(path, sizeof(path), "/queues/pf/leases/%lld/fail", (long long)p);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld,\"error\":\"x\"}",
             (long long)fences[0]);
    json_decref(th_svc_call("POST", path, body, 200));
    int64_t before = th_svc_sql_int("SELECT count(*) FROM rowlock.jobs");
    snprintf(body, sizeof(body), "{\"payload\":2,\"parents\":[%lld]}", (long long)p);
    json_t *r = th_svc_call("POST", "/queues/pf/jobs", body, 409);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "parent_failed");
    assert_int_equal(json_integer_value(json_object_get(r, "parent")), p);
    assert_string_equal(json_string_value(json_object_get(r, "parent_state")), "failed");
    json_decref(r);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.jobs"), before);
    snprintf(body, sizeof(body), "{\"payload\":3,\"parents\":[%lld],\"on_parent_failure\":\"run\"}",
             (long long)p);
    e = th_svc_call("POST", "/queues/pf/jobs", body, 201);
    assert_string_equal(json_string_value(json_object_get(e, "state")), "pending");
    json_decref(e);
}

/* Refused before anything is written: an unknown parent, a cycle, a ref of no job. */
static void bad_dependencies_enqueue_nothing(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/bad", "{}", 201));
    int64_t before = th_svc_sql_int("SELECT count(*) FROM rowlock.jobs");
    json_t *r = th_svc_call("POST", "/queues/bad/jobs",
                            "{\"jobs\":[{\"ref\":\"x\",\"payload\":1},"
                            "{\"payload\":2,\"parents\":[\"x\",987654321]}]}",
                            400);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "unknown_parent");
    assert_int_equal(json_integer_value(json_object_get(r, "parent")), 987654321);
    json_decref(r);
    r = th_svc_call("POST", "/queues/bad/jobs",
                    "{\"jobs\":[{\"ref\":\"a\",\"payload\":1,\"parents\":[\"c\"]},"
                    "{\"ref\":\"b\",\"payload\":2,\"parents\":[\"a\"]},"
                    "{\"ref\":\"c\",\"payload\":3,\"parents\":[\"b\"]}]}",
                    400);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "dependency_cycle");
    assert_int_equal(json_array_size(json_object_get(r, "cycle")), 4);
    json_decref(r);
    r = th_svc_call("POST", "/queues/bad/jobs",
                    "{\"jobs\":[{\"payload\":1,\"parents\":[\"nobody\"]}]}", 400);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "invalid_dependencies");
    json_decref(r);
    r = th_svc_call("POST", "/queues/bad/jobs", "{\"payload\":1,\"on_parent_failure\":\"maybe\"}",
                    400);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "invalid_dependencies");
    json_decref(r);
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.jobs"), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_diamond_runs_in_its_order),
        cmocka_unit_test(parents_by_id_across_queues),
        cmocka_unit_test(a_failed_parent_by_policy),
        cmocka_unit_test(bad_dependencies_enqueue_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
