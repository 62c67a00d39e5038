/* Retention per final state and dedupe windows, over HTTP on one service (its janitor every
 * 200 ms): PUT /queues/{q} takes and echoes succeeded_, failed_ and cancelled_retention_seconds
 * and dedupe_window_seconds (a retention left out is retention_seconds), and refuses bad values
 * changing nothing; a retention of 0 deletes the job, its body and its attempt history in the
 * statement that ends it (complete, batch complete, final fail, release of the last attempt, the
 * janitor's expiry, cancel) and its GET says it was not kept, while a queue that keeps its jobs
 * keeps them; a dedupe window answers the key as a duplicate naming the deleted job and how it
 * ended until the window passes (also to an enqueue asking for no window of its own), and the
 * janitor deletes the windows that have passed. Its concurrency is
 * test_queue_dedupe_window_race.c's. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_bad.h"

#define N(a)           (sizeof(a) / sizeof((a)[0]))
#define RETENTION_MAX  315360000
#define WINDOW_MAX     31622400
#define NOT_KEPT       "finished and was not kept"
#define JANITOR_WAIT_S 15.0

static int setup(void **state)
{
    (void)state;
    /* every scrape counts the gauges itself: /metrics and GET agree at once */
    const char *env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=200", "ROWLOCK_METRICS_SYNC_MS=60000", NULL};
    return th_svc_start("retention", env);
}

/* ---- helpers ---- */

static json_int_t num(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* A call whose path is a printf format; want asserted; the answer is the caller's. */
static json_t *call(const char *method, const char *body, long want, const char *fmt, ...)
{
    char path[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    return th_svc_call(method, path, body, want);
}

/* Enqueues body (a job) on queue q; asserts it was created and returns its id. */
static int64_t enqueue(const char *q, const char *body)
{
    json_t *j = call("POST", body, 201, "/queues/%s/jobs", q);
    assert_false(json_is_true(json_object_get(j, "duplicate")));
    int64_t id = num(j, "id");
    json_decref(j);
    return id;
}

/* Claims the one claimable job of q for owner "w" (lease_seconds 0: the queue's); asserts it is
 * job id and returns its fence. */
static int64_t claim(const char *q, int64_t id, int lease_seconds)
{
    char body[96];
    if (lease_seconds > 0)
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"lease_seconds\":%d}", lease_seconds);
    else
        snprintf(body, sizeof(body), "{\"owner\":\"w\"}");
    json_t *j = call("POST", body, 200, "/queues/%s/leases", q);
    json_t *l = json_array_get(json_object_get(j, "leases"), 0);
    assert_int_equal(num(l, "job_id"), id);
    int64_t fence = num(l, "fence");
    json_decref(j);
    return fence;
}

/* POST .../leases/{id}/<verb> by owner "w" with fence and extra members (JSON text after a
 * comma, or ""); asserts 200 and returns the state the answer gives. */
static const char *lease_write(const char *q, int64_t id, const char *verb, int64_t fence,
                               const char *extra, char *state, size_t size)
{
    char body[192];
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" PRId64 "%s%s}", fence,
             extra[0] ? "," : "", extra);
    json_t *j = call("POST", body, 200, "/queues/%s/leases/%" PRId64 "/%s", q, id, verb);
    snprintf(state, size, "%s", str(j, "state"));
    json_decref(j);
    return state;
}

/* Rows of job id in rowlock.jobs, job_bodies and job_attempts together. */
static int64_t job_rows(int64_t id)
{
    return th_svc_sql_intf("SELECT (SELECT count(*) FROM rowlock.jobs WHERE id = %" PRId64 ") + "
                           "(SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %" PRId64 ") + "
                           "(SELECT count(*) FROM rowlock.job_attempts WHERE job_id = %" PRId64 ")",
                           id, id, id);
}

static int64_t history_rows(int64_t id)
{
    return th_svc_sql_intf("SELECT count(*) FROM rowlock.job_attempts WHERE job_id = %" PRId64, id);
}

/* Job id of q is gone: GET is 404 job_not_found saying it was not kept, and no table holds a
 * row of it. */
