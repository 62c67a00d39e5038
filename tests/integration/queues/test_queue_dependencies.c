/* Jobs that wait for their parents, through the REST API: a DAG enqueued in one request by refs
 * runs in its order (a child is claimable only once every parent succeeded); parents named by id
 * in another queue; a parent already succeeded settles nothing, one failed refuses a child whose
 * policy is cancel (409 parent_failed, nothing enqueued) and counts settled for a child whose
 * policy is run; unknown parents, cycles and bad references are 400 and enqueue nothing. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    (void)state;
    static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100",
                                      "ROWLOCK_POLL_INTERVAL_MS=60000", NULL};
    return th_svc_start("qdeps", env);
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

/* A fenced write of owner w (op: complete or fail), the body's other members in more ("" for
 * none, else starting with a comma), answered 200. */
static void settle(const char *queue, const char *op, int64_t id, int64_t fence, const char *more)
{
    char path[128], body[256];
    snprintf(path, sizeof(path), "/queues/%s/leases/%lld/%s", queue, (long long)id, op);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld%s}", (long long)fence, more);
    json_decref(th_svc_call("POST", path, body, 200));
}

static void complete(const char *queue, int64_t id, int64_t fence)
{
    settle(queue, "complete", id, fence, "");
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
    settle("pf", "fail", p, fences[0], ",\"error\":\"x\"");
    char body[256];
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

static int64_t enqueue_one(const char *queue, const char *body, const char *state)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    json_t *e = th_svc_call("POST", path, body, 201);
    if (state != NULL) /* an enqueue answers a job's state when it has parents */
        assert_string_equal(json_string_value(json_object_get(e, "state")), state);
    int64_t id = json_integer_value(json_object_get(e, "id"));
    json_decref(e);
    return id;
}

static void assert_state(int64_t id, const char *state)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.jobs WHERE id = %lld AND state = '%s'",
             (long long)id, state);
    if (th_svc_sql_int(sql) != 1)
        fail_msg("job %lld is not %s", (long long)id, state);
}

/* A chain a -> b -> c -> d, and x (policy run) after b with y after x: a fails for good, so b, c
 * and d are cancelled, each naming the parent that cancelled it; x counts b settled and runs,
 * y waits for x as usual. */
static void a_failure_cascades_by_policy(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/cas", "{}", 201));
    json_t *e = th_svc_call(
        "POST", "/queues/cas/jobs",
        "{\"jobs\":[{\"ref\":\"a\",\"payload\":1,\"max_attempts\":1},"
        "{\"ref\":\"b\",\"payload\":2,\"parents\":[\"a\"]},"
        "{\"ref\":\"c\",\"payload\":3,\"parents\":[\"b\"]},"
        "{\"ref\":\"d\",\"payload\":4,\"parents\":[\"c\"]},"
        "{\"ref\":\"x\",\"payload\":5,\"parents\":[\"b\"],\"on_parent_failure\":\"run\"},"
        "{\"ref\":\"y\",\"payload\":6,\"parents\":[\"x\"]}]}",
        201);
    int64_t a = id_of(e, 0), b = id_of(e, 1), c = id_of(e, 2), d = id_of(e, 3), x = id_of(e, 4),
            y = id_of(e, 5);
    json_decref(e);
    int64_t ids[8], fences[8];
    assert_int_equal(claim("cas", 8, ids, fences), 1);
    assert_int_equal(ids[0], a);
    settle("cas", "fail", a, fences[0], ",\"error\":\"boom\"");
    char path[128];
    assert_state(a, "failed");
    assert_state(b, "cancelled");
    assert_state(c, "cancelled");
    assert_state(d, "cancelled");
    assert_state(x, "pending");
    assert_state(y, "waiting");
    snprintf(path, sizeof(path), "/queues/cas/jobs/%lld", (long long)c);
    json_t *j = th_svc_call("GET", path, NULL, 200);
    json_t *le = json_object_get(j, "last_error");
    assert_true(json_is_true(json_object_get(le, "cancelled")));
    assert_int_equal(json_integer_value(json_object_get(le, "parent_failed")), b);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "parents"), 0)), b);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "children"), 0)), d);
    assert_string_equal(json_string_value(json_object_get(j, "on_parent_failure")), "cancel");
    json_decref(j);
    assert_int_equal(claim("cas", 8, ids, fences), 1);
    assert_int_equal(ids[0], x);
    complete("cas", x, fences[0]);
    assert_state(y, "pending");
}

/* An operator cancels a waiting job (its descendants go with it); deleting a parent's queue
 * cancels the children waiting for it in another queue. */
