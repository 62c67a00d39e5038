/* Bulk operator actions over HTTP: POST /queues/{queue}/jobs:retry and jobs:cancel.
 *   - paging: 25 jobs cancelled 7 a page and retried 10 a page, each page in id order after the
 *     cursor, next null on the last; counted in rowlock_queue_bulk_jobs_total and audited;
 *   - filters: state and concurrency_key pick exactly their jobs; a cancelled running job's
 *     owner is refused job_cancelled; succeeded jobs are never touched;
 *   - one page, one transaction: another transaction claims a job of the page and holds its lock;
 *     while the page waits for it, none of the page's jobs reads cancelled, and once it commits,
 *     the page cancels all the others together and leaves the claimed one (no longer pending)
 *     alone;
 *   - a bulk retry wakes a waiting claim at once (its re-check is 5 s away);
 *   - race: owners complete their running jobs while pages of jobs:cancel {state: processing}
 *     cancel them, on a queue that keeps cancelled jobs and on one that deletes them. Every job
 *     ends one way only: completed (200, succeeded, not in any page's job_ids) or cancelled
 *     (the owner refused job_cancelled, or job_not_found when deleted; in exactly one page).
 *     Two defences keep it so, either enough alone: the page locks its jobs and judges each
 *     again on its latest version (FOR UPDATE in JOB_PAGE_TARGET, db/job_bulk.c), and the cancel
 *     itself only changes a job still cancellable (JOB_CANCELLABLE in JOBS_CANCEL). With both
 *     removed, jobs whose completion answered 200 end cancelled and this case fails; with the
 *     lock alone removed, the one-transaction case fails (the job claimed meanwhile is
 *     cancelled, as if it were still pending);
 *   - bad input: each a 400 that names its rule, and nothing changes. */
#include <inttypes.h>
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
    static const char *const env[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", NULL};
    return th_svc_start("qbulk", env);
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    if (!json_is_integer(v))
        fail_msg("no integer member %s", member);
    return json_integer_value(v);
}

static void put_queue(const char *queue, const char *config)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_decref(th_svc_call("PUT", path, config, 201));
}

/* Enqueues n jobs with key (NULL: none); ids[] gets their ids. */
static void enqueue_n(const char *queue, int n, const char *key, json_int_t *ids)
{
    char path[128];
    json_t *jobs = json_array();
    for (int i = 0; i < n; i++) {
        json_t *j = json_pack("{s:i}", "payload", i);
        if (key != NULL)
            json_object_set_new(j, "concurrency_key", json_string(key));
        json_array_append_new(jobs, j);
    }
    json_t *body = json_pack("{s:o}", "jobs", jobs);
    char *text = json_dumps(body, JSON_COMPACT);
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    json_t *r = th_svc_call("POST", path, text, 201);
    for (int i = 0; i < n; i++)
        ids[i] = int_at(json_array_get(json_object_get(r, "jobs"), (size_t)i), "id");
    json_decref(r);
    free(text);
    json_decref(body);
}

/* A job's state as stored ("gone" when it is not there). */
static void job_state(json_int_t id, char *out, size_t size)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT state FROM rowlock.jobs WHERE id = %" JSON_INTEGER_FORMAT,
             id);
    PGresult *r = th_sql(th_svc_pg(), sql);
    snprintf(out, size, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "gone");
    PQclear(r);
}

static void assert_state(json_int_t id, const char *want)
{
    char got[32];
    job_state(id, got, sizeof(got));
    if (strcmp(got, want) != 0)
        fail_msg("job %" JSON_INTEGER_FORMAT " is %s, not %s", id, got, want);
}

/* One page: POST path with body, 200; returns the answer. */
static json_t *page(const char *queue, const char *action, const char *body)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs:%s", queue, action);
    return th_svc_call("POST", path, body, 200);
}

/* Every page of action with filter (JSON members without braces, "" for none) and limit, each
 * page's ids after its cursor and ascending; all ids into ids (at most max); returns how many. */