static void assert_gone(const char *q, int64_t id)
{
    char path[128];
    struct th_response r;
    snprintf(path, sizeof(path), "/queues/%s/jobs/%" PRId64, q, id);
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "job_not_found");
    const char *detail = str(r.json, "detail");
    if (strstr(detail, NOT_KEPT) == NULL)
        fprintf(stderr, "GET %s: the detail does not say it was not kept: %s\n", path, detail);
    assert_non_null(strstr(detail, NOT_KEPT));
    th_response_free(&r);
    assert_int_equal(job_rows(id), 0);
}

/* Job id of q is kept in state (GET 200), with its body. */
static void assert_kept(const char *q, int64_t id, const char *state)
{
    json_t *j = call("GET", NULL, 200, "/queues/%s/jobs/%" PRId64, q, id);
    assert_string_equal(str(j, "state"), state);
    json_decref(j);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %" PRId64, id), 1);
}

/* Jobs deleted as they ended, in final state, as /metrics counts them. */
static double deleted(const char *state)
{
    char series[128];
    snprintf(series, sizeof(series), "rowlock_queue_jobs_deleted_at_end_total{state=\"%s\"}",
             state);
    return th_metric(th_svc.port, series);
}

struct deleted_counts {
    double succeeded, failed, cancelled;
};

static struct deleted_counts deleted_now(void)
{
    return (struct deleted_counts){deleted("succeeded"), deleted("failed"), deleted("cancelled")};
}

/* The counters moved by exactly s, f and c since before. */
static void assert_deleted_since(const struct deleted_counts *before, int s, int f, int c)
{
    struct deleted_counts now = deleted_now();
    assert_int_equal(now.succeeded - before->succeeded, s);
    assert_int_equal(now.failed - before->failed, f);
    assert_int_equal(now.cancelled - before->cancelled, c);
}

/* ---- (a) the configuration ---- */

static void assert_retentions(json_t *q, int succeeded, int failed, int cancelled, int window)
{
    assert_int_equal(num(q, "succeeded_retention_seconds"), succeeded);
    assert_int_equal(num(q, "failed_retention_seconds"), failed);
    assert_int_equal(num(q, "cancelled_retention_seconds"), cancelled);
    assert_int_equal(num(q, "dedupe_window_seconds"), window);
}

static void put_echoes_the_retentions_and_a_left_out_one_is_retention_seconds(void **state)
{
    (void)state;
    json_t *q = th_svc_call("PUT", "/queues/cfg",
                            "{\"retention_seconds\":86400,\"succeeded_retention_seconds\":0,"
                            "\"failed_retention_seconds\":3600,\"cancelled_retention_seconds\":"
                            "315360000,\"dedupe_window_seconds\":31622400}",
                            201);
    assert_retentions(q, 0, 3600, RETENTION_MAX, WINDOW_MAX);
    assert_int_equal(num(q, "retention_seconds"), 86400);
    json_decref(q);
    q = th_svc_get("/queues/cfg");
    assert_retentions(q, 0, 3600, RETENTION_MAX, WINDOW_MAX);
    json_decref(q);
    /* the body is the whole configuration: left out, each follows retention_seconds */
    json_decref(th_svc_call("PUT", "/queues/cfg", "{\"retention_seconds\":7200}", 200));
    q = th_svc_get("/queues/cfg");
    assert_retentions(q, 7200, 7200, 7200, 0);
    json_decref(q);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.queues WHERE name = 'cfg' AND "
                        "succeeded_retention_seconds IS NULL AND failed_retention_seconds "
                        "IS NULL AND cancelled_retention_seconds IS NULL"),
        1);
    json_decref(th_svc_call("PUT", "/queues/cfg",
                            "{\"failed_retention_seconds\":60,\"dedupe_window_seconds\":1}", 200));
    q = th_svc_get("/queues/cfg");
    assert_retentions(q, 604800, 60, 604800, 1);
    json_decref(q);
}

