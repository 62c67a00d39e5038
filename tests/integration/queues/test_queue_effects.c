/* Completion effects: a fenced completion carrying jobs to enqueue (any queue) and messages to
 * produce (any topic, producer sequences honoured) commits them with itself or not at all. A
 * refused completion (a stale fence) enqueues and produces nothing; a repeated one (the same
 * fence, its answer lost) is refused as terminal and adds nothing twice; an effect that cannot
 * be applied refuses the completion too (the lease is still held); effects need the write scope
 * beside work. A consumer's commit carries jobs the same way, applied only when it moves the
 * offset. */
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
    if (th_svc_start("qeffects", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/queues/src", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/mail", "{}", 201));
    json_decref(th_svc_call("PUT", "/queues/audit", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/orders", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/orders/producers/billing", "{}", 201));
    return 0;
}

/* Enqueues one job into src and claims it: its id and fence. */
static int64_t claimed(int64_t *fence)
{
    json_decref(th_svc_call("POST", "/queues/src/jobs", "{\"payload\":{\"order\":9}}", 201));
    json_t *c = th_svc_call("POST", "/queues/src/leases", "{\"owner\":\"w\",\"max_jobs\":1}", 200);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    assert_non_null(l);
    int64_t id = json_integer_value(json_object_get(l, "job_id"));
    *fence = json_integer_value(json_object_get(l, "fence"));
    json_decref(c);
    return id;
}

static int64_t jobs_in(const char *queue)
{
    return th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON q.id = "
                           "j.queue_id WHERE q.name = '%s'",
                           queue);
}

static int64_t messages(void)
{
    return th_svc_sql_int("SELECT count(*) FROM rowlock.topic_messages m JOIN rowlock.topics t "
                          "ON t.id = m.topic_id WHERE t.name = 'orders' AND NOT m.hole");
}

/* The completion's body with effects: two jobs into two queues, a follow-up that names the
 * completing job as its parent, and a message with a producer sequence. */
static void body_of(char *b, size_t size, int64_t fence, int64_t id, int64_t seq)
{
    snprintf(b, size,
             "{\"owner\":\"w\",\"fence\":%lld,\"result\":{\"charged\":true},"
             "\"enqueue\":[{\"queue\":\"mail\",\"payload\":{\"to\":\"ada\"}},"
             "{\"queue\":\"audit\",\"payload\":{\"order\":9},\"parents\":[%lld]},"
             "{\"queue\":\"mail\",\"payload\":{\"to\":\"alan\"},\"priority\":5}],"
             "\"produce\":[{\"topic\":\"orders\",\"producer\":\"billing\",\"key\":\"order-9\","
             "\"value\":{\"paid\":true},\"sequence\":%lld}]}",
             (long long)fence, (long long)id, (long long)seq);
}

