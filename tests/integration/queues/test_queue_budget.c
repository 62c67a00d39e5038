/* The response byte budget on queues (ROWLOCK_RESPONSE_BUDGET, here 2048 bytes): a claim takes
 * no more jobs than their payloads fit in the budget, the first always (a payload larger than
 * the budget is claimed alone), and answers every job it claimed; the jobs it left stay pending
 * and are claimed next. Concurrent claims (which the service may combine into one statement)
 * keep to the same bound, and every job claimed is answered to exactly one of them. A job
 * listing ends its page at the budget (payloads, progress, results and errors together) and
 * says in next where to continue: paging lists every job exactly once, in order. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define BUDGET 2048

static int setup(void **state)
{
    (void)state;
    const char *env[] = {"ROWLOCK_RESPONSE_BUDGET=2048", NULL};
    if (th_svc_start("qbudget", env) != 0)
        return -1;
    return 0;
}

/* th_call that also asserts the answer is JSON; returns it (the caller's). */
static json_t *call(const char *method, const char *path, const char *body, long want)
{
    json_t *j = th_svc_call(method, path, body, want);
    assert_non_null(j);
    return j;
}

static void queue_create(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s", name);
    json_decref(call("PUT", path, "{\"lease_seconds\":300}", 201));
}

/* A string payload of n bytes of JSON text (n - 2 letters tag, then x's, in quotes). */
static char *payload_text(int n, char tag)
{
    char *p = malloc((size_t)n + 1);
    memset(p, 'x', (size_t)n);
    p[0] = p[n - 1] = '"';
    p[1] = tag;
    p[n] = '\0';
    return p;
}

/* Enqueues a job whose payload is n bytes of JSON text; returns its id. */
static int64_t enqueue(const char *queue, int n, char tag)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    char *p = payload_text(n, tag);
    char *body = malloc((size_t)n + 32);
    snprintf(body, (size_t)n + 32, "{\"payload\":%s}", p);
    json_t *j = call("POST", path, body, 201);
    int64_t id = json_integer_value(json_object_get(j, "id"));
    json_decref(j);
    free(body);
    free(p);
    return id;
}

/* Bytes of a value's compact JSON text (strings here: as PostgreSQL writes them). */
static size_t value_bytes(json_t *v)
{
    if (v == NULL || json_is_null(v))
        return 0;
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = strlen(t);
    free(t);
    return n;
}

static json_t *claim(const char *queue, const char *owner, int max_jobs)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/queues/%s/leases", queue);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":%d}", owner, max_jobs);
    json_t *j = call("POST", path, body, 200);
    json_t *leases = json_incref(json_object_get(j, "leases"));
    assert_string_equal(json_string_value(json_object_get(j, "owner")), owner);
    json_decref(j);
    assert_true(json_is_array(leases));
    return leases;
}

/* Asserts the leases' payloads fit the budget (or there is one) and returns their bytes. */
static size_t assert_within_budget(json_t *leases)
{
    size_t i, bytes = 0;
    json_t *l;
    json_array_foreach(leases, i, l) bytes += value_bytes(json_object_get(l, "payload"));
    if (json_array_size(leases) > 1)
        assert_true(bytes <= BUDGET);
    return bytes;
}

static json_t *job(const char *queue, int64_t id)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs/%" PRId64, queue, id);
    return call("GET", path, NULL, 200);
}

static void assert_state(const char *queue, int64_t id, const char *state)
{
    json_t *j = job(queue, id);
    assert_string_equal(json_string_value(json_object_get(j, "state")), state);
    json_decref(j);
}

/* Five payloads of 700 bytes: two fit in 2048, so a claim of five takes two, then two, then
 * one; each claimed job is answered with its payload, and the ones left stay pending. */
