/* THE ROLLING UPGRADE FROM THE LAST RELEASE. A database is filled through the binary of the
 * newest release (db/schema/released/14/RELEASE, built by deploy/local.sh test into
 * build-release-14/; its path in ROWLOCK_TEST_LAST_RELEASE_BINARY): a queue with a pending job
 * and a processing one holding dedupe keys, a job under a live lease, a succeeded and a failed
 * one with attempt history. This build migrates it (--migrate-only, migration 15 on): every job,
 * body, attempt and dedupe key is as it was, and the database still serves builds of schema 12
 * on. A job's body goes with the job whichever build deletes it (migration 16's trigger in place
 * of the foreign key's cascade). Then the release and this build serve it at once, as during a
 * rolling upgrade: each honours the keys held before, the lease taken before is completed with its
 * fence, each reads what the other wrote, a PUT through the release leaves this build's retention
 * and dedupe window in place, and what the release cannot know (a window outliving its job, a job
 * deleted at completion) is answered as documented in docs/operations/upgrades.md. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "schema_fixture.h"

/* The jobs the release left. */
struct filled {
    json_int_t pending;    /* dedupe key k-pending, never claimed */
    json_int_t live;       /* dedupe key k-live, under a live lease of worker-live */
    json_int_t live_fence; /* its fence */
    json_int_t done;       /* failed once, then succeeded */
    json_int_t failed;     /* failed twice: out of attempts */
};

static const char *last_release(void)
{
    const char *p = getenv("ROWLOCK_TEST_LAST_RELEASE_BINARY");
    if (p == NULL || p[0] == '\0' || access(p, X_OK) != 0)
        fail_msg("ROWLOCK_TEST_LAST_RELEASE_BINARY is not set to the last release's binary "
                 "(\"%s\"): deploy/local.sh test builds it into build-release-14/ from the "
                 "commit in db/schema/released/14/RELEASE",
                 p ? p : "");
    return p;
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s", member);
    return json_integer_value(v);
}

static const char *text_at(json_t *j, const char *member)
{
    const char *s = json_string_value(json_object_get(j, member));
    if (s == NULL)
        fail_msg("no string member %s", member);
    return s;
}

/* Enqueues {"n":1} with dedupe key key (or none); returns the answer (a new reference). */
static json_t *enqueue(int port, const char *key, long want)
{
    char body[128];
    if (key != NULL)
        snprintf(body, sizeof(body), "{\"payload\":{\"n\":1},\"dedupe_key\":\"%s\"}", key);
    else
        snprintf(body, sizeof(body), "{\"payload\":{\"n\":1}}");
    return th_call(port, "POST", "/queues/q/jobs", body, want);
}

/* Claims the next job for owner; *fence gets its fence. Returns its id. */
static json_int_t claim(int port, const char *owner, json_int_t *fence)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":1}", owner);
    json_t *r = th_call(port, "POST", "/queues/q/leases", body, 200);
    json_t *lease = json_array_get(json_object_get(r, "leases"), 0);
    assert_non_null(lease);
    json_int_t id = int_at(lease, "job_id");
    *fence = int_at(lease, "fence");
    json_decref(r);
    return id;
}

/* Settles job id's lease (owner, fence) with verb (complete or fail); want: the status. */
static void settle(int port, json_int_t id, const char *owner, json_int_t fence, const char *verb,
                   long want)
{
    char path[128], body[160];
    snprintf(path, sizeof(path), "/queues/q/leases/%" JSON_INTEGER_FORMAT "/%s", id, verb);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"fence\":%" JSON_INTEGER_FORMAT "}", owner,
             fence);
    json_decref(th_call(port, "POST", path, body, want));
}

/* The job's state and attempts through port (state "" when it is not there: 404). */
static void job_state(int port, json_int_t id, char *state, size_t size, json_int_t *attempts)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/q/jobs/%" JSON_INTEGER_FORMAT, id);
    struct th_response r;
    assert_int_equal(th_http(port, "GET", path, NULL, NULL, 0, &r), 0);
    state[0] = '\0';
    *attempts = 0;
    if (r.status == 200) {
        json_t *j = json_loads(r.body, 0, NULL);
        assert_non_null(j);
        snprintf(state, size, "%s", text_at(j, "state"));
        *attempts = int_at(j, "attempts");
        json_decref(j);
    } else {
        th_assert_problem(&r, 404, "job_not_found");
    }
    th_response_free(&r);
}

