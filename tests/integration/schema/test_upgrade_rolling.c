/* THE ROLLING UPGRADE FROM THE LAST RELEASE. A database is filled through the binary of the
 * newest release (db/schema/released/17/RELEASE, built by deploy/local.sh test into
 * build-release-17/; its path in ROWLOCK_TEST_LAST_RELEASE_BINARY): a queue with a pending job
 * and a processing one holding dedupe keys, a job under a live lease, a succeeded and a failed
 * one with attempt history, a job cancelled (failed, marked cancelled, as the release cancels)
 * and a job deleted at completion whose dedupe window outlives it.
 * This build migrates it (--migrate-only, migrations 18 (the contract of migration 17) to 20):
 * every job, body, attempt and dedupe key is as it was (but the cancelled job, whose state is
 * now cancelled), the claim and listing indexes over every
 * state and the jobs' foreign key to their queue are gone, and the database serves builds of schema
 * 17 on. Then the release and this build serve it at once, as during a rolling upgrade: each
 * honours the keys held before, the lease taken before is completed with its fence, each reads
 * what the other wrote, leases go back and forth between them, a queue deleted through either
 * takes every job, body and attempt with it (the trigger queue_jobs_gone in place of the foreign
 * key's cascade), enqueues through both racing the queue's delete leave no job without its
 * queue, and a queue paused through this build (migration 19) stays paused through the release's
 * PUT, though the release, which knows no pause, hands out its jobs. */
#include <inttypes.h>
#include <pthread.h>
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
    json_int_t gone;       /* queue qd, dedupe key k-gone: deleted at completion, its window held */
    json_int_t cancelled;  /* cancelled while pending: failed with last_error {"cancelled": true} */
};

static const char *last_release(void)
{
    const char *p = getenv("ROWLOCK_TEST_LAST_RELEASE_BINARY");
    if (p == NULL || p[0] == '\0' || access(p, X_OK) != 0)
        fail_msg("ROWLOCK_TEST_LAST_RELEASE_BINARY is not set to the last release's binary "
                 "(\"%s\"): deploy/local.sh test builds it into build-release-17/ from the "
                 "commit in db/schema/released/17/RELEASE",
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

/* Claims the next job of queue for owner; *fence gets its fence. Returns its id. */
static json_int_t claim_in(int port, const char *queue, const char *owner, json_int_t *fence)
{
    char path[96], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":1}", owner);
    json_t *r = th_call(port, "POST", path, body, 200);
    json_t *lease = json_array_get(json_object_get(r, "leases"), 0);
    assert_non_null(lease);
    json_int_t id = int_at(lease, "job_id");
    *fence = int_at(lease, "fence");
    json_decref(r);
    return id;
}

static json_int_t claim(int port, const char *owner, json_int_t *fence)
{
    return claim_in(port, "q", owner, fence);
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
    r = enqueue(port, NULL, 201);
    f->cancelled = int_at(r, "id");
    json_decref(r);
    char cancel[96];
    snprintf(cancel, sizeof(cancel), "/queues/q/jobs/%" JSON_INTEGER_FORMAT, f->cancelled);
    json_decref(th_call(port, "DELETE", cancel, NULL, 200));
    json_decref(th_call(port, "PUT", "/queues/qd",
                        "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}", 201));
    r = th_call(port, "POST", "/queues/qd/jobs", "{\"payload\":1,\"dedupe_key\":\"k-gone\"}", 201);
    f->gone = int_at(r, "id");
    json_decref(r);
    r = th_call(port, "POST", "/queues/qd/leases", "{\"owner\":\"w\",\"max_jobs\":1}", 200);
    json_t *lease = json_array_get(json_object_get(r, "leases"), 0);
    assert_int_equal(int_at(lease, "job_id"), f->gone);
    char path[96], body[96];
    snprintf(path, sizeof(path), "/queues/qd/leases/%" JSON_INTEGER_FORMAT "/complete", f->gone);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}",
             int_at(lease, "fence"));
    json_decref(r);
    json_decref(th_call(port, "POST", path, body, 200));
}

/* A queue (q) with a limit of any kind. */
#define QUEUE_LIMITS_SET                                                                           \
    "num_nonnulls(q.concurrency_limit, q.key_concurrency_limit, q.rate_limit, q.key_rate_limit) "  \
    "> 0"