/* Everything a refused PUT or enqueue could change. */
static char *config_snapshot(void)
{
    static const char *const sql[] = {
        "SELECT * FROM rowlock.queues ORDER BY id",
        "SELECT * FROM rowlock.jobs ORDER BY id",
        "SELECT * FROM rowlock.job_dedupe ORDER BY queue_id, dedupe_key",
        "SELECT last_value, is_called FROM rowlock.jobs_id_seq",
    };
    json_t *all = json_pack("{s:o}", "cfg", th_svc_get("/queues/cfg"));
    for (size_t i = 0; i < N(sql); i++)
        json_object_set_new(all, sql[i], th_sql_rows(th_svc_pg(), sql[i]));
    char *text = json_dumps(all, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(all);
    return text;
}

/* Sends body to path and expects 400 code with member in its detail. */
static void expect_refused(const char *method, const char *path, const char *body, const char *code,
                           const char *member)
{
    struct th_response r;
    assert_int_equal(th_bad_send(method, path, "application/json", body, &r), 0);
    const char *detail = str(r.json, "detail");
    int ok =
        r.status == 400 && strcmp(th_problem_code(&r), code) == 0 && strstr(detail, member) != NULL;
    if (!ok)
        fprintf(stderr, "%s %s %s: expected 400 %s naming %s, got %ld %s\n", method, path, body,
                code, member, r.status, r.body ? r.body : "");
    assert_true(ok);
    th_response_free(&r);
}

static const char *const retention_members[] = {
    "succeeded_retention_seconds", "failed_retention_seconds", "cancelled_retention_seconds",
    "dedupe_window_seconds"};
/* Bad values of each (NULL: the maximum + 1). */
static const char *const bad_values[] = {"-1", NULL, "\"60\"", "1.5", "null", "true"};

static void bad_retentions_and_windows_are_refused_changing_nothing(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/cfg",
                            "{\"succeeded_retention_seconds\":10,\"failed_retention_seconds\":20,"
                            "\"cancelled_retention_seconds\":30,\"dedupe_window_seconds\":40}",
                            200));
    char *before = config_snapshot();
    for (size_t m = 0; m < N(retention_members); m++)
        for (size_t v = 0; v < N(bad_values); v++) {
            char over[32], body[128];
            snprintf(over, sizeof(over), "%d", (m < 3 ? RETENTION_MAX : WINDOW_MAX) + 1);
            snprintf(body, sizeof(body), "{\"%s\":%s}", retention_members[m],
                     bad_values[v] ? bad_values[v] : over);
            expect_refused("PUT", "/queues/cfg", body, "invalid_config", retention_members[m]);
            expect_refused("PUT", "/queues/cfg-new", body, "invalid_config", retention_members[m]);
        }
    th_assert_unchanged(config_snapshot, before);
    free(before);
    th_svc_get_problem("/queues/cfg-new", 404, "queue_not_found");
}

/* An enqueue's own window: an integer from 0 to WINDOW_MAX, with a dedupe_key. */
static void bad_enqueue_windows_are_refused_changing_nothing(void **state)
{
    (void)state;
    static const char *const bodies[] = {
        "{\"payload\":1,\"dedupe_window_seconds\":60}",
        "{\"payload\":1,\"dedupe_window_seconds\":0}",
        "{\"payload\":1,\"dedupe_key\":\"k\",\"dedupe_window_seconds\":-1}",
        "{\"payload\":1,\"dedupe_key\":\"k\",\"dedupe_window_seconds\":31622401}",
        "{\"payload\":1,\"dedupe_key\":\"k\",\"dedupe_window_seconds\":\"60\"}",
        "{\"payload\":1,\"dedupe_key\":\"k\",\"dedupe_window_seconds\":1.5}",
        "{\"jobs\":[{\"payload\":1,\"dedupe_key\":\"k\"},{\"payload\":2,"
        "\"dedupe_window_seconds\":5}]}",
    };
    char *before = config_snapshot();
    for (size_t i = 0; i < N(bodies); i++)
        expect_refused("POST", "/queues/cfg/jobs", bodies[i], "invalid_job",
                       "dedupe_window_seconds");
    th_assert_unchanged(config_snapshot, before);
    free(before);
}

/* ---- (b) to (e): retention 0 per final state ---- */

/* A job of q that needed two attempts (the first failed with a retry), claimed again: its
 * fence; it has attempt history then. */
static int64_t second_attempt(const char *q, int64_t id)
{
    char state[16];
    int64_t fence = claim(q, id, 0);
    assert_string_equal(
        lease_write(q, id, "fail", fence, "\"error\":{\"try\":1}", state, sizeof(state)),
        "pending");
    fence = claim(q, id, 0);
    assert_int_equal(history_rows(id), 1);
    return fence;
}