static void a_cancel_and_a_queue_delete_settle_children(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/top", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/low", "{}", 201));
    int64_t p = enqueue_one("top", "{\"payload\":1}", NULL);
    char body[160], path[128];
    snprintf(body, sizeof(body), "{\"payload\":2,\"parents\":[%lld]}", (long long)p);
    int64_t k1 = enqueue_one("low", body, "waiting");
    snprintf(body, sizeof(body), "{\"payload\":3,\"parents\":[%lld]}", (long long)k1);
    int64_t k2 = enqueue_one("low", body, "waiting");
    snprintf(path, sizeof(path), "/queues/low/jobs/%lld", (long long)k1);
    json_decref(th_svc_call("DELETE", path, NULL, 200));
    assert_state(k1, "cancelled");
    assert_state(k2, "cancelled");
    snprintf(body, sizeof(body), "{\"payload\":4,\"parents\":[%lld]}", (long long)p);
    int64_t k3 = enqueue_one("low", body, "waiting");
    json_decref(th_svc_call("DELETE", "/queues/top?force=true", NULL, 200));
    assert_state(k3, "cancelled");
}

/* A child reads its parents' results with one GET, in the order it named them; the purge keeps
 * a parent (here: a queue keeping no succeeded job) until its child has finished. */
static void a_child_reads_its_parents_results(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/res",
                            "{\"succeeded_retention_seconds\":0,\"failed_retention_seconds\":60}",
                            201));
    json_t *e =
        th_svc_call("POST", "/queues/res/jobs",
                    "{\"jobs\":[{\"ref\":\"p\",\"payload\":1},{\"ref\":\"q\",\"payload\":2},"
                    "{\"payload\":3,\"parents\":[\"q\",\"p\"]}]}",
                    201);
    int64_t p = id_of(e, 0), q = id_of(e, 1), k = id_of(e, 2);
    json_decref(e);
    int64_t ids[4], fences[4];
    assert_int_equal(claim("res", 4, ids, fences), 2);
    for (int i = 0; i < 2; i++) {
        char result[64];
        snprintf(result, sizeof(result), ",\"result\":{\"from\":%lld}", (long long)ids[i]);
        settle("res", "complete", ids[i], fences[i], result);
    }
    assert_state(p, "succeeded"); /* kept for its child */
    char path[128];
    snprintf(path, sizeof(path), "/queues/res/jobs/%lld/parents", (long long)k);
    json_t *r = th_svc_call("GET", path, NULL, 200);
    json_t *ps = json_object_get(r, "parents");
    assert_int_equal(json_array_size(ps), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ps, 0), "id")), q);
    assert_int_equal(json_integer_value(
                         json_object_get(json_object_get(json_array_get(ps, 1), "result"), "from")),
                     p);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ps, 1), "state")),
                        "succeeded");
    assert_true(json_is_null(json_object_get(r, "next")));
    json_decref(r);
    snprintf(path, sizeof(path), "/queues/res/jobs/%lld/parents?limit=1", (long long)k);
    r = th_svc_call("GET", path, NULL, 200);
    assert_int_equal(json_array_size(json_object_get(r, "parents")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "next")), 1);
    json_decref(r);
    json_decref(th_svc_call("GET", "/queues/res/jobs/987654321/parents", NULL, 404));
    /* the purge keeps the parents while their child is unfinished: a plain job that failed
     * long ago, purged by the same visit, says the visit happened */
    int64_t plain = enqueue_one("res", "{\"payload\":9,\"max_attempts\":1}", NULL);
    assert_int_equal(claim("res", 4, ids, fences), 2); /* the child and the plain job */
    int64_t fp = ids[0] == plain ? fences[0] : fences[1];
    settle("res", "fail", plain, fp, "");
    th_svc_sql_int("WITH b AS (UPDATE rowlock.jobs SET finished_at = now() - interval '30 days' "
                   "WHERE state IN ('succeeded', 'failed') RETURNING 1), u AS (UPDATE "
                   "rowlock.upkeep SET due_at = now() WHERE family = 'queues' RETURNING 1) "
                   "SELECT count(*) FROM b");
    for (int i = 0; i < 200 && th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id = %lld",
                                               (long long)plain) > 0;
         i++)
        usleep(50000);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id = %lld", (long long)plain), 0);
    assert_int_equal(th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id IN (%lld, %lld)",
                                     (long long)p, (long long)q),
                     2);
}

struct waiter {
    const char *queue;
    int64_t claimed; /* the job the long-poll got, 0: none */
    double answered; /* when (th_now) */
};