static size_t page_through(const char *queue, const char *action, const char *filter, int limit,
                           json_int_t *ids, size_t max, int *pages)
{
    const char *counted = strcmp(action, "retry") == 0 ? "retried" : "cancelled";
    json_int_t after = 0;
    size_t n = 0;
    *pages = 0;
    for (;;) {
        char body[512];
        snprintf(body, sizeof(body), "{%s%s\"limit\":%d,\"after\":%" JSON_INTEGER_FORMAT "}",
                 filter, *filter ? "," : "", limit, after);
        json_t *r = page(queue, action, body);
        json_t *got = json_object_get(r, "job_ids");
        assert_int_equal(int_at(r, counted), json_array_size(got));
        assert_true(json_array_size(got) <= (size_t)limit);
        size_t i;
        json_t *v;
        json_array_foreach(got, i, v)
        {
            assert_true(json_integer_value(v) > (n > 0 ? ids[n - 1] : after));
            assert_true(n < max);
            ids[n++] = json_integer_value(v);
        }
        (*pages)++;
        json_t *next = json_object_get(r, "next");
        if (json_is_null(next)) {
            json_decref(r);
            return n;
        }
        assert_true(int_at(r, "next") > after);
        after = int_at(r, "next");
        json_decref(r);
    }
}

static void pages_follow_the_cursor(void **state)
{
    (void)state;
    json_int_t ids[25], got[64];
    int pages;
    put_queue("page", "{}");
    enqueue_n("page", 25, NULL, ids);
    size_t n = page_through("page", "cancel", "", 7, got, 64, &pages);
    assert_int_equal(n, 25);
    assert_int_equal(pages, 4); /* 7, 7, 7, 4 */
    for (int i = 0; i < 25; i++) {
        assert_int_equal(got[i], ids[i]);
        assert_state(ids[i], "cancelled");
    }
    n = page_through("page", "retry", "", 10, got, 64, &pages);
    assert_int_equal(n, 25);
    assert_int_equal(pages, 3); /* 10, 10, 5 */
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON "
                                    "q.id = j.queue_id WHERE q.name = 'page' AND j.state = "
                                    "'pending' AND j.attempts = 0 AND j.finished_at IS NULL"),
                     25);
    /* a full last page: next names its last job, and the page after it is empty */
    json_t *r = page("page", "cancel", "{\"limit\":25}");
    assert_int_equal(int_at(r, "next"), ids[24]);
    json_decref(r);
    r = page("page", "cancel", "{\"limit\":25,\"after\":999999999}");
    assert_int_equal(int_at(r, "cancelled"), 0);
    assert_true(json_is_null(json_object_get(r, "next")));
    json_decref(r);
    assert_true(th_metric(th_svc.port,
                          "rowlock_queue_bulk_jobs_total{queue=\"page\",action=\"cancel\"}") == 50);
    assert_true(th_metric(th_svc.port,
                          "rowlock_queue_bulk_jobs_total{queue=\"page\",action=\"retry\"}") == 25);
    assert_true(th_service_logged(&th_svc, "\"action\":\"POST /queues/{queue}/jobs:cancel\""));
    assert_true(th_service_logged(&th_svc, "\"action\":\"POST /queues/{queue}/jobs:retry\""));
}

/* Claims n jobs of queue for owner; fences[] (may be NULL) and ids[] get theirs. */
static void claim_n(const char *queue, const char *owner, int n, json_int_t *ids,
                    json_int_t *fences)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":%d}", owner, n);
    json_t *r = th_svc_call("POST", path, body, 200);
    json_t *leases = json_object_get(r, "leases");
    assert_int_equal(json_array_size(leases), n);
    for (int i = 0; i < n; i++) {
        ids[i] = int_at(json_array_get(leases, (size_t)i), "job_id");
        if (fences != NULL)
            fences[i] = int_at(json_array_get(leases, (size_t)i), "fence");
    }
    json_decref(r);
}