static void effects_commit_with_the_completion(void **state)
{
    (void)state;
    int64_t fence, id = claimed(&fence);
    int64_t mail = jobs_in("mail"), audit = jobs_in("audit"), msgs = messages();
    char path[128], body[1024];
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    body_of(body, sizeof(body), fence, id, 1);
    json_t *r = th_svc_call("POST", path, body, 200);
    assert_string_equal(json_string_value(json_object_get(r, "state")), "succeeded");
    json_t *jobs = json_object_get(json_object_get(r, "effects"), "jobs");
    assert_int_equal(json_array_size(jobs), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 1), "queue")),
                        "audit");
    /* its parent, the completing job, succeeded in the same transaction: pending at once */
    assert_string_equal(json_string_value(json_object_get(json_array_get(jobs, 1), "state")),
                        "pending");
    json_t *m = json_array_get(json_object_get(json_object_get(r, "effects"), "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "topic")), "orders");
    assert_string_equal(json_string_value(json_object_get(m, "head")), "advanced");
    json_decref(r);
    assert_int_equal(jobs_in("mail"), mail + 2);
    assert_int_equal(jobs_in("audit"), audit + 1);
    assert_int_equal(messages(), msgs + 1);
    /* the follow-up reads its parent's result */
    int64_t follow = th_svc_sql_intf("SELECT j.id FROM rowlock.jobs j JOIN rowlock.queues q ON "
                                     "q.id = j.queue_id WHERE q.name = 'audit' AND j.parents = "
                                     "ARRAY[%lld]::bigint[]",
                                     (long long)id);
    snprintf(path, sizeof(path), "/queues/audit/jobs/%lld/parents", (long long)follow);
    r = th_svc_call("GET", path, NULL, 200);
    json_t *p = json_array_get(json_object_get(r, "parents"), 0);
    assert_true(json_is_true(json_object_get(json_object_get(p, "result"), "charged")));
    json_decref(r);

    /* the answer lost, the worker sends it again: refused as terminal, nothing added twice */
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    r = th_svc_call("POST", path, body, 409);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "job_terminal");
    json_decref(r);
    assert_int_equal(jobs_in("mail"), mail + 2);
    assert_int_equal(jobs_in("audit"), audit + 1);
    assert_int_equal(messages(), msgs + 1);
}

/* A completion under a fence a later claim replaced is refused: nothing of its effects. */
static void a_stale_fence_applies_no_effect(void **state)
{
    (void)state;
    int64_t fence, id = claimed(&fence);
    /* the lease runs out and another worker takes the job over: the fence moves on */
    th_svc_sql_intf("UPDATE rowlock.jobs SET lease_expires_at = now(), claimable_at = now() "
                    "WHERE id = %lld RETURNING 1",
                    (long long)id);
    json_t *c = th_svc_call("POST", "/queues/src/leases", "{\"owner\":\"w2\",\"max_jobs\":1}", 200);
    assert_int_equal(json_array_size(json_object_get(c, "leases")), 1);
    json_decref(c);
    int64_t mail = jobs_in("mail"), audit = jobs_in("audit"), msgs = messages();
    char path[128], body[1024];
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    body_of(body, sizeof(body), fence, id, 2);
    json_t *r = th_svc_call("POST", path, body, 409);
    const char *code = json_string_value(json_object_get(r, "code"));
    assert_true(strcmp(code, "lease_owner_mismatch") == 0 ||
                strcmp(code, "lease_fence_mismatch") == 0);
    json_decref(r);
    assert_int_equal(jobs_in("mail"), mail);
    assert_int_equal(jobs_in("audit"), audit);
    assert_int_equal(messages(), msgs);
}

/* An effect that cannot be applied (no such queue; no such producer; a parent that names no
 * job) refuses the whole completion: 409 effect_refused, the job still processing under the same
 * lease, which then completes. */
static void a_refused_effect_refuses_the_completion(void **state)
{
    (void)state;
    int64_t fence, id = claimed(&fence);
    int64_t mail = jobs_in("mail"), msgs = messages();
    char path[128], body[1024];
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    const char *bad[][2] = {
        {"\"enqueue\":[{\"queue\":\"mail\",\"payload\":1},{\"queue\":\"nowhere\",\"payload\":2}]",
         "queue_not_found"},
        {"\"enqueue\":[{\"queue\":\"mail\",\"payload\":1}],\"produce\":[{\"topic\":\"orders\","
         "\"producer\":\"nobody\",\"key\":\"k\",\"value\":1}]",
         "producer_not_found"},
        {"\"enqueue\":[{\"queue\":\"mail\",\"payload\":1,\"parents\":[987654321]}]",
         "unknown_parent"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld,%s}", (long long)fence,
                 bad[i][0]);
        json_t *r = th_svc_call("POST", path, body, 409);
        assert_string_equal(json_string_value(json_object_get(r, "code")), "effect_refused");
        assert_string_equal(json_string_value(json_object_get(r, "reason")), bad[i][1]);
        json_decref(r);
        assert_int_equal(th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id = %lld AND "
                                         "state = 'processing' AND fence = %lld",
                                         (long long)id, (long long)fence),
                         1);
        assert_int_equal(jobs_in("mail"), mail);
        assert_int_equal(messages(), msgs);
    }
    /* bad input is a 400 before anything runs */
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%lld,\"enqueue\":[{\"payload\":1}]}",
             (long long)fence);
    json_decref(th_svc_call("POST", path, body, 400));
    snprintf(body, sizeof(body),
             "{\"owner\":\"w\",\"fence\":%lld,\"produce\":[{\"topic\":\"orders\",\"key\":\"k\","
             "\"value\":1,\"sequence\":3}]}",
             (long long)fence);
    json_decref(th_svc_call("POST", path, body, 400)); /* a sequence needs a named producer */
    snprintf(body, sizeof(body),
             "{\"owner\":\"w\",\"fence\":%lld,\"enqueue\":[{\"queue\":\"mail\",\"payload\":1}]}",
             (long long)fence);
    json_decref(th_svc_call("POST", path, body, 200));
    assert_int_equal(jobs_in("mail"), mail + 1);
}