static void *long_poll(void *arg)
{
    struct waiter *w = arg;
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", w->queue);
    json_t *c =
        th_svc_call("POST", path, "{\"owner\":\"lp\",\"max_jobs\":1,\"wait_seconds\":20}", 200);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    w->claimed = l ? json_integer_value(json_object_get(l, "job_id")) : 0;
    w->answered = th_now();
    json_decref(c);
    return NULL;
}

/* A claim long-polling the child's queue is answered with the child when its parent's completion
 * releases it, in another queue: the service re-checks only every 60 s here, so without the
 * release's wake-up the claim would find the child only as its 20 s wait ends (it looks once
 * more then). Answered in the first half of its wait, it was woken (typically in milliseconds). */
static void a_release_wakes_the_childs_claims(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/wkp", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/wkc", "{}", 201));
    int64_t p = enqueue_one("wkp", "{\"payload\":1}", NULL);
    char body[160];
    snprintf(body, sizeof(body), "{\"payload\":2,\"parents\":[%lld]}", (long long)p);
    int64_t k = enqueue_one("wkc", body, "waiting");
    struct waiter w = {"wkc", 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, long_poll, &w), 0);
    usleep(500000);
    int64_t ids[2], fences[2];
    assert_int_equal(claim("wkp", 1, ids, fences), 1);
    complete("wkp", p, fences[0]);
    double completed = th_now();
    pthread_join(t, NULL);
    assert_int_equal(w.claimed, k);
    assert_true(w.answered - completed < 10.0);
}

/* A parent that fails in a queue keeping no failed jobs is kept all the same (its children may
 * still read it), and its child is cancelled; a parent whose last lease runs out (the janitor
 * fails it) cancels its child too. */
static void a_deleting_queue_and_an_expiry_settle_children(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/dropf", "{\"failed_retention_seconds\":0}", 201));
    json_t *e =
        th_svc_call("POST", "/queues/dropf/jobs",
                    "{\"jobs\":[{\"ref\":\"p\",\"payload\":1,\"max_attempts\":1},"
                    "{\"payload\":2,\"parents\":[\"p\"]},{\"payload\":3,\"max_attempts\":1}]}",
                    201);
    int64_t p = id_of(e, 0), k = id_of(e, 1), plain = id_of(e, 2);
    json_decref(e);
    int64_t ids[4], fences[4];
    assert_int_equal(claim("dropf", 4, ids, fences), 2);
    for (int i = 0; i < 2; i++)
        settle("dropf", "fail", ids[i], fences[i], "");
    assert_state(p, "failed"); /* kept: it has a child */
    assert_state(k, "cancelled");
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id = %lld", (long long)plain), 0);

    json_decref(th_svc_call("PUT", "/queues/exp", "{}", 201));
    e = th_svc_call("POST", "/queues/exp/jobs",
                    "{\"jobs\":[{\"ref\":\"p\",\"payload\":1,\"max_attempts\":1},"
                    "{\"payload\":2,\"parents\":[\"p\"]}]}",
                    201);
    p = id_of(e, 0);
    k = id_of(e, 1);
    json_decref(e);
    assert_int_equal(claim("exp", 4, ids, fences), 1);
    th_svc_sql_intf("UPDATE rowlock.jobs SET lease_expires_at = now() - interval '1 s', "
                    "claimable_at = now() - interval '1 s' WHERE id = %lld RETURNING 1",
                    (long long)p);
    for (int i = 0; i < 200 && th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id = %lld "
                                               "AND state = 'cancelled'",
                                               (long long)k) == 0;
         i++)
        usleep(50000);
    assert_state(p, "failed");
    assert_state(k, "cancelled");
}

/* A job with parents may not hold a dedupe key: 400, nothing enqueued. */
static void a_waiting_job_holds_no_dedupe_key(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/dd", "{}", 201));
    int64_t before = th_svc_sql_int("SELECT count(*) FROM rowlock.jobs");
    json_t *r = th_svc_call("POST", "/queues/dd/jobs",
                            "{\"jobs\":[{\"ref\":\"a\",\"payload\":1},"
                            "{\"payload\":2,\"parents\":[\"a\"],\"dedupe_key\":\"k\"}]}",
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
        cmocka_unit_test(a_failure_cascades_by_policy),
        cmocka_unit_test(a_cancel_and_a_queue_delete_settle_children),
        cmocka_unit_test(a_child_reads_its_parents_results),
        cmocka_unit_test(a_deleting_queue_and_an_expiry_settle_children),
        cmocka_unit_test(a_waiting_job_holds_no_dedupe_key),
        cmocka_unit_test(a_release_wakes_the_childs_claims),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