static int in(json_int_t id, const json_int_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static void filters_pick_their_jobs(void **state)
{
    (void)state;
    json_int_t a[6], b[6], run[2], fence[2], got[32], done[1];
    int pages;
    put_queue("filt", "{\"max_attempts\":1}");
    enqueue_n("filt", 6, "k1", a);
    enqueue_n("filt", 6, "k2", b);
    /* two running (the oldest of k1), one succeeded (the next) */
    claim_n("filt", "w", 2, run, fence);
    assert_int_equal(run[0], a[0]);
    claim_n("filt", "s", 1, done, NULL);
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/filt/leases/%" JSON_INTEGER_FORMAT "/complete", done[0]);
    json_decref(th_svc_call("POST", path, "{\"owner\":\"s\",\"fence\":1}", 200));
    /* pending k1: a[3..5] */
    size_t n = page_through("filt", "cancel", "\"state\":\"pending\",\"concurrency_key\":\"k1\"", 2,
                            got, 32, &pages);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(got[i], a[3 + i]);
    /* processing: the two running; their owner's next write is refused */
    n = page_through("filt", "cancel", "\"state\":\"processing\"", 100, got, 32, &pages);
    assert_int_equal(n, 2);
    assert_int_equal(got[0], run[0]);
    assert_int_equal(got[1], run[1]);
    snprintf(path, sizeof(path), "/queues/filt/leases/%" JSON_INTEGER_FORMAT, run[0]);
    snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}", fence[0]);
    json_t *r = th_svc_call("PATCH", path, body, 409);
    assert_string_equal(json_string_value(json_object_get(r, "code")), "job_cancelled");
    json_decref(r);
    /* retry of k2's cancelled: none yet; cancel b[0..1], retry k2 */
    n = page_through("filt", "retry", "\"concurrency_key\":\"k2\"", 100, got, 32, &pages);
    assert_int_equal(n, 0);
    n = page_through("filt", "cancel", "\"concurrency_key\":\"k2\"", 2, got, 32, &pages);
    assert_int_equal(n, 6);
    n = page_through("filt", "retry", "\"state\":\"failed\"", 100, got, 32, &pages);
    assert_int_equal(n, 0); /* none failed */
    n = page_through("filt", "retry", "\"state\":\"cancelled\",\"concurrency_key\":\"k2\"", 4, got,
                     32, &pages);
    assert_int_equal(n, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(got[i], b[i]);
    assert_state(done[0], "succeeded");
    /* k1: a[0], a[1] and a[3..5] cancelled, a[2] succeeded; retry every cancelled one */
    n = page_through("filt", "retry", "", 100, got, 32, &pages);
    assert_int_equal(n, 5);
    assert_false(in(done[0], got, n));
    assert_state(done[0], "succeeded");
    /* a failed one (max_attempts 1) is retried by state failed */
    json_int_t f[1], ff[1];
    claim_n("filt", "x", 1, f, ff);
    snprintf(path, sizeof(path), "/queues/filt/leases/%" JSON_INTEGER_FORMAT "/fail", f[0]);
    snprintf(body, sizeof(body),
             "{\"owner\":\"x\",\"fence\":%" JSON_INTEGER_FORMAT ",\"error\":{}}", ff[0]);
    json_decref(th_svc_call("POST", path, body, 200));
    assert_state(f[0], "failed");
    n = page_through("filt", "retry", "\"state\":\"failed\"", 100, got, 32, &pages);
    assert_int_equal(n, 1);
    assert_int_equal(got[0], f[0]);
    assert_state(f[0], "pending");
}

struct call {
    const char *method, *path, *body;
    long status;
    json_t *answer;
    double at; /* th_now() when it was answered */
};

static void *call_thread(void *arg)
{
    struct call *c = arg;
    struct th_client cl;
    th_client_init(&cl);
    c->status = th_client_call(&cl, c->method, c->path, c->body, &c->answer);
    c->at = th_now();
    th_client_free(&cl);
    return NULL;
}

/* Another transaction claims a job of the page, as a claim does, and keeps its lock 2 s. */
static void hold_claim(PGconn *c, json_int_t id)
{
    char sql[1024];
    PQclear(th_sql(c, "BEGIN"));
    snprintf(sql, sizeof(sql),
             "UPDATE rowlock.jobs SET state = 'processing', owner = 'elsewhere', fence = fence + "
             "1, attempts = attempts + 1, attempt_no = attempts + 1, attempt_owner = "
             "'elsewhere', attempt_claimed_at = now(), attempt_ended_at = NULL, attempt_outcome "
             "= NULL, lease_expires_at = now() + interval '30 s', claimable_at = now() + "
             "interval '30 s' WHERE id = %" JSON_INTEGER_FORMAT,
             id);
    PQclear(th_sql(c, sql));
    assert_int_equal(PQsendQuery(c, "SELECT pg_sleep(2); COMMIT"), 1);
}

static void a_page_is_one_transaction(void **state)
{
    (void)state;
    json_int_t ids[10];
    put_queue("tx", "{}");
    enqueue_n("tx", 10, NULL, ids);
    PGconn *holder = th_pg(th_svc_dburl), *observer = th_pg(th_svc_dburl);
    hold_claim(holder, ids[4]);
    struct call c = {.method = "POST",
                     .path = "/queues/tx/jobs:cancel",
                     .body = "{\"state\":\"pending\",\"limit\":10}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_thread, &c), 0);
    th_wait_lock_waiter(observer, "the page's lock on the claimed job");
    /* the page has locked ids[0..3] and waits on ids[4]: nothing of it is visible yet */
    PGresult *r = th_sql(observer, "SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON "
                                   "q.id = j.queue_id WHERE q.name = 'tx' AND j.state = "
                                   "'cancelled'");
    assert_string_equal(PQgetvalue(r, 0, 0), "0");
    PQclear(r);
    pthread_join(t, NULL);
    PGresult *g;
    while ((g = PQgetResult(holder)) != NULL)
        PQclear(g);
    assert_int_equal(c.status, 200);
    json_t *got = json_object_get(c.answer, "job_ids");
    assert_int_equal(int_at(c.answer, "cancelled"), 9);
    assert_int_equal(json_array_size(got), 9);
    assert_true(json_is_null(json_object_get(c.answer, "next")));
    for (int i = 0, k = 0; i < 10; i++) {
        if (i == 4) {
            assert_state(ids[i], "processing"); /* claimed meanwhile: no longer pending */
            continue;
        }
        assert_int_equal(json_integer_value(json_array_get(got, (size_t)k++)), ids[i]);
        assert_state(ids[i], "cancelled");
    }
    json_decref(c.answer);
    PQfinish(holder);
    PQfinish(observer);
}

static void a_retry_wakes_a_waiting_claim(void **state)
{
    (void)state;
    json_int_t ids[1];
    put_queue("wake", "{}");
    enqueue_n("wake", 1, NULL, ids);
    json_decref(page("wake", "cancel", "{}"));
    struct call c = {.method = "POST",
                     .path = "/queues/wake/leases",
                     .body = "{\"owner\":\"w\",\"max_jobs\":1,\"wait_seconds\":10}"};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_thread, &c), 0);
    usleep(500 * 1000);
    double t0 = th_now();
    json_t *r = page("wake", "retry", "{}");
    assert_int_equal(int_at(r, "retried"), 1);
    json_decref(r);
    pthread_join(t, NULL);
    assert_int_equal(c.status, 200);
    json_t *l = json_array_get(json_object_get(c.answer, "leases"), 0);
    assert_non_null(l);
    assert_int_equal(int_at(l, "job_id"), ids[0]);
    assert_true(c.at - t0 < 2.0); /* the wake-up, not the 5 s re-check */
    json_decref(c.answer);
}