/* A producer sequence already used (a message produced before, by another path) writes nothing
 * again: the effect answers the original's offset as a duplicate. */
static void producer_sequences_are_honoured(void **state)
{
    (void)state;
    json_decref(th_svc_call("POST", "/topics/orders/messages",
                            "{\"producer\":\"billing\",\"key\":\"order-7\",\"value\":1,"
                            "\"sequence\":100}",
                            201));
    int64_t fence, id = claimed(&fence);
    int64_t msgs = messages();
    char path[128], body[512];
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    snprintf(body, sizeof(body),
             "{\"owner\":\"w\",\"fence\":%lld,\"produce\":[{\"topic\":\"orders\",\"producer\":"
             "\"billing\",\"key\":\"order-7\",\"value\":1,\"sequence\":100}]}",
             (long long)fence);
    json_t *r = th_svc_call("POST", path, body, 200);
    json_t *m = json_array_get(json_object_get(json_object_get(r, "effects"), "messages"), 0);
    assert_string_equal(json_string_value(json_object_get(m, "head")), "duplicate");
    json_decref(r);
    assert_int_equal(messages(), msgs);
}

static int64_t consumer_offset(void)
{
    json_t *c = th_svc_call("GET", "/topics/events/consumers/mailer", NULL, 200);
    int64_t off = json_integer_value(json_object_get(c, "offset"));
    json_decref(c);
    return off;
}

/* A consumer's commit carrying jobs: "consume a message, enqueue its work" exactly once. The
 * commit that moves the offset enqueues; the same commit again (its answer lost) moves nothing
 * and enqueues nothing; a stale compare-and-set is refused with nothing enqueued; a refused
 * effect leaves the offset where it was. */
static void a_consumer_commit_enqueues_once(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/topics/events", "{}", 201));
    for (int i = 0; i < 3; i++)
        json_decref(th_svc_call("POST", "/topics/events/messages",
                                "{\"key\":\"k\",\"value\":{\"signup\":true}}", 201));
    json_decref(
        th_svc_call("PUT", "/topics/events/consumers/mailer", "{\"start\":\"beginning\"}", 201));
    int64_t mail = jobs_in("mail");
    const char *commit = "{\"offset\":2,\"expect\":0,\"enqueue\":[{\"queue\":\"mail\","
                         "\"payload\":{\"m\":1}},{\"queue\":\"mail\",\"payload\":{\"m\":2}}]}";
    json_t *r = th_svc_call("POST", "/topics/events/consumers/mailer/commit", commit, 200);
    assert_int_equal(json_integer_value(json_object_get(r, "offset")), 2);
    assert_int_equal(json_array_size(json_object_get(json_object_get(r, "effects"), "jobs")), 2);
    json_decref(r);
    assert_int_equal(jobs_in("mail"), mail + 2);
    /* the same compare-and-set again: a conflict, nothing enqueued */
    json_decref(th_svc_call("POST", "/topics/events/consumers/mailer/commit", commit, 409));
    /* the same offset without expect: a no-op, nothing enqueued */
    r = th_svc_call("POST", "/topics/events/consumers/mailer/commit",
                    "{\"offset\":2,\"enqueue\":[{\"queue\":\"mail\",\"payload\":3}]}", 200);
    assert_true(json_is_null(json_object_get(r, "effects")));
    json_decref(r);
    assert_int_equal(jobs_in("mail"), mail + 2);
    /* a refused effect: the offset stays */
    r = th_svc_call("POST", "/topics/events/consumers/mailer/commit",
                    "{\"offset\":3,\"enqueue\":[{\"queue\":\"nowhere\",\"payload\":3}]}", 409);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "effect_refused");
    json_decref(r);
    assert_int_equal(consumer_offset(), 2);
    assert_int_equal(jobs_in("mail"), mail + 2);
}