static void succeeded_retention_zero_deletes_each_completed_job(void **state)
{
    (void)state;
    char st[16];
    struct deleted_counts before = deleted_now();
    json_decref(th_svc_call("PUT", "/queues/ret-s",
                            "{\"succeeded_retention_seconds\":0,\"max_attempts\":3,"
                            "\"backoff_base_seconds\":0}",
                            201));
    int64_t a = enqueue("ret-s", "{\"payload\":{\"n\":1}}");
    int64_t fence = second_attempt("ret-s", a);
    assert_string_equal(
        lease_write("ret-s", a, "complete", fence, "\"result\":{\"ok\":true}", st, sizeof(st)),
        "succeeded");
    assert_gone("ret-s", a);
    /* a settlement of several leases */
    int64_t b = enqueue("ret-s", "{\"payload\":{\"n\":2}}");
    int64_t fb = second_attempt("ret-s", b);
    int64_t c = enqueue("ret-s", "{\"payload\":{\"n\":3}}");
    int64_t fc = claim("ret-s", c, 0);
    char body[256];
    snprintf(body, sizeof(body),
             "{\"owner\":\"w\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":%" PRId64
             ",\"result\":1},{\"job_id\":%" PRId64 ",\"fence\":%" PRId64 "}]}",
             b, fb, c, fc);
    json_t *j = th_svc_call("POST", "/queues/ret-s/leases:complete", body, 200);
    assert_int_equal(num(j, "completed"), 2);
    for (size_t i = 0; i < 2; i++)
        assert_string_equal(str(json_array_get(json_object_get(j, "results"), i), "status"),
                            "completed");
    json_decref(j);
    assert_gone("ret-s", b);
    assert_gone("ret-s", c);
    json_t *q = th_svc_get("/queues/ret-s");
    assert_int_equal(num(json_object_get(q, "counts"), "succeeded"), 0);
    json_decref(q);
    assert_deleted_since(&before, 3, 0, 0);
}

/* Polls (up to JANITOR_WAIT_S) until job id has no row. */
static void wait_deleted(int64_t id)
{
    double give_up = th_now() + JANITOR_WAIT_S;
    while (job_rows(id) > 0 && th_now() < give_up)
        usleep(50 * 1000);
}

static void failed_retention_zero_deletes_each_final_failure(void **state)
{
    (void)state;
    char st[16];
    struct deleted_counts before = deleted_now();
    json_decref(th_svc_call("PUT", "/queues/ret-f",
                            "{\"failed_retention_seconds\":0,\"max_attempts\":2,"
                            "\"backoff_base_seconds\":0}",
                            201));
    /* a fail with a retry left keeps it pending; the second, final, deletes it */
    int64_t a = enqueue("ret-f", "{\"payload\":1}");
    assert_string_equal(lease_write("ret-f", a, "fail", claim("ret-f", a, 0), "", st, sizeof(st)),
                        "pending");
    assert_kept("ret-f", a, "pending");
    int64_t fence = claim("ret-f", a, 0);
    assert_int_equal(history_rows(a), 1);
    assert_string_equal(lease_write("ret-f", a, "fail", fence, "", st, sizeof(st)), "failed");
    assert_gone("ret-f", a);
    /* a fail asking for no retry is final */
    int64_t b = enqueue("ret-f", "{\"payload\":2}");
    assert_string_equal(
        lease_write("ret-f", b, "fail", claim("ret-f", b, 0), "\"retry\":false", st, sizeof(st)),
        "failed");
    assert_gone("ret-f", b);
    /* a release spends the attempt: with one left it is pending again, of the last it is final */
    int64_t c = enqueue("ret-f", "{\"payload\":3}");
    assert_string_equal(
        lease_write("ret-f", c, "release", claim("ret-f", c, 0), "", st, sizeof(st)), "pending");
    assert_kept("ret-f", c, "pending");
    assert_string_equal(
        lease_write("ret-f", c, "release", claim("ret-f", c, 0), "", st, sizeof(st)), "failed");
    assert_gone("ret-f", c);
    /* a lease that runs out with no attempt left: the janitor's expiry deletes it */
    int64_t d = enqueue("ret-f", "{\"payload\":4,\"max_attempts\":1}");
    claim("ret-f", d, 1);
    wait_deleted(d);
    assert_gone("ret-f", d);
    assert_deleted_since(&before, 0, 4, 0);
}