/* ---- the race of cancels and completions ---- */

#define RACE_ROUNDS    30
#define RACE_JOBS      24
#define RACE_OWNERS    6
#define RACE_PAGE      3
#define RACE_CANCELLED 128

struct race {
    const char *queue;
    json_int_t ids[RACE_JOBS], fences[RACE_JOBS];
    long status[RACE_JOBS];
    char code[RACE_JOBS][32];
    json_int_t cancelled[RACE_JOBS * 2];
    size_t ncancelled;
    pthread_barrier_t go;
};

struct owner {
    struct race *race;
    int index;
};

static void *owner_thread(void *arg)
{
    struct owner *o = arg;
    struct race *r = o->race;
    struct th_client cl;
    th_client_init(&cl);
    pthread_barrier_wait(&r->go);
    for (int i = o->index; i < RACE_JOBS; i += RACE_OWNERS) {
        char path[128], body[128];
        json_t *a = NULL;
        snprintf(path, sizeof(path), "/queues/%s/leases/%" JSON_INTEGER_FORMAT "/complete",
                 r->queue, r->ids[i]);
        snprintf(body, sizeof(body), "{\"owner\":\"w\",\"fence\":%" JSON_INTEGER_FORMAT "}",
                 r->fences[i]);
        r->status[i] = th_client_call(&cl, "POST", path, body, &a);
        const char *code = json_string_value(json_object_get(a, "code"));
        snprintf(r->code[i], sizeof(r->code[i]), "%s", code ? code : "");
        json_decref(a);
    }
    th_client_free(&cl);
    return NULL;
}