static void assert_job(int port, json_int_t id, const char *state, json_int_t attempts)
{
    char got[32];
    json_int_t n;
    job_state(port, id, got, sizeof(got), &n);
    assert_string_equal(got, state);
    if (state[0] != '\0')
        assert_int_equal(n, attempts);
}

/* Fills queue q through the release at port. */
static void fill(int port, struct filled *f)
{
    json_decref(th_call(port, "PUT", "/queues/q",
                        "{\"max_attempts\":2,\"lease_seconds\":3600,\"backoff_base_seconds\":0}",
                        201));
    json_int_t fence;
    json_t *r = enqueue(port, NULL, 201);
    f->done = int_at(r, "id");
    json_decref(r);
    r = enqueue(port, NULL, 201);
    f->failed = int_at(r, "id");
    json_decref(r);
    for (int round = 0; round < 2; round++) { /* done: fail, complete; failed: fail, fail */
        for (int k = 0; k < 2; k++) {
            json_int_t id = claim(port, "worker-1", &fence);
            int finish = round == 1 && id == f->done;
            settle(port, id, "worker-1", fence, finish ? "complete" : "fail", 200);
        }
    }
    r = enqueue(port, "k-live", 201);
    f->live = int_at(r, "id");
    json_decref(r);
    assert_int_equal(claim(port, "worker-live", &f->live_fence), f->live);
    r = enqueue(port, "k-pending", 201);
    f->pending = int_at(r, "id");
    json_decref(r);
}

/* Every job, body, attempt and dedupe key of the queue, and the queue's columns of schema 14,
 * as text (the caller frees it). */
static char *queue_rows(PGconn *c)
{
    static const char sql[] =
        "SELECT (SELECT json_agg(j ORDER BY j.id)::text FROM rowlock.jobs j), "
        "(SELECT json_agg(b ORDER BY b.job_id)::text FROM rowlock.job_bodies b), "
        "(SELECT json_agg(a ORDER BY a.job_id, a.fence)::text FROM rowlock.job_attempts a), "
        "(SELECT json_agg(x ORDER BY x.job_id, x.fence)::text FROM rowlock.job_attempt_history "
        "x), "
        "(SELECT json_agg(k ORDER BY k.dedupe_key)::text FROM (SELECT queue_id, dedupe_key, id "
        "FROM rowlock.jobs WHERE dedupe_key IS NOT NULL AND state IN ('pending', 'processing')) "
        "k), "
        "(SELECT json_agg(q ORDER BY q.id)::text FROM (SELECT id, name, max_attempts, "
        "lease_seconds, backoff_base_seconds, backoff_max_seconds, retention_seconds, "
        "created_at, updated_at FROM rowlock.queues) q)";
    PGresult *r = th_sql(c, sql);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    for (int i = 0; i < PQnfields(r); i++)
        fprintf(f, "%s\n", PQgetvalue(r, 0, i));
    fclose(f);
    PQclear(r);
    return out;
}

/* Migrates the database at url with this build, checking that the queue's rows are as they
 * were and that the database still serves builds of schema 12 on. */
static void migrate(PGconn *c, const char *url)
{
    static const char *const migrate_only[] = {"ROWLOCK_MIGRATE_ONLY=true", NULL};
    struct th_service svc;
    char *before = queue_rows(c);
    assert_int_equal(th_service_start(&svc, url, migrate_only), -1);
    assert_int_equal(svc.exit_code, 0);
    assert_true(th_service_logged(&svc, "schema migrated"));
    tsf_assert_all_recorded(c);
    char *after = queue_rows(c);
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(tsf_int(c, "SELECT max(serves_from) FROM rowlock.migrations"), 12);
    assert_int_equal(tsf_int(c, "SELECT version FROM rowlock.schema_version"), 12);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.job_dedupe"), 0);
}