static void cancelled_retention_zero_deletes_a_cancelled_job(void **state)
{
    (void)state;
    struct deleted_counts before = deleted_now();
    json_decref(th_svc_call("PUT", "/queues/ret-c", "{\"cancelled_retention_seconds\":0}", 201));
    int64_t a = enqueue("ret-c", "{\"payload\":1}");
    json_decref(call("DELETE", NULL, 200, "/queues/ret-c/jobs/%" PRId64, a));
    assert_gone("ret-c", a);
    /* a running one too: its owner's next write finds no job */
    int64_t b = enqueue("ret-c", "{\"payload\":2}");
    int64_t fence = claim("ret-c", b, 0);
    json_decref(call("DELETE", NULL, 200, "/queues/ret-c/jobs/%" PRId64, b));
    assert_gone("ret-c", b);
    char body[64];
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" PRId64 "}", fence);
    json_decref(call("POST", body, 404, "/queues/ret-c/leases/%" PRId64 "/complete", b));
    assert_deleted_since(&before, 0, 0, 2);
}

static void a_queue_with_retentions_keeps_its_finished_jobs(void **state)
{
    (void)state;
    char st[16];
    struct deleted_counts before = deleted_now();
    json_decref(th_svc_call("PUT", "/queues/ret-d", "{\"max_attempts\":1}", 201));
    int64_t a = enqueue("ret-d", "{\"payload\":1}");
    lease_write("ret-d", a, "complete", claim("ret-d", a, 0), "", st, sizeof(st));
    assert_kept("ret-d", a, "succeeded");
    int64_t b = enqueue("ret-d", "{\"payload\":2}");
    lease_write("ret-d", b, "fail", claim("ret-d", b, 0), "", st, sizeof(st));
    assert_kept("ret-d", b, "failed");
    int64_t c = enqueue("ret-d", "{\"payload\":3}");
    json_decref(call("DELETE", NULL, 200, "/queues/ret-d/jobs/%" PRId64, c));
    json_t *j = call("GET", NULL, 200, "/queues/ret-d/jobs/%" PRId64, c);
    assert_true(json_is_true(json_object_get(json_object_get(j, "last_error"), "cancelled")));
    json_decref(j);
    /* an unknown job of a queue that keeps everything is not said to be deleted */
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/queues/ret-d/jobs/999999", NULL, NULL, 0, &r),
                     0);
    th_assert_problem(&r, 404, "job_not_found");
    assert_null(strstr(str(r.json, "detail"), NOT_KEPT));
    th_response_free(&r);
    assert_deleted_since(&before, 0, 0, 0);
}

/* ---- (f) dedupe windows ---- */

/* Enqueues body on q and asserts a duplicate answer: job id, state, kept. */
static void assert_duplicate(const char *q, const char *body, int64_t id, const char *state,
                             int kept)
{
    json_t *j = call("POST", body, 200, "/queues/%s/jobs", q);
    assert_int_equal(num(j, "id"), id);
    assert_true(json_is_true(json_object_get(j, "duplicate")));
    assert_string_equal(str(j, "state"), state);
    assert_int_equal(json_is_true(json_object_get(j, "kept")), kept);
    json_decref(j);
}

/* The queue's dedupe keys held by a window, as GET and /metrics say (the same). */
static int64_t dedupe_keys(const char *q)
{
    char series[128];
    snprintf(series, sizeof(series), "rowlock_queue_dedupe_keys{queue=\"%s\"}", q);
    json_t *j = call("GET", NULL, 200, "/queues/%s", q);
    int64_t n = num(json_object_get(j, "counts"), "dedupe_keys");
    json_decref(j);
    assert_int_equal(th_metric(th_svc.port, series), n);
    return n;
}

