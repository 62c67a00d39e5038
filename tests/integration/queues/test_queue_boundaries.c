/* Every numeric input of every queue route at its edges (th_bounds_check): 0, -1, the documented
 * maximum, maximum + 1, 2^63, 1e400, 1.5, "1", true and null, in each body member, query
 * parameter and path id. Each answer is a 2xx or a 4xx problem (a 400 with the input's code),
 * never a 5xx, and the queue still answers afterwards. The maxima are the ones OpenAPI states;
 * the fenced writes name a real lease, so a value that passed validation meets the protocol. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

static int setup(void **state)
{
    (void)state;
    /* the longest wait allowed is one second here, so that the maximum costs one second */
    const char *env[] = {"ROWLOCK_MAX_WAIT_S=1", NULL};
    if (th_svc_start("qbounds", env) != 0)
        return -1;
    return 0;
}

#define TB(method, path, body, max, code, alive)                                                   \
    {                                                                                              \
        method, path, body, NULL, max, code, alive                                                 \
    }

static void queue_and_job_inputs(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/b", "{}", 201));
    json_decref(th_svc_call("POST", "/queues/b/jobs", "{\"payload\":1}", 201));
    const struct th_bound cases[] = {
        TB("PUT", "/queues/b", "{\"max_attempts\":@V@}", 1000000, "invalid_config", "/queues/b"),
        TB("PUT", "/queues/b", "{\"lease_seconds\":@V@}", 604800, "invalid_config", "/queues/b"),
        TB("PUT", "/queues/b", "{\"backoff_base_seconds\":@V@}", 86400, "invalid_config",
           "/queues/b"),
        TB("PUT", "/queues/b", "{\"backoff_max_seconds\":@V@}", 604800, "invalid_config",
           "/queues/b"),
        TB("PUT", "/queues/b", "{\"retention_seconds\":@V@}", 315360000, "invalid_config",
           "/queues/b"),
        TB("GET", "/queues?limit={V}", NULL, 1000, "invalid_parameter", "/queues"),
        TB("POST", "/queues/b/jobs", "{\"payload\":1,\"priority\":@V@}", 1000000, "invalid_job",
           "/queues/b"),
        TB("POST", "/queues/b/jobs", "{\"payload\":1,\"max_attempts\":@V@}", 1000000, "invalid_job",
           "/queues/b"),
        TB("POST", "/queues/b/jobs", "{\"payload\":1,\"delay_seconds\":@V@}", 315360000,
           "invalid_job", "/queues/b"),
        TB("POST", "/queues/b/jobs", "{\"jobs\":[{\"payload\":1,\"priority\":@V@}]}", 1000000,
           "invalid_job", "/queues/b"),
        TB("GET", "/queues/b/jobs?after={V}", NULL, INT64_MAX, "invalid_parameter", "/queues/b"),
        TB("GET", "/queues/b/jobs?limit={V}", NULL, 1000, "invalid_parameter", "/queues/b"),
        TB("GET", "/queues/b/jobs/{V}", NULL, INT64_MAX, "invalid_parameter", "/queues/b"),
        TB("POST", "/queues/b/jobs/{V}/retry", NULL, INT64_MAX, "invalid_parameter", "/queues/b"),
        TB("DELETE", "/queues/b/jobs/{V}", NULL, INT64_MAX, "invalid_parameter", "/queues/b"),
        TB("POST", "/queues/b/leases", "{\"owner\":\"w\",\"max_jobs\":@V@}", 1000, "invalid_lease",
           "/queues/b"),
        TB("POST", "/queues/b/leases", "{\"owner\":\"w\",\"lease_seconds\":@V@}", 604800,
           "invalid_lease", "/queues/b"),
        TB("POST", "/queues/b/leases", "{\"owner\":\"w\",\"wait_seconds\":@V@}", 1, "invalid_lease",
           "/queues/b"),
    };
    assert_int_equal(th_bounds_check(th_svc.port, cases, N(cases)), 0);
}

static void lease_inputs(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/l", "{}", 201));
    json_t *e = th_svc_call("POST", "/queues/l/jobs", "{\"payload\":1}", 201);
    int64_t id = json_integer_value(json_object_get(e, "id"));
    json_decref(e);
    json_t *c = th_svc_call("POST", "/queues/l/leases", "{\"owner\":\"w\"}", 200);
    int64_t fence = json_integer_value(
        json_object_get(json_array_get(json_object_get(c, "leases"), 0), "fence"));
    json_decref(c);
    char p_hb[64], p_complete[80], p_fail[80], p_handback[80], p_release[80];
    snprintf(p_hb, sizeof(p_hb), "/queues/l/leases/%" PRId64, id);
    snprintf(p_complete, sizeof(p_complete), "%s/complete", p_hb);
    snprintf(p_fail, sizeof(p_fail), "%s/fail", p_hb);
    snprintf(p_handback, sizeof(p_handback), "%s/handback", p_hb);
    snprintf(p_release, sizeof(p_release), "%s/release", p_hb);
    char b_lease[96], b_item_fence[128], b_item_id[128];
    snprintf(b_lease, sizeof(b_lease),
             "{\"owner\":\"w\",\"fence\":%" PRId64 ",\"lease_seconds\":@V@}", fence);
    snprintf(b_item_fence, sizeof(b_item_fence),
             "{\"owner\":\"w\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":@V@}]}", id);
    snprintf(b_item_id, sizeof(b_item_id),
             "{\"owner\":\"w\",\"items\":[{\"job_id\":@V@,\"fence\":%" PRId64 "}]}", fence);
    const struct th_bound cases[] = {
        TB("PATCH", "/queues/l/leases/{V}", "{\"owner\":\"w\",\"fence\":1}", INT64_MAX,
           "invalid_parameter", "/queues/l"),
        TB("PATCH", p_hb, "{\"owner\":\"w\",\"fence\":@V@}", INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("PATCH", p_hb, b_lease, 604800, "invalid_lease", "/queues/l"),
        TB("POST", p_complete, "{\"owner\":\"w\",\"fence\":@V@}", INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("POST", p_fail, "{\"owner\":\"w\",\"fence\":@V@}", INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("POST", p_handback, "{\"owner\":\"w\",\"fence\":@V@}", INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("POST", p_release, "{\"owner\":\"w\",\"fence\":@V@}", INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("POST", "/queues/l/leases/{V}/complete", "{\"owner\":\"w\",\"fence\":1}", INT64_MAX,
           "invalid_parameter", "/queues/l"),
        TB("POST", "/queues/l/leases:complete", b_item_fence, INT64_MAX, "invalid_lease",
           "/queues/l"),
        TB("POST", "/queues/l/leases:complete", b_item_id, INT64_MAX, "invalid_lease", "/queues/l"),
    };
    assert_int_equal(th_bounds_check(th_svc.port, cases, N(cases)), 0);
    /* the lease survived every refused write: it still completes */
    char body[96];
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" PRId64 "}", fence);
    json_decref(th_svc_call("POST", p_complete, body, 200));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(queue_and_job_inputs),
        cmocka_unit_test(lease_inputs),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