/* Every job, body, attempt, dedupe key and window, and every queue, as text (the caller frees
 * it). */
static char *queue_rows(PGconn *c)
{
    static const char sql[] =
        /* (a job cancelled the old way takes the state of its own: checked on its own) */
        "SELECT (SELECT json_agg((to_jsonb(j) - ARRAY['concurrency_key', 'parents', 'waiting_on', "
        "'children', 'on_parent_failure']) || jsonb_build_object('state', "
        "CASE WHEN j.state = 'cancelled' THEN 'failed' ELSE j.state END) ORDER BY j.id)::text "
        "FROM rowlock.jobs j), "
        "(SELECT json_agg(b ORDER BY b.job_id)::text FROM rowlock.job_bodies b), "
        "(SELECT json_agg(a ORDER BY a.job_id, a.fence)::text FROM rowlock.job_attempts a), "
        "(SELECT json_agg(x ORDER BY x.job_id, x.fence)::text FROM rowlock.job_attempt_history "
        "x), "
        "(SELECT json_agg(d ORDER BY d.queue_id, d.dedupe_key)::text FROM rowlock.job_dedupe d), "
        /* (the columns added since are checked on their own) */
        "(SELECT json_agg(to_jsonb(q) - ARRAY['paused_at', 'concurrency_limit', "
        "'key_concurrency_limit', 'rate_limit', 'rate_period_seconds', 'rate_burst', "
        "'key_rate_limit', 'key_rate_period_seconds', 'key_rate_burst'] ORDER BY q.id)::text "
        "FROM rowlock.queues q)";
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

/* Migrates the database at url with this build, checking that the queues' rows are as they
 * were, that what the contract removes is gone and that the database serves builds of schema 17
 * on. */
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
    assert_int_equal(tsf_int(c, "SELECT max(serves_from) FROM rowlock.migrations"), 17);
    assert_int_equal(tsf_int(c, "SELECT version FROM rowlock.schema_version"), 17);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_indexes WHERE schemaname = 'rowlock' "
                                "AND indexname IN ('jobs_claim', 'jobs_listing')"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM pg_constraint WHERE conrelid = "
                                "'rowlock.jobs'::regclass AND contype = 'f'"),
                     0);
    /* migration 20: the job cancelled the old way is cancelled */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.jobs WHERE state = 'cancelled'"), 1);
    /* migration 19: every queue runs */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.queues WHERE paused_at IS NULL"),
                     tsf_int(c, "SELECT count(*) FROM rowlock.queues"));
    /* migration 21: no job has a concurrency key, no queue a limit, no key limits of its own */
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.jobs WHERE concurrency_key IS NOT "
                                "NULL"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.queues q WHERE " QUEUE_LIMITS_SET),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.queue_keys"), 0);
    /* migration 22: no job waits, none has parents or children */
    assert_int_equal(tsf_int(c,
                             "SELECT count(*) FROM rowlock.jobs WHERE state = 'waiting' OR "
                             "num_nonnulls(parents, waiting_on, children, on_parent_failure) > 0"),
                     0);
}

/* A queue paused through this build: its claims hand out nothing, the release's PUT leaves the
 * pause in place, and the release, which knows no pause, still hands out its jobs (as
 * docs/operations/upgrades.md says); resumed, this build's claims take them again. */