/* Both builds honour the keys held before the upgrade and serve what the other wrote. */
static void both_serve_the_old_rows(int old, int now, const struct filled *f)
{
    const int ports[] = {old, now};
    for (int i = 0; i < 2; i++) {
        json_t *r = enqueue(ports[i], "k-pending", 200);
        assert_int_equal(int_at(r, "id"), f->pending);
        assert_true(json_is_true(json_object_get(r, "duplicate")));
        json_decref(r);
        assert_job(ports[i], f->done, "succeeded", 2);
        assert_job(ports[i], f->failed, "failed", 2);
    }
    json_t *r = enqueue(now, "k-live", 200);
    assert_int_equal(int_at(r, "id"), f->live);
    assert_string_equal(text_at(r, "state"), "processing");
    json_decref(r);
    /* the lease the release handed out is completed through this build with its fence */
    settle(now, f->live, "worker-live", f->live_fence + 1, "complete", 409);
    settle(now, f->live, "worker-live", f->live_fence, "complete", 200);
    assert_job(old, f->live, "succeeded", 1);
    /* the job left pending is run through the release and read through this build */
    json_int_t fence;
    assert_int_equal(claim(old, "worker-1", &fence), f->pending);
    settle(old, f->pending, "worker-1", fence, "complete", 200);
    assert_job(now, f->pending, "succeeded", 1);
}

/* This build's retention and dedupe window, with the release serving beside it. */
static void the_new_settings_during_the_window(int old, int now, PGconn *c)
{
    static const char cfg[] = "{\"max_attempts\":2,\"lease_seconds\":3600,"
                              "\"backoff_base_seconds\":0,\"succeeded_retention_seconds\":0,"
                              "\"dedupe_window_seconds\":3600}";
    json_decref(th_call(now, "PUT", "/queues/q", cfg, 200));
    /* the release's PUT writes the columns it knows: the retention and window stay */
    json_decref(th_call(old, "PUT", "/queues/q",
                        "{\"max_attempts\":3,\"lease_seconds\":3600,\"backoff_base_seconds\":0}",
                        200));
    json_t *q = th_get_json(now, "/queues/q");
    assert_int_equal(int_at(q, "max_attempts"), 3);
    assert_int_equal(int_at(q, "succeeded_retention_seconds"), 0);
    assert_int_equal(int_at(q, "dedupe_window_seconds"), 3600);
    json_decref(q);

    /* a job taken and completed through this build is deleted at completion; its key's window
     * answers for it here; the release, which knows no windows, sees no job and no key */
    json_t *r = enqueue(now, "k-w", 201);
    json_int_t id = int_at(r, "id"), fence;
    json_decref(r);
    assert_int_equal(claim(now, "worker-2", &fence), id);
    settle(now, id, "worker-2", fence, "complete", 200);
    assert_job(old, id, "", 0);
    assert_job(now, id, "", 0);
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %" PRId64,
             (int64_t)id);
    assert_int_equal(tsf_int(c, sql), 0);
    r = enqueue(now, "k-w", 200);
    assert_int_equal(int_at(r, "id"), id);
    assert_string_equal(text_at(r, "state"), "succeeded");
    assert_true(json_is_false(json_object_get(r, "kept")));
    json_decref(r);

    /* a job completed through the release is kept (it deletes nothing; this build's janitor
     * would purge it at its next visit, which this test never lets come), and a key
     * enqueued through this build is held by its window whichever build finished the job */
    r = enqueue(now, "k-x", 201);
    id = int_at(r, "id");
    json_decref(r);
    assert_int_equal(claim(old, "worker-3", &fence), id);
    settle(old, id, "worker-3", fence, "complete", 200);
    assert_job(now, id, "succeeded", 1);
    r = enqueue(now, "k-x", 200);
    assert_int_equal(int_at(r, "id"), id);
    assert_true(json_is_true(json_object_get(r, "kept")));
    json_decref(r);
    /* the windows taken through this build: k-w's and k-x's (k-pending's and k-live's rows,
     * taken with no window, hold their keys only while their jobs are unfinished) */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.job_dedupe WHERE expires_at > now()"),
                     2);
}

/* The jobs the release deletes take their bodies with them: its queue delete (the queues'
 * cascade to the jobs) and its purge know nothing of the trigger that replaced the bodies'
 * foreign key. */