static void claim_stops_at_the_budget(void **state)
{
    (void)state;
    queue_create("c");
    int64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = enqueue("c", 700, (char)('a' + i));
    int want[] = {2, 2, 1, 0};
    int seen = 0;
    for (int round = 0; round < 4; round++) {
        json_t *leases = claim("c", "w", 5);
        assert_int_equal(json_array_size(leases), want[round]);
        assert_within_budget(leases);
        size_t i;
        json_t *l;
        json_array_foreach(leases, i, l)
        {
            int64_t id = json_integer_value(json_object_get(l, "job_id"));
            assert_int_equal(id, ids[seen]); /* claim order: oldest first */
            char *p = payload_text(700, (char)('a' + seen));
            json_t *expect = json_loads(p, JSON_DECODE_ANY, NULL);
            assert_true(json_equal(expect, json_object_get(l, "payload")));
            json_decref(expect);
            free(p);
            assert_state("c", id, "processing");
            seen++;
        }
        /* what this claim left is pending, not leased to anybody */
        for (int k = seen; k < 5; k++)
            assert_state("c", ids[k], "pending");
        json_decref(leases);
    }
    assert_int_equal(seen, 5);
}

/* A payload larger than the budget is claimed alone, then the small ones behind it. */
static void oversized_payload_is_claimed_alone(void **state)
{
    (void)state;
    queue_create("big");
    int64_t big = enqueue("big", 5000, 'B');
    int64_t small[3];
    for (int i = 0; i < 3; i++)
        small[i] = enqueue("big", 100, (char)('s' + i));
    json_t *leases = claim("big", "w", 10);
    assert_int_equal(json_array_size(leases), 1);
    json_t *l = json_array_get(leases, 0);
    assert_int_equal(json_integer_value(json_object_get(l, "job_id")), big);
    assert_int_equal(value_bytes(json_object_get(l, "payload")), 5000);
    json_decref(leases);
    for (int i = 0; i < 3; i++)
        assert_state("big", small[i], "pending");
    leases = claim("big", "w", 10);
    assert_int_equal(json_array_size(leases), 3);
    json_decref(leases);
}

#define CLAIMERS 8
#define CROWD    40

struct claimer {
    pthread_t t;
    char owner[16];
    json_t *leases[CROWD];
    int n, refused; /* refused: claims not answered 200 */
};

static void *claimer_run(void *arg)
{
    struct claimer *c = arg;
    char body[128];
    snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":5}", c->owner);
    const char *h[] = {"Content-Type: application/json", NULL};
    for (int k = 0; k < CROWD && c->n < CROWD; k++) {
        struct th_response r;
        if (th_http(th_svc.port, "POST", "/queues/crowd/leases", h, body, strlen(body), &r) != 0)
            break;
        json_t *leases = r.status == 200 ? json_object_get(r.json, "leases") : NULL;
        c->refused += leases == NULL;
        size_t got = json_array_size(leases);
        if (leases != NULL)
            c->leases[c->n++] = json_incref(leases);
        th_response_free(&r);
        if (got == 0)
            break;
    }
    return NULL;
}

/* Claimers at once (claims the service may combine): each answer keeps to the budget, and the
 * jobs answered are exactly the jobs claimed, each to one claimer. */
static void concurrent_claims_keep_the_budget(void **state)
{
    (void)state;
    queue_create("crowd");
    for (int i = 0; i < CROWD; i++)
        enqueue("crowd", 700, 'k');
    struct claimer c[CLAIMERS];
    memset(c, 0, sizeof(c));
    for (int i = 0; i < CLAIMERS; i++) {
        snprintf(c[i].owner, sizeof(c[i].owner), "w%d", i);
        assert_int_equal(pthread_create(&c[i].t, NULL, claimer_run, &c[i]), 0);
    }
    json_t *answered = json_object();
    for (int i = 0; i < CLAIMERS; i++) {
        pthread_join(c[i].t, NULL);
        assert_int_equal(c[i].refused, 0);
        for (int k = 0; k < c[i].n; k++) {
            assert_true(json_array_size(c[i].leases[k]) <= 2);
            assert_within_budget(c[i].leases[k]);
            size_t x;
            json_t *l;
            json_array_foreach(c[i].leases[k], x, l)
            {
                char id[24];
                snprintf(id, sizeof(id), "%" JSON_INTEGER_FORMAT,
                         json_integer_value(json_object_get(l, "job_id")));
                assert_null(json_object_get(answered, id)); /* answered once */
                json_object_set_new(answered, id, json_string(c[i].owner));
            }
            json_decref(c[i].leases[k]);
        }
    }
    /* every job leased in the database was answered, to its owner */
    PGconn *pg = th_pg(th_svc_dburl);
    PGresult *r = th_sql(pg, "SELECT j.id, j.owner FROM rowlock.jobs j JOIN rowlock.queues q ON "
                             "q.id = j.queue_id WHERE q.name = 'crowd' AND j.state = "
                             "'processing'");
    assert_int_equal(PQntuples(r), (int)json_object_size(answered));
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *owner = json_object_get(answered, PQgetvalue(r, i, 0));
        assert_non_null(owner);
        assert_string_equal(json_string_value(owner), PQgetvalue(r, i, 1));
    }
    assert_int_equal(PQntuples(r), CROWD);
    PQclear(r);
    PQfinish(pg);
    json_decref(answered);
    fprintf(stderr, "claims %.0f in %.0f transactions\n",
            th_metric(th_svc.port, "rowlock_queue_combined_calls_total{kind=\"claim\"}"),
            th_metric(th_svc.port, "rowlock_queue_combined_transactions_total{kind=\"claim\"}"));
}