static void *canceller_thread(void *arg)
{
    struct race *r = arg;
    struct th_client cl;
    th_client_init(&cl);
    pthread_barrier_wait(&r->go);
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs:cancel", r->queue);
    json_int_t after = 0;
    for (int guard = 0; guard < 100; guard++) {
        json_t *a = NULL;
        snprintf(body, sizeof(body),
                 "{\"state\":\"processing\",\"limit\":%d,\"after\":%" JSON_INTEGER_FORMAT "}",
                 RACE_PAGE, after);
        long st = th_client_call(&cl, "POST", path, body, &a);
        if (st != 200) {
            fprintf(stderr, "jobs:cancel answered %ld\n", st);
            r->ncancelled = SIZE_MAX;
            json_decref(a);
            break;
        }
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(a, "job_ids"), i, v)
        {
            if (r->ncancelled < RACE_JOBS * 2)
                r->cancelled[r->ncancelled++] = json_integer_value(v);
        }
        json_t *next = json_object_get(a, "next");
        after = json_is_integer(next) ? json_integer_value(next) : 0;
        json_decref(a);
        if (after == 0)
            break;
    }
    th_client_free(&cl);
    return NULL;
}

/* One round on queue (drop: it keeps no cancelled jobs); adds to *completed and *cancelled. */
static void race_round(const char *queue, int drop, int *completed, int *cancelled)
{
    struct race r = {.queue = queue};
    struct owner o[RACE_OWNERS];
    pthread_t t[RACE_OWNERS + 1];
    enqueue_n(queue, RACE_JOBS, NULL, r.ids);
    claim_n(queue, "w", RACE_JOBS, r.ids, r.fences);
    pthread_barrier_init(&r.go, NULL, RACE_OWNERS + 1);
    for (int i = 0; i < RACE_OWNERS; i++) {
        o[i] = (struct owner){&r, i};
        assert_int_equal(pthread_create(&t[i], NULL, owner_thread, &o[i]), 0);
    }
    assert_int_equal(pthread_create(&t[RACE_OWNERS], NULL, canceller_thread, &r), 0);
    for (int i = 0; i <= RACE_OWNERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&r.go);
    assert_true(r.ncancelled <= RACE_JOBS);
    for (int i = 0; i < RACE_JOBS; i++) {
        char st[32];
        int listed = 0;
        for (size_t k = 0; k < r.ncancelled; k++)
            listed += r.cancelled[k] == r.ids[i];
        job_state(r.ids[i], st, sizeof(st));
        if (r.status[i] == 200 && listed == 0 && strcmp(st, "succeeded") == 0) {
            (*completed)++;
            continue;
        }
        const char *refusal = drop ? "job_not_found" : "job_cancelled";
        if (r.status[i] == (drop ? 404 : 409) && strcmp(r.code[i], refusal) == 0 && listed == 1 &&
            strcmp(st, drop ? "gone" : "cancelled") == 0) {
            (*cancelled)++;
            continue;
        }
        fail_msg("queue %s job %" JSON_INTEGER_FORMAT ": complete answered %ld %s, listed "
                 "cancelled %d times, now %s",
                 queue, r.ids[i], r.status[i], r.code[i], listed, st);
    }
}

static void cancels_race_completions(void **state)
{
    (void)state;
    put_queue("race", "{}");
    put_queue("race-drop", "{\"cancelled_retention_seconds\":0}");
    int completed[2] = {0, 0}, cancelled[2] = {0, 0};
    for (int round = 0; round < RACE_ROUNDS; round++) {
        race_round("race", 0, &completed[0], &cancelled[0]);
        race_round("race-drop", 1, &completed[1], &cancelled[1]);
    }
    fprintf(stderr, "race: kept queue %d completed, %d cancelled; dropping queue %d, %d\n",
            completed[0], cancelled[0], completed[1], cancelled[1]);
    /* both ends of the race were reached on each queue */
    for (int q = 0; q < 2; q++) {
        assert_true(completed[q] > 0);
        assert_true(cancelled[q] > 0);
    }
}