/* A job of q with key enqueued and ended by how: complete, fail (for good) or cancel. */
static int64_t ended(const char *q, const char *key, const char *how)
{
    char body[96], st[16];
    snprintf(body, sizeof(body), "{\"payload\":1,\"dedupe_key\":\"%s\"}", key);
    int64_t id = enqueue(q, body);
    if (strcmp(how, "cancel") == 0)
        json_decref(call("DELETE", NULL, 200, "/queues/%s/jobs/%" PRId64, q, id));
    else
        lease_write(q, id, how, claim(q, id, 0), strcmp(how, "fail") == 0 ? "\"retry\":false" : "",
                    st, sizeof(st));
    assert_gone(q, id);
    return id;
}

static void a_deleted_job_stays_a_duplicate_within_the_window(void **state)
{
    (void)state;
    struct deleted_counts before = deleted_now();
    json_decref(th_svc_call("PUT", "/queues/win",
                            "{\"succeeded_retention_seconds\":0,\"failed_retention_seconds\":0,"
                            "\"cancelled_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    assert_int_equal(dedupe_keys("win"), 0);
    int64_t s = ended("win", "s", "complete");
    int64_t f = ended("win", "f", "fail");
    int64_t c = ended("win", "c", "cancel");
    assert_duplicate("win", "{\"payload\":2,\"dedupe_key\":\"s\"}", s, "succeeded", 0);
    assert_duplicate("win", "{\"payload\":2,\"dedupe_key\":\"f\"}", f, "failed", 0);
    assert_duplicate("win", "{\"payload\":2,\"dedupe_key\":\"c\"}", c, "cancelled", 0);
    int64_t p = enqueue("win", "{\"payload\":1,\"dedupe_key\":\"p\"}");
    assert_duplicate("win", "{\"payload\":2,\"dedupe_key\":\"p\"}", p, "pending", 1);
    /* in a batch too, next to a job created */
    json_t *j =
        th_svc_call("POST", "/queues/win/jobs",
                    "{\"jobs\":[{\"payload\":3,\"dedupe_key\":\"s\"},{\"payload\":4}]}", 201);
    json_t *dup = json_array_get(json_object_get(j, "jobs"), 0);
    assert_int_equal(num(dup, "id"), s);
    assert_true(json_is_true(json_object_get(dup, "duplicate")));
    assert_string_equal(str(dup, "state"), "succeeded");
    assert_true(json_is_false(json_object_get(dup, "kept")));
    assert_true(
        json_is_false(json_object_get(json_array_get(json_object_get(j, "jobs"), 1), "duplicate")));
    json_decref(j);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON "
                        "q.id = j.queue_id WHERE q.name = 'win' AND j.dedupe_key IS NOT NULL"),
        1); /* p's */
    assert_int_equal(dedupe_keys("win"), 4);
    assert_deleted_since(&before, 1, 1, 1);
}

static void an_enqueue_without_a_window_holds_its_key_only_while_unfinished(void **state)
{
    (void)state;
    char st[16];
    json_decref(th_svc_call("PUT", "/queues/win0",
                            "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    const char *body = "{\"payload\":1,\"dedupe_key\":\"z\",\"dedupe_window_seconds\":0}";
    int64_t a = enqueue("win0", body);
    assert_duplicate("win0", body, a, "pending", 1);
    /* the key's row holds it for no window: only while its job is unfinished */
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = 'z' "
                        "AND expires_at > now()"),
        0);
    assert_int_equal(dedupe_keys("win0"), 0);
    lease_write("win0", a, "complete", claim("win0", a, 0), "", st, sizeof(st));
    assert_gone("win0", a);
    int64_t b = enqueue("win0", body);
    assert_true(b != a);
    assert_kept("win0", b, "pending");
}

/* A window opened by an earlier enqueue holds its key for its whole length, also against an
 * enqueue that asks for no window of its own (dedupe_window_seconds 0): one job in the window,
 * and a later duplicate never names the deleted job while another job holds the key. */
static void a_live_window_holds_its_key_against_an_enqueue_without_one(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/live",
                            "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    int64_t a = ended("live", "k", "complete");
    assert_duplicate("live", "{\"payload\":2,\"dedupe_key\":\"k\",\"dedupe_window_seconds\":0}", a,
                     "succeeded", 0);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON "
                        "q.id = j.queue_id WHERE q.name = 'live' AND j.dedupe_key = 'k'"),
        0);
}