static void the_release_deletes_bodies_too(int old, int now, PGconn *c)
{
    json_decref(th_call(old, "PUT", "/queues/q2",
                        "{\"max_attempts\":1,\"lease_seconds\":3600,\"backoff_base_seconds\":0}",
                        201));
    json_decref(th_call(now, "POST", "/queues/q2/jobs",
                        "{\"jobs\":[{\"payload\":{\"n\":1}},{\"payload\":{\"n\":2}},"
                        "{\"payload\":{\"n\":3}}]}",
                        201));
    /* one job completed through the release, then purged by its janitor once the release sets
     * a retention of a second */
    json_t *r = th_call(old, "POST", "/queues/q2/leases", "{\"owner\":\"w\",\"max_jobs\":1}", 200);
    json_t *lease = json_array_get(json_object_get(r, "leases"), 0);
    char path[128], body[96], job[160], job_body[160];
    json_int_t purged = int_at(lease, "job_id");
    snprintf(path, sizeof(path), "/queues/q2/leases/%" JSON_INTEGER_FORMAT "/complete", purged);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}",
             int_at(lease, "fence"));
    json_decref(r);
    json_decref(th_call(old, "POST", path, body, 200));
    json_decref(th_call(old, "PUT", "/queues/q2",
                        "{\"max_attempts\":1,\"lease_seconds\":3600,\"backoff_base_seconds\":0,"
                        "\"retention_seconds\":1}",
                        200));
    snprintf(job, sizeof(job), "SELECT count(*) FROM rowlock.jobs WHERE id = %" PRId64,
             (int64_t)purged);
    snprintf(job_body, sizeof(job_body),
             "SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %" PRId64, (int64_t)purged);
    assert_int_equal(tsf_int(c, job_body), 1);
    for (int i = 0; i < 500 && tsf_int(c, job) != 0; i++)
        usleep(20 * 1000);
    assert_int_equal(tsf_int(c, job), 0);
    assert_int_equal(tsf_int(c, job_body), 0);
    /* the other two go with their queue, deleted through the release */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.job_bodies b JOIN rowlock.jobs j "
                                "ON j.id = b.job_id JOIN rowlock.queues q ON q.id = j.queue_id "
                                "WHERE q.name = 'q2'"),
                     2);
    json_decref(th_call(old, "DELETE", "/queues/q2", NULL, 200));
    /* no body is left without its job, nor a job without its body */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.job_bodies b WHERE NOT EXISTS "
                                "(SELECT FROM rowlock.jobs j WHERE j.id = b.job_id)"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.jobs j WHERE NOT EXISTS "
                                "(SELECT FROM rowlock.job_bodies b WHERE b.job_id = j.id)"),
                     0);
}

/* Claims through port from queue q3 for owner with a lease of a second; *fence gets its fence,
 * *attempt its attempt. Returns the job's id (0: none claimable). */
static json_int_t claim_briefly(int port, const char *owner, json_int_t *fence, json_int_t *attempt)
{
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":5,\"lease_seconds\":1}", owner);
    json_t *r = th_call(port, "POST", "/queues/q3/leases", body, 200);
    json_t *leases = json_object_get(r, "leases");
    json_int_t id = 0;
    if (json_array_size(leases) > 0) {
        assert_int_equal(json_array_size(leases), 1);
        json_t *lease = json_array_get(leases, 0);
        id = int_at(lease, "job_id");
        *fence = int_at(lease, "fence");
        *attempt = int_at(lease, "attempt");
    }
    json_decref(r);
    return id;
}

/* Waits until a claim through port takes job id over (its lease of a second ran out). */
static json_int_t take_over(int port, const char *owner, json_int_t id, json_int_t *fence,
                            json_int_t *attempt)
{
    json_int_t got = 0;
    for (int i = 0; i < 100 && got == 0; i++) {
        got = claim_briefly(port, owner, fence, attempt);
        if (got == 0)
            usleep(50 * 1000);
    }
    assert_int_equal(got, id);
    return got;
}

/* The count of a state in GET /queues/q3 through port. */
static json_int_t q3_count(int port, const char *state)
{
    json_t *q = th_get_json(port, "/queues/q3");
    json_int_t n = int_at(json_object_get(q, "counts"), state);
    json_decref(q);
    return n;
}

/* Leases go back and forth between the builds: the release claims and lists through its indexes
 * (jobs_claim, jobs_listing), this build through migration 17's (jobs_pending, jobs_leased,
 * jobs_listed), and each takes over a lease the other let run out, with the next fence and
 * attempt; each counts and lists the processing job the other holds. */