static void a_pause_during_the_window(int old, int now)
{
    json_decref(th_call(now, "PUT", "/queues/qp", "{}", 201));
    json_decref(th_call(now, "POST", "/queues/qp/jobs",
                        "{\"jobs\":[{\"payload\":1},{\"payload\":2}]}", 201));
    json_decref(th_call(now, "POST", "/queues/qp/pause", NULL, 200));
    json_decref(th_call(old, "PUT", "/queues/qp", "{\"max_attempts\":3}", 200));
    json_t *q = th_get_json(now, "/queues/qp");
    assert_true(json_is_true(json_object_get(q, "paused")));
    assert_int_equal(int_at(q, "max_attempts"), 3);
    json_decref(q);
    json_t *r = th_call(now, "POST", "/queues/qp/leases", "{\"owner\":\"w\",\"max_jobs\":5}", 200);
    assert_int_equal(json_array_size(json_object_get(r, "leases")), 0);
    json_decref(r);
    r = th_call(old, "POST", "/queues/qp/leases", "{\"owner\":\"w\",\"max_jobs\":1}", 200);
    assert_int_equal(json_array_size(json_object_get(r, "leases")), 1);
    json_decref(r);
    json_decref(th_call(now, "POST", "/queues/qp/resume", NULL, 200));
    r = th_call(now, "POST", "/queues/qp/leases", "{\"owner\":\"w\",\"max_jobs\":5}", 200);
    assert_int_equal(json_array_size(json_object_get(r, "leases")), 1);
    json_decref(r);
    json_decref(th_call(now, "DELETE", "/queues/qp?force=true", NULL, 200));
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
        assert_job(ports[i], f->cancelled, "cancelled", 0);
        /* the window of the job the release deleted as it ended answers for it */
        r = th_call(ports[i], "POST", "/queues/qd/jobs",
                    "{\"payload\":2,\"dedupe_key\":\"k-gone\"}", 200);
        assert_int_equal(int_at(r, "id"), f->gone);
        assert_string_equal(text_at(r, "state"), "succeeded");
        assert_true(json_is_false(json_object_get(r, "kept")));
        json_decref(r);
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

/* A queue created through one build, with a job in each state (pending, processing, succeeded,
 * failed with attempt history), deleted through the other with force: every job, body and
 * attempt goes with it, whichever build deletes it (the jobs by the trigger queue_jobs_gone,
 * their bodies by job_bodies_gone). */
static void queue_deletes_take_every_job(int old, int now, PGconn *c)
{
    for (int i = 0; i < 2; i++) {
        const int maker = i == 0 ? now : old, deleter = i == 0 ? old : now;
        json_decref(th_call(maker, "PUT", "/queues/q2",
                            "{\"max_attempts\":2,\"lease_seconds\":3600,"
                            "\"backoff_base_seconds\":0}",
                            201));
        char *qid = NULL;
        PGresult *r = th_sql(c, "SELECT id FROM rowlock.queues WHERE name = 'q2'");
        qid = strdup(PQgetvalue(r, 0, 0));
        PQclear(r);
        json_decref(th_call(maker, "POST", "/queues/q2/jobs",
                            "{\"jobs\":[{\"payload\":1,\"priority\":3},{\"payload\":2,"
                            "\"priority\":2},{\"payload\":3,\"priority\":1},{\"payload\":4}]}",
                            201));
        json_int_t fence, id;
        id = claim_in(maker, "q2", "w", &fence); /* fails, then runs again: attempt history */
        char path[128], body[128];
        snprintf(path, sizeof(path), "/queues/q2/leases/%" JSON_INTEGER_FORMAT "/fail", id);
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
        json_decref(th_call(maker, "POST", path, body, 200));
        assert_int_equal(claim_in(deleter, "q2", "w", &fence), id);
        snprintf(path, sizeof(path), "/queues/q2/leases/%" JSON_INTEGER_FORMAT "/fail", id);
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
        json_decref(th_call(deleter, "POST", path, body, 200)); /* failed for good */
        id = claim_in(maker, "q2", "w", &fence);
        snprintf(path, sizeof(path), "/queues/q2/leases/%" JSON_INTEGER_FORMAT "/complete", id);
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence);
        json_decref(th_call(maker, "POST", path, body, 200));
        claim_in(maker, "q2", "w", &fence); /* processing */
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "SELECT (SELECT count(*) FROM rowlock.jobs WHERE queue_id = %s) + "
                 "(SELECT count(*) FROM rowlock.job_bodies b WHERE NOT EXISTS (SELECT FROM "
                 "rowlock.jobs j WHERE j.id = b.job_id AND j.queue_id <> %s)) + "
                 "(SELECT count(*) FROM rowlock.job_attempts a WHERE NOT EXISTS (SELECT FROM "
                 "rowlock.jobs j WHERE j.id = a.job_id AND j.queue_id <> %s))",
                 qid, qid, qid);
        assert_int_equal(tsf_int(c, sql), 4 + 4 + 1);
        json_t *d = th_call(deleter, "DELETE", "/queues/q2?force=true", NULL, 200);
        assert_int_equal(int_at(d, "processing_deleted"), 1);
        json_decref(d);
        assert_int_equal(tsf_int(c, sql), 0);
        free(qid);
    }
}