/* Bytes a listed job carries: payload, progress, result and last error. */
static size_t job_bytes(json_t *j)
{
    return value_bytes(json_object_get(j, "payload")) +
           value_bytes(json_object_get(j, "progress")) + value_bytes(json_object_get(j, "result")) +
           value_bytes(json_object_get(j, "last_error"));
}

/* Jobs of many sizes (one larger than the budget, one whose result makes it large): pages of
 * limit 1000 stop at the budget, and following next lists every job once, in id order. */
static void listing_pages_at_the_budget(void **state)
{
    (void)state;
    queue_create("l");
    int64_t ids[30];
    int n = 0;
    for (int i = 0; i < 25; i++)
        ids[n++] = enqueue("l", 10 + (i * 137) % 1500, 'p');
    ids[n++] = enqueue("l", 3000, 'O'); /* alone on its page */
    for (int i = 0; i < 4; i++)
        ids[n++] = enqueue("l", 50, 'q');
    /* the first job gets a result of 1500 bytes: its bytes count too */
    json_t *leases = claim("l", "w", 1);
    int64_t first = json_integer_value(json_object_get(json_array_get(leases, 0), "job_id"));
    int64_t fence = json_integer_value(json_object_get(json_array_get(leases, 0), "fence"));
    json_decref(leases);
    assert_int_equal(first, ids[0]);
    char path[128], *body = malloc(2000), *res = payload_text(1500, 'R');
    snprintf(path, sizeof(path), "/queues/l/leases/%" PRId64 "/complete", first);
    snprintf(body, 2000, "{\"owner\":\"w\",\"fence\":%" PRId64 ",\"result\":%s}", fence, res);
    json_decref(call("POST", path, body, 200));
    free(body);
    free(res);

    int listed = 0, pages = 0;
    json_t *next = json_integer(0);
    while (!json_is_null(next)) {
        snprintf(path, sizeof(path), "/queues/l/jobs?limit=1000&after=%" JSON_INTEGER_FORMAT,
                 json_integer_value(next));
        json_decref(next);
        json_t *page = call("GET", path, NULL, 200);
        json_t *jobs = json_object_get(page, "jobs");
        size_t i, bytes = 0;
        json_t *j;
        json_array_foreach(jobs, i, j)
        {
            assert_true(listed < n);
            assert_int_equal(json_integer_value(json_object_get(j, "id")), ids[listed]);
            bytes += job_bytes(j);
            listed++;
        }
        if (json_array_size(jobs) > 1)
            assert_true(bytes <= BUDGET);
        /* a page that stops short of the budget is the last one */
        next = json_incref(json_object_get(page, "next"));
        assert_true(json_is_null(next) || json_is_integer(next));
        if (!json_is_null(next))
            assert_int_equal(json_integer_value(next), ids[listed - 1]);
        json_decref(page);
        pages++;
        assert_true(pages <= n);
    }
    json_decref(next);
    assert_int_equal(listed, n);
    assert_true(pages >= 6); /* about 22 KB of values in pages of 2 KB */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_stops_at_the_budget),
        cmocka_unit_test(oversized_payload_is_claimed_alone),
        cmocka_unit_test(concurrent_claims_keep_the_budget),
        cmocka_unit_test(listing_pages_at_the_budget),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