/* ---- bad input ---- */

/* A digest of every job of the database: state, attempts, updated_at. */
static void jobs_digest(char *out, size_t size)
{
    PGresult *r = th_sql(th_svc_pg(), "SELECT md5(coalesce(string_agg(id || state || attempts || "
                                      "updated_at, ',' ORDER BY id), '')) FROM rowlock.jobs");
    snprintf(out, size, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
}

static void bad_input_changes_nothing(void **state)
{
    (void)state;
    json_int_t ids[4];
    put_queue("bad", "{}");
    enqueue_n("bad", 4, "k", ids);
    json_decref(page("bad", "cancel", "{\"limit\":2}")); /* two cancelled, two pending */
    char long_key[1100];
    memset(long_key, 'k', 1025);
    long_key[1025] = '\0';
    char long_body[1200];
    snprintf(long_body, sizeof(long_body), "{\"concurrency_key\":\"%s\"}", long_key);
    const struct {
        const char *action, *body, *code, *detail;
    } cases[] = {
        {"retry", "{\"status\":\"failed\"}", "invalid_filter", "unknown member \"status\""},
        {"cancel", "{\"state\":\"cancelled\"}", "invalid_filter", "pending or processing"},
        {"retry", "{\"state\":\"pending\"}", "invalid_filter", "failed or cancelled"},
        {"retry", "{\"state\":\"succeeded\"}", "invalid_filter", "failed or cancelled"},
        {"cancel", "{\"state\":1}", "invalid_filter", "\"state\" is a string"},
        {"cancel", "{\"limit\":0}", "invalid_filter",
         "\"limit\" must be an integer from 1 to 1000"},
        {"cancel", "{\"limit\":1001}", "invalid_filter", "from 1 to 1000"},
        {"retry", "{\"limit\":\"10\"}", "invalid_filter", "\"limit\" must be an integer"},
        {"cancel", "{\"after\":-1}", "invalid_filter", "\"after\" must be an integer from 0"},
        {"retry", "{\"after\":1.5}", "invalid_filter", "\"after\" must be an integer"},
        {"cancel", "{\"concurrency_key\":\"\"}", "invalid_filter", "concurrency_key"},
        {"cancel", "{\"concurrency_key\":7}", "invalid_filter", "\"concurrency_key\" is a string"},
        {"cancel", long_body, "invalid_filter", "1024 bytes"},
        {"retry", "[]", "invalid_filter", "the body is a JSON object"},
        {"cancel", "", "invalid_json", NULL},
    };
    char before[64], after[64];
    jobs_digest(before, sizeof(before));
    double bulk_before = th_metric(th_svc.port, "rowlock_queue_bulk_jobs_total{queue=\"bad\","
                                                "action=\"cancel\"}");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/queues/bad/jobs:%s", cases[i].action);
        json_t *r = th_svc_call("POST", path, cases[i].body, 400);
        const char *code = json_string_value(json_object_get(r, "code"));
        const char *detail = json_string_value(json_object_get(r, "detail"));
        if (code == NULL || strcmp(code, cases[i].code) != 0 ||
            (cases[i].detail != NULL && (detail == NULL || !strstr(detail, cases[i].detail))))
            fail_msg("case %zu (%s %s): %s: %s", i, cases[i].action, cases[i].body,
                     code ? code : "?", detail ? detail : "?");
        json_decref(r);
    }
    json_decref(th_svc_call("POST", "/queues/nope/jobs:retry", "{}", 404));
    json_decref(th_svc_call("POST", "/queues/b%20d/jobs:cancel", "{}", 400));
    jobs_digest(after, sizeof(after));
    assert_string_equal(before, after);
    assert_true(th_metric(th_svc.port, "rowlock_queue_bulk_jobs_total{queue=\"bad\","
                                       "action=\"cancel\"}") == bulk_before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pages_follow_the_cursor),
        cmocka_unit_test(filters_pick_their_jobs),
        cmocka_unit_test(a_page_is_one_transaction),
        cmocka_unit_test(a_retry_wakes_a_waiting_claim),
        cmocka_unit_test(cancels_race_completions),
        cmocka_unit_test(bad_input_changes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