static void leases_cross_the_builds(int old, int now)
{
    json_decref(th_call(now, "PUT", "/queues/q3",
                        "{\"max_attempts\":3,\"lease_seconds\":3600,\"backoff_base_seconds\":0}",
                        201));
    json_decref(th_call(now, "POST", "/queues/q3/jobs", "{\"payload\":{\"n\":3}}", 201));
    json_int_t fence, attempt;
    json_int_t id = claim_briefly(now, "w-now", &fence, &attempt);
    assert_true(id > 0);
    assert_int_equal(fence, 1);
    assert_int_equal(attempt, 1);
    for (int i = 0; i < 2; i++) {
        const int port = i == 0 ? old : now;
        assert_int_equal(q3_count(port, "processing"), 1);
        assert_int_equal(q3_count(port, "pending"), 0);
        json_t *l = th_get_json(port, "/queues/q3/jobs?state=processing");
        json_t *jobs = json_object_get(l, "jobs");
        assert_int_equal(json_array_size(jobs), 1);
        assert_int_equal(int_at(json_array_get(jobs, 0), "id"), id);
        json_decref(l);
    }
    /* the release takes over this build's lease, then this build the release's */
    take_over(old, "w-old", id, &fence, &attempt);
    assert_int_equal(fence, 2);
    assert_int_equal(attempt, 2);
    assert_int_equal(q3_count(now, "processing"), 1);
    take_over(now, "w-now", id, &fence, &attempt);
    assert_int_equal(fence, 3);
    assert_int_equal(attempt, 3);
    /* the release's stale fence is refused; this build's completes */
    char path[96], body[96];
    snprintf(path, sizeof(path), "/queues/q3/leases/%" JSON_INTEGER_FORMAT "/complete", id);
    json_decref(th_call(old, "POST", path, "{\"owner\":\"w-old\",\"fence\":2}", 409));
    snprintf(body, sizeof(body), "{\"owner\":\"w-now\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
    json_decref(th_call(now, "POST", path, body, 200));
    for (int i = 0; i < 2; i++) {
        const int port = i == 0 ? old : now;
        assert_int_equal(q3_count(port, "processing"), 0);
        assert_int_equal(q3_count(port, "succeeded"), 1);
        json_t *l = th_get_json(port, "/queues/q3/jobs?state=succeeded");
        assert_int_equal(json_array_size(json_object_get(l, "jobs")), 1);
        json_decref(l);
    }
    /* a queue with a lease held through the release is busy for this build's delete */
    json_decref(th_call(old, "POST", "/queues/q3/jobs", "{\"payload\":{\"n\":4}}", 201));
    json_int_t held = claim_briefly(old, "w-old", &fence, &attempt);
    assert_true(held > 0 && held != id);
    struct th_response busy;
    assert_int_equal(th_http(now, "DELETE", "/queues/q3", NULL, NULL, 0, &busy), 0);
    th_assert_problem(&busy, 409, "queue_busy");
    th_response_free(&busy);
    json_t *d = th_call(now, "DELETE", "/queues/q3?force=true", NULL, 200);
    assert_int_equal(int_at(d, "processing_deleted"), 1);
    json_decref(d);
}

static void release_14_and_this_build_serve_one_database(void **state)
{
    (void)state;
    const char *release = last_release();
    static const char *const fast_janitor[] = {"ROWLOCK_JANITOR_INTERVAL_MS=100", NULL};
    char url[1024];
    struct filled f;
    struct th_service old, now;
    assert_int_equal(th_db_create("rolling14", url, sizeof(url)), 0);
    assert_int_equal(th_service_start_binary(&old, release, url, fast_janitor), 0);
    fill(old.port, &f);
    assert_int_equal(th_service_stop(&old), 0);
    PGconn *c = th_pg(url);
    assert_int_equal(tsf_int(c, "SELECT max(number) FROM rowlock.migrations"), 14);
    migrate(c, url);

    assert_int_equal(th_service_start_binary(&old, release, url, fast_janitor), 0);
    /* this build's janitor waits its interval before its first pass, so it makes none during
     * the test: its purge of a job the release kept where this build keeps none would race the
     * checks below */
    static const char *const slow_janitor[] = {"ROWLOCK_JANITOR_INTERVAL_MS=3600000", NULL};
    assert_int_equal(th_service_start(&now, url, slow_janitor), 0);
    assert_true(th_service_logged(&now, "schema current"));
    both_serve_the_old_rows(old.port, now.port, &f);
    the_new_settings_during_the_window(old.port, now.port, c);
    the_release_deletes_bodies_too(old.port, now.port, c);
    leases_cross_the_builds(old.port, now.port);
    assert_int_equal(th_service_stop(&old), 0);
    assert_int_equal(th_service_stop(&now), 0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_14_and_this_build_serve_one_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