/* Enqueues through one build while the other deletes the queue, over and over. */
struct racer {
    int port;
    int stop;
    int created; /* 201s */
};

static void *enqueuer(void *arg)
{
    struct racer *e = arg;
    static const char *const json[] = {"Content-Type: application/json", NULL};
    static const char body[] = "{\"jobs\":[{\"payload\":1},{\"payload\":2},{\"payload\":3}]}";
    while (!__atomic_load_n(&e->stop, __ATOMIC_SEQ_CST)) {
        struct th_response r;
        if (th_http(e->port, "POST", "/queues/qr/jobs", json, body, strlen(body), &r) == 0) {
            if (r.status == 201)
                e->created++;
            else if (r.status != 404)
                fail_msg("an enqueue racing the queue's delete answered %ld: %s", r.status,
                         r.body ? r.body : "");
            th_response_free(&r);
        }
    }
    return NULL;
}

/* The jobs have no foreign key to their queue any more: an enqueue through either build that
 * meets the queue's delete (through either build) either goes in before it, and goes with the
 * queue, or finds no queue (404). No job is left without its queue. */
static void enqueues_racing_deletes_leave_no_orphan(int old, int now, PGconn *c)
{
    struct racer e[2] = {{old, 0, 0}, {now, 0, 0}};
    pthread_t t[2];
    json_decref(th_call(now, "PUT", "/queues/qr", "{}", 201));
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, enqueuer, &e[i]), 0);
    for (int round = 0; round < 40; round++) {
        usleep(20 * 1000);
        const int port = round % 2 ? old : now;
        json_decref(th_call(port, "DELETE", "/queues/qr?force=true", NULL, 200));
        json_decref(th_call(round % 3 ? now : old, "PUT", "/queues/qr", "{}", 201));
    }
    for (int i = 0; i < 2; i++) {
        __atomic_store_n(&e[i].stop, 1, __ATOMIC_SEQ_CST);
        pthread_join(t[i], NULL);
    }
    assert_true(e[0].created > 0 && e[1].created > 0);
    json_decref(th_call(old, "DELETE", "/queues/qr?force=true", NULL, 200));
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.jobs j WHERE NOT EXISTS "
                                "(SELECT FROM rowlock.queues q WHERE q.id = j.queue_id)"),
                     0);
    assert_int_equal(tsf_int(c, "SELECT count(*) FROM rowlock.job_bodies b WHERE NOT EXISTS "
                                "(SELECT FROM rowlock.jobs j WHERE j.id = b.job_id)"),
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

/* Leases go back and forth between the builds, both claiming and listing through migration 17's
 * partial indexes alone: each takes over a lease the other let run out, with the next fence and
 * attempt, and each counts and lists the processing job the other holds. */
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

static void release_17_and_this_build_serve_one_database(void **state)
{
    (void)state;
    const char *release = last_release();
    char url[1024];
    struct filled f;
    struct th_service old, now;
    assert_int_equal(th_db_create("rolling17", url, sizeof(url)), 0);
    assert_int_equal(th_service_start_binary(&old, release, url, NULL), 0);
    fill(old.port, &f);
    assert_int_equal(th_service_stop(&old), 0);
    PGconn *c = th_pg(url);
    assert_int_equal(tsf_int(c, "SELECT max(number) FROM rowlock.migrations"), 17);
    migrate(c, url);

    assert_int_equal(th_service_start_binary(&old, release, url, NULL), 0);
    assert_int_equal(th_service_start(&now, url, NULL), 0);
    assert_true(th_service_logged(&now, "schema current"));
    both_serve_the_old_rows(old.port, now.port, &f);
    leases_cross_the_builds(old.port, now.port);
    queue_deletes_take_every_job(old.port, now.port, c);
    enqueues_racing_deletes_leave_no_orphan(old.port, now.port, c);
    a_pause_during_the_window(old.port, now.port);
    assert_int_equal(th_service_stop(&old), 0);
    assert_int_equal(th_service_stop(&now), 0);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(release_17_and_this_build_serve_one_database),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