/* Makes the window of key in q pass now. */
static void expire_window(const char *q, const char *key)
{
    assert_int_equal(
        th_svc_sql_intf("WITH x AS (UPDATE rowlock.job_dedupe d SET expires_at = now() - "
                        "interval '1 s' FROM rowlock.queues q WHERE q.id = d.queue_id AND "
                        "q.name = '%s' AND d.dedupe_key = '%s' RETURNING 1) "
                        "SELECT count(*) FROM x",
                        q, key),
        1);
}

static void a_passed_window_lets_a_new_job_in(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/pass",
                            "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    /* an enqueue's own window of 2 s (1 s could pass before the duplicate on a busy machine) */
    double t0 = th_now();
    int64_t a =
        enqueue("pass", "{\"payload\":1,\"dedupe_key\":\"one\",\"dedupe_window_seconds\":2}");
    char st[16];
    lease_write("pass", a, "complete", claim("pass", a, 0), "", st, sizeof(st));
    assert_duplicate("pass", "{\"payload\":2,\"dedupe_key\":\"one\"}", a, "succeeded", 0);
    while (th_now() < t0 + 2.2)
        usleep(10 * 1000);
    int64_t a2 = enqueue("pass", "{\"payload\":3,\"dedupe_key\":\"one\"}");
    assert_true(a2 > a);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = 'one' "
                        "AND job_id = %" PRId64 " AND final_state IS NULL AND expires_at > "
                        "now() + interval '3500 s'",
                        a2),
        1);
    lease_write("pass", a2, "complete", claim("pass", a2, 0), "", st, sizeof(st));
    /* a window made to pass by SQL; the count of keys held drops at once */
    ended("pass", "two", "complete");
    int64_t held = dedupe_keys("pass");
    expire_window("pass", "two");
    assert_int_equal(dedupe_keys("pass"), held - 1);
    enqueue("pass", "{\"payload\":4,\"dedupe_key\":\"two\"}");
    /* a passed window whose job is unfinished: the job still holds the key */
    int64_t c = enqueue("pass", "{\"payload\":5,\"dedupe_key\":\"three\"}");
    expire_window("pass", "three");
    assert_duplicate("pass", "{\"payload\":6,\"dedupe_key\":\"three\"}", c, "pending", 1);
}

static void the_janitor_deletes_windows_that_have_passed(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/queues/sweep",
                            "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    ended("sweep", "old", "complete");
    ended("sweep", "young", "complete");
    assert_int_equal(dedupe_keys("sweep"), 2);
    expire_window("sweep", "old");
    assert_int_equal(dedupe_keys("sweep"), 1);
    const char *rows = "SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = 'old'";
    double give_up = th_now() + JANITOR_WAIT_S;
    while (th_svc_sql_int(rows) > 0 && th_now() < give_up)
        usleep(50 * 1000);
    assert_int_equal(th_svc_sql_int(rows), 0);
    assert_int_equal(
        th_svc_sql_intf("SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = 'young'"), 1);
    assert_int_equal(dedupe_keys("sweep"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(put_echoes_the_retentions_and_a_left_out_one_is_retention_seconds),
        cmocka_unit_test(bad_retentions_and_windows_are_refused_changing_nothing),
        cmocka_unit_test(bad_enqueue_windows_are_refused_changing_nothing),
        cmocka_unit_test(succeeded_retention_zero_deletes_each_completed_job),
        cmocka_unit_test(failed_retention_zero_deletes_each_final_failure),
        cmocka_unit_test(cancelled_retention_zero_deletes_a_cancelled_job),
        cmocka_unit_test(a_queue_with_retentions_keeps_its_finished_jobs),
        cmocka_unit_test(a_deleted_job_stays_a_duplicate_within_the_window),
        cmocka_unit_test(an_enqueue_without_a_window_holds_its_key_only_while_unfinished),
        cmocka_unit_test(a_live_window_holds_its_key_against_an_enqueue_without_one),
        cmocka_unit_test(a_passed_window_lets_a_new_job_in),
        cmocka_unit_test(the_janitor_deletes_windows_that_have_passed),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