/* With tokens: a work token completes, but effects need write as well (403, nothing done). */
static void effects_need_the_write_scope(void **state)
{
    (void)state;
    assert_int_equal(th_svc_teardown(NULL), 0);
    char tokens[] = "/tmp/rowlock-test-fx-tokens-XXXXXX";
    int fd = mkstemp(tokens);
    assert_true(fd >= 0);
    const char *text = "worker-token-0123456789 work\nboth-token-0123456789012 work write\n"
                       "admin-token-01234567890123 admin\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char env_tokens[128];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens);
    const char *env[] = {env_tokens, NULL};
    assert_int_equal(th_svc_run(env), 0);
    const char *admin[] = {"Content-Type: application/json",
                           "Authorization: Bearer admin-token-01234567890123", NULL};
    const char *worker[] = {"Content-Type: application/json",
                            "Authorization: Bearer worker-token-0123456789", NULL};
    const char *both[] = {"Content-Type: application/json",
                          "Authorization: Bearer both-token-0123456789012", NULL};
    struct th_response r;
    const char *job = "{\"payload\":1}";
    assert_int_equal(th_http(th_svc.port, "POST", "/queues/src/jobs", admin, job, strlen(job), &r),
                     0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    const char *claim = "{\"owner\":\"w\",\"max_jobs\":1}";
    assert_int_equal(
        th_http(th_svc.port, "POST", "/queues/src/leases", worker, claim, strlen(claim), &r), 0);
    assert_int_equal(r.status, 200);
    json_t *c = json_loads(r.body, 0, NULL);
    th_response_free(&r);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    int64_t id = json_integer_value(json_object_get(l, "job_id"));
    int64_t fence = json_integer_value(json_object_get(l, "fence"));
    json_decref(c);
    int64_t mail = jobs_in("mail");
    char path[128], body[256];
    snprintf(path, sizeof(path), "/queues/src/leases/%lld/complete", (long long)id);
    snprintf(body, sizeof(body),
             "{\"owner\":\"w\",\"fence\":%lld,\"enqueue\":[{\"queue\":\"mail\",\"payload\":1}]}",
             (long long)fence);
    assert_int_equal(th_http(th_svc.port, "POST", path, worker, body, strlen(body), &r), 0);
    th_assert_problem(&r, 403, "forbidden");
    th_response_free(&r);
    assert_int_equal(jobs_in("mail"), mail);
    assert_int_equal(th_http(th_svc.port, "POST", path, both, body, strlen(body), &r), 0);
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(jobs_in("mail"), mail + 1);
    unlink(tokens);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(effects_commit_with_the_completion),
        cmocka_unit_test(a_stale_fence_applies_no_effect),
        cmocka_unit_test(a_refused_effect_refuses_the_completion),
        cmocka_unit_test(producer_sequences_are_honoured),
        cmocka_unit_test(a_consumer_commit_enqueues_once),
        cmocka_unit_test(effects_need_the_write_scope),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
