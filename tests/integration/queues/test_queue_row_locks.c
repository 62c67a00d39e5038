/* The row locks the queue's state changes hold. Another transaction (a second connection standing
 * in for another rowlock process) changes a job and keeps its row lock for a second before it
 * commits; meanwhile rowlock serves a request on the same job:
 *   - a claim skips the locked job (FOR UPDATE SKIP LOCKED in the claim): it answers at once with
 *     the other job, and the locked one is handed out once, to the transaction that held it. A
 *     claim that read its candidates without locking them would wait for the lock, then claim the
 *     job a second time;
 *   - a settlement judges the row as it is once the other transaction committed: the job was
 *     taken over by another owner, and the refusal says lease_owner_mismatch. A settlement's
 *     update takes the row's lock itself and re-checks the fence on the committed row; a lease
 *     that had already run out is refused from the snapshot without waiting. Either way the
 *     refused row is then locked and read (FOR UPDATE in LEASE_REFUSED and in
 *     st_complete_batch's refused), so that the verdict is the takeover's; read from the
 *     statement's snapshot without the lock, the settlement would see its own lease still there
 *     and answer lease_expired.
 * Each case fails when the lock it names is removed from db/leases.c. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define HOLD_S "1" /* how long the other transaction keeps its row lock */

static int setup(void **state)
{
    (void)state;
    return th_svc_start("rowlocks", NULL);
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s", member);
    return json_integer_value(v);
}

static json_int_t enqueue(const char *queue)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    json_t *r = th_svc_call("POST", path, "{\"payload\":{}}", 201);
    json_int_t id = int_at(r, "id");
    json_decref(r);
    return id;
}

/* Runs sql in a transaction of its own on c and leaves it open: the commit is sent along with a
 * sleep of HOLD_S seconds, so the row locks it took are held that long from now, while the
 * caller goes on. Collect with finish_held. */
static void hold_then_commit(PGconn *c, const char *sql)
{
    PQclear(th_sql(c, "BEGIN"));
    PQclear(th_sql(c, sql));
    assert_int_equal(PQsendQuery(c, "SELECT pg_sleep(" HOLD_S "); COMMIT"), 1);
}

static void finish_held(PGconn *c)
{
    PGresult *r;
    while ((r = PQgetResult(c)) != NULL) {
        assert_true(PQresultStatus(r) == PGRES_TUPLES_OK || PQresultStatus(r) == PGRES_COMMAND_OK);
        PQclear(r);
    }
}

/* The other transaction's takeover of job id: a claim by owner, one fence later. */
static void take_over(PGconn *c, json_int_t id, const char *owner)
{
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "UPDATE rowlock.jobs SET state = 'processing', owner = '%s', fence = fence + 1, "
             "attempts = attempts + 1, attempt_no = attempts + 1, attempt_owner = '%s', "
             "attempt_claimed_at = now(), attempt_ended_at = NULL, attempt_outcome = NULL, "
             "lease_expires_at = now() + interval '30 s', "
             "claimable_at = now() + interval '30 s' WHERE id = %" JSON_INTEGER_FORMAT,
             owner, owner, id);
    hold_then_commit(c, sql);
}

static void claim_skips_a_locked_job(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/skip", "{}", 201));
    json_int_t held = enqueue("skip"), other = enqueue("skip");
    PGconn *c = th_pg(th_svc_dburl);
    take_over(c, held, "elsewhere");
    double t0 = th_now();
    json_t *r =
        th_svc_call("POST", "/queues/skip/leases", "{\"owner\":\"here\",\"max_jobs\":2}", 200);
    double waited = th_now() - t0;
    json_t *leases = json_object_get(r, "leases");
    assert_int_equal(json_array_size(leases), 1);
    assert_int_equal(int_at(json_array_get(leases, 0), "job_id"), other);
    json_decref(r);
    assert_true(waited < 0.8); /* it did not wait for the lock */
    finish_held(c);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT owner || ' ' || fence FROM rowlock.jobs WHERE id = %" JSON_INTEGER_FORMAT,
             held);
    PGresult *row = th_sql(c, sql);
    assert_string_equal(PQgetvalue(row, 0, 0), "elsewhere 1"); /* handed out once */
    PQclear(row);
    PQfinish(c);
}

/* Claims the one job of queue for owner "here"; *fence gets its fence. */
static json_int_t claim_here(const char *queue, json_int_t *fence)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    json_t *r = th_svc_call("POST", path, "{\"owner\":\"here\",\"max_jobs\":1}", 200);
    json_t *l = json_array_get(json_object_get(r, "leases"), 0);
    assert_non_null(l);
    json_int_t id = int_at(l, "job_id");
    *fence = int_at(l, "fence");
    json_decref(r);
    return id;
}

static void complete_judges_the_row_under_its_lock(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/one", "{}", 201));
    enqueue("one");
    json_int_t fence, id = claim_here("one", &fence);
    PGconn *c = th_pg(th_svc_dburl);
    take_over(c, id, "elsewhere");
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/one/leases/%" JSON_INTEGER_FORMAT "/complete", id);
    snprintf(body, sizeof(body), "{\"owner\":\"here\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
    static const char *const json_ct[] = {"Content-Type: application/json", NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "POST", path, json_ct, body, strlen(body), &r), 0);
    th_assert_problem(&r, 409, "lease_owner_mismatch");
    th_response_free(&r);
    finish_held(c);
    PQfinish(c);
}

/* Creates queue (with config), claims its one job for "here", waits run_out seconds (0: none),
 * has another transaction take the job over and hold its row lock, and completes the job in a
 * batch meanwhile: the item's verdict must be the takeover's. */
static void batch_complete_under_a_takeover(const char *queue, const char *config,
                                            const char *run_out)
{
    char path[128], body[256];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_decref(th_svc_call("PUT", path, config, 201));
    enqueue(queue);
    json_int_t fence, id = claim_here(queue, &fence);
    PGconn *c = th_pg(th_svc_dburl);
    snprintf(body, sizeof(body), "SELECT pg_sleep(%s)", run_out);
    PQclear(th_sql(c, body));
    take_over(c, id, "elsewhere");
    snprintf(body, sizeof(body),
             "{\"owner\":\"here\",\"items\":[{\"job_id\":%" JSON_INTEGER_FORMAT
             ",\"fence\":%" JSON_INTEGER_FORMAT "}]}",
             id, fence);
    snprintf(path, sizeof(path), "/queues/%s/leases:complete", queue);
    json_t *r = th_svc_call("POST", path, body, 200);
    assert_int_equal(int_at(r, "completed"), 0);
    json_t *item = json_array_get(json_object_get(r, "results"), 0);
    assert_string_equal(json_string_value(json_object_get(item, "status")), "lease_owner_mismatch");
    json_decref(r);
    finish_held(c);
    PQfinish(c);
}

/* The lease is live: the update waits for the takeover's lock, then refuses the item on the
 * committed row. */
static void batch_complete_judges_the_row_under_its_lock(void **state)
{
    (void)state;
    batch_complete_under_a_takeover("batch", "{}", "0");
}

/* The lease ran out before the batch completion came: the update refuses the item from its
 * snapshot at once, and the verdict is read under the row's lock. */
static void batch_refusal_judged_under_the_lock(void **state)
{
    (void)state;
    batch_complete_under_a_takeover("late", "{\"lease_seconds\":1}", "1.2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_skips_a_locked_job),
        cmocka_unit_test(complete_judges_the_row_under_its_lock),
        cmocka_unit_test(batch_complete_judges_the_row_under_its_lock),
        cmocka_unit_test(batch_refusal_judged_under_the_lock),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
