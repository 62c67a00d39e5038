/* Unit tests of routes/job_graph.c, the dependencies of an enqueue batch: refs and parents
 * resolved and put in a topological order (chains, diamonds, fan-in, fan-out, ids beside refs,
 * random DAGs of 1,000 jobs), every refusal with its job index and the reference at fault
 * (self, repeats, unknown and duplicate refs, bad types), the limits at and past their
 * boundary, and cycles, each reported as a cycle of the input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes/job_graph.h"

/* One check of a batch, and the JSON the graph borrows its refs from. */
struct run {
    json_t *jobs;
    struct route_job_graph g;
    struct route_job_graph_error err;
    enum route_job_graph_status st;
};

/* Checks jobs (stolen). */
static void run_json(struct run *r, json_t *jobs)
{
    assert_non_null(jobs);
    r->jobs = jobs;
    r->st = route_job_graph_check(r->jobs, &r->g, &r->err);
}

/* JSON text written with ' for " (the test's inputs read better so), parsed. NUL is allowed
 * here, though the service's parser allows none. */
static json_t *loads(const char *text)
{
    char *copy = strdup(text);
    assert_non_null(copy);
    for (char *c = copy; *c != '\0'; c++)
        if (*c == '\'')
            *c = '"';
    json_error_t e;
    json_t *j = json_loads(copy, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (j == NULL)
        fail_msg("bad test JSON %s: %s", copy, e.text);
    free(copy);
    return j;
}

static void run_text(struct run *r, const char *text)
{
    run_json(r, loads(text));
}

static void run_done(struct run *r)
{
    route_job_graph_free(&r->g);
    json_decref(r->err.ext);
    json_decref(r->jobs);
    memset(r, 0, sizeof(*r));
}

/* Expects r refused with st for job, its "reference" the JSON text reference (see loads; NULL:
 * none) and its detail holding fragment. */
static void expect_refused(struct run *r, enum route_job_graph_status st, size_t job,
                           const char *reference, const char *fragment)
{
    if (r->st != st)
        fail_msg("status %d, want %d (detail: %s)", r->st, st, r->err.detail);
    assert_int_equal(json_integer_value(json_object_get(r->err.ext, "job")), job);
    json_t *got = json_object_get(r->err.ext, "reference");
    if (reference == NULL) {
        assert_null(got);
    } else {
        json_t *want = loads(reference);
        if (!json_equal(got, want))
            fail_msg("reference is not %s (detail: %s)", reference, r->err.detail);
        json_decref(want);
    }
    char head[32];
    snprintf(head, sizeof(head), "job %zu: ", job);
    assert_int_equal(strncmp(r->err.detail, head, strlen(head)), 0);
    if (strstr(r->err.detail, fragment) == NULL)
        fail_msg("detail \"%s\" lacks \"%s\"", r->err.detail, fragment);
    assert_int_equal(r->g.n, 0); /* a refused batch leaves nothing to free */
    assert_null(r->g.jobs);
}

/* Checks text, which must be refused (see expect_refused). */
static void refused(const char *text, enum route_job_graph_status st, size_t job,
                    const char *reference, const char *fragment)
{
    struct run r = {0};
    run_text(&r, text);
    expect_refused(&r, st, job, reference, fragment);
    run_done(&r);
}

/* Is g->order a permutation of the batch with every job after its batch parents? */
static void expect_topological(const struct route_job_graph *g)
{
    size_t *pos = malloc((g->n + 1) * sizeof(size_t));
    assert_non_null(pos);
    for (size_t i = 0; i < g->n; i++)
        pos[i] = SIZE_MAX;
    for (size_t k = 0; k < g->n; k++) {
        assert_true(g->order[k] < g->n);
        assert_int_equal(pos[g->order[k]], SIZE_MAX); /* once each */
        pos[g->order[k]] = k;
    }
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < g->jobs[i].nparents; k++)
            if (g->jobs[i].parents[k].id == 0 && pos[g->jobs[i].parents[k].index] >= pos[i])
                fail_msg("job %zu is ordered before its parent %zu", i,
                         g->jobs[i].parents[k].index);
    free(pos);
}

/* The batch index of the job of the input whose ref is ref, or SIZE_MAX. */
static size_t input_ref(json_t *jobs, const char *ref)
{
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        const char *r = json_string_value(json_object_get(json_array_get(jobs, i), "ref"));
        if (r != NULL && strcmp(r, ref) == 0)
            return i;
    }
    return SIZE_MAX;
}

/* Is each parent of r's input resolved in the order given: an id to itself, a ref to the job
 * that has it? */
static void expect_resolved(const struct run *r)
{
    if (!json_is_array(r->jobs))
        return;
    for (size_t i = 0; i < r->g.n; i++) {
        json_t *parents = json_object_get(json_array_get(r->jobs, i), "parents");
        assert_int_equal(r->g.jobs[i].nparents, json_array_size(parents));
        for (size_t k = 0; k < r->g.jobs[i].nparents; k++) {
            json_t *p = json_array_get(parents, k);
            const struct route_job_parent *got = &r->g.jobs[i].parents[k];
            if (json_is_integer(p))
                assert_int_equal(got->id, json_integer_value(p));
            else
                assert_true(got->id == 0 && got->index == input_ref(r->jobs, json_string_value(p)));
        }
    }
}

/* Expects r accepted: its parents resolved, its order topological. */
static void expect_ok(struct run *r)
{
    if (r->st != ROUTE_JOB_GRAPH_OK)
        fail_msg("status %d: %s", r->st, r->err.detail);
    assert_null(r->err.ext);
    expect_resolved(r);
    expect_topological(&r->g);
}

/* Expects r refused for a cycle of its input: "cycle" starts and ends with the ref of "job",
 * the job of the cycle with the lowest index, repeats no other ref, and each ref in it names the
 * next as a parent. Returns the cycle's length in jobs. */
static size_t expect_cycle(struct run *r)
{
    if (r->st != ROUTE_JOB_GRAPH_CYCLE)
        fail_msg("status %d, want a cycle (detail: %s)", r->st, r->err.detail);
    json_t *cycle = json_object_get(r->err.ext, "cycle");
    size_t len = json_array_size(cycle),
           job = json_integer_value(json_object_get(r->err.ext, "job"));
    assert_true(len >= 3); /* a job naming itself is refused before */
    const char *first = json_string_value(json_array_get(cycle, 0));
    assert_int_equal(input_ref(r->jobs, first), job);
    assert_string_equal(json_string_value(json_array_get(cycle, len - 1)), first);
    char *seen = calloc(json_array_size(r->jobs) + 1, 1);
    assert_non_null(seen);
    for (size_t k = 0; k + 1 < len; k++) {
        size_t at = input_ref(r->jobs, json_string_value(json_array_get(cycle, k)));
        assert_true(at != SIZE_MAX && at >= job && !seen[at]);
        seen[at] = 1;
        json_t *parents = json_object_get(json_array_get(r->jobs, at), "parents"), *p;
        size_t i;
        int named = 0;
        json_array_foreach(parents, i, p) named |= json_equal(p, json_array_get(cycle, k + 1));
        if (!named)
            fail_msg("%s does not name %s a parent", json_string_value(json_array_get(cycle, k)),
                     json_string_value(json_array_get(cycle, k + 1)));
    }
    free(seen);
    assert_non_null(strstr(r->err.detail, "waits for itself"));
    assert_int_equal(r->g.n, 0);
    return len - 1;
}

/* Expects r's order to be the n indexes of want. */
static void expect_order(const struct run *r, const size_t *want, size_t n)
{
    assert_int_equal(r->g.n, n);
    for (size_t k = 0; k < n; k++)
        if (r->g.order[k] != want[k])
            fail_msg("order[%zu] is %zu, want %zu", k, r->g.order[k], want[k]);
}

/* Expects parent k of job i to be the batch's job index. */
static void expect_batch_parent(const struct run *r, size_t i, size_t k, size_t index)
{
    assert_true(k < r->g.jobs[i].nparents);
    assert_int_equal(r->g.jobs[i].parents[k].id, 0);
    assert_int_equal(r->g.jobs[i].parents[k].index, index);
}

/* {"ref": ref, "payload": null, "parents": parents (stolen; NULL: none)} */
static json_t *job(const char *ref, json_t *parents)
{
    json_t *j = json_pack("{s:n}", "payload");
    if (ref != NULL)
        json_object_set_new(j, "ref", json_string(ref));
    if (parents != NULL)
        json_object_set_new(j, "parents", parents);
    return j;
}

static void test_plain_jobs(void **state)
{
    struct run r = {0};
    run_text(&r, "[{'payload': 1}, {'payload': 2, 'ref': 'b'}, 7]");
    expect_ok(&r);
    assert_int_equal(r.g.n, 3);
    assert_int_equal(r.g.nedges, 0);
    assert_null(r.g.jobs[0].ref);
    assert_string_equal(r.g.jobs[1].ref, "b");
    assert_int_equal(r.g.jobs[2].nparents, 0); /* not an object: the job parser refuses it */
    assert_int_equal(r.g.jobs[0].policy, ROUTE_PARENT_CANCEL);
    expect_order(&r, (size_t[]){0, 1, 2}, 3);
    run_done(&r);
    /* one job, not a batch: a batch of one, whose parents can only be ids */
    run_text(&r, "{'payload': 1, 'parents': [1234, 99], 'on_parent_failure': 'run'}");
    expect_ok(&r);
    assert_int_equal(r.g.n, 1);
    assert_int_equal(r.g.nedges, 2);
    assert_int_equal(r.g.jobs[0].parents[0].id, 1234);
    assert_int_equal(r.g.jobs[0].parents[1].id, 99);
    assert_int_equal(r.g.jobs[0].policy, ROUTE_PARENT_RUN);
    run_done(&r);
    refused("{'parents': ['a']}", ROUTE_JOB_GRAPH_INVALID, 0, "'a'", "no job of this batch");
    run_text(&r, "[]");
    expect_ok(&r);
    assert_int_equal(r.g.n, 0);
    run_done(&r);
}

/* The design's example: ids and refs side by side, each job's parents in the order given. */
static void test_chain_with_ids(void **state)
{
    struct run r = {0};
    run_text(&r, "[{'ref': 'extract', 'payload': 1},"
                 " {'ref': 'clean', 'payload': 2, 'parents': ['extract']},"
                 " {'ref': 'load', 'payload': 3, 'parents': ['clean', 1234],"
                 "  'on_parent_failure': 'run'}]");
    expect_ok(&r);
    assert_int_equal(r.g.nedges, 3);
    assert_int_equal(r.g.jobs[0].nparents, 0);
    expect_batch_parent(&r, 1, 0, 0);
    expect_batch_parent(&r, 2, 0, 1);
    assert_int_equal(r.g.jobs[2].parents[1].id, 1234);
    assert_int_equal(r.g.jobs[1].policy, ROUTE_PARENT_CANCEL);
    assert_int_equal(r.g.jobs[2].policy, ROUTE_PARENT_RUN);
    expect_order(&r, (size_t[]){0, 1, 2}, 3);
    run_done(&r);
    /* the same chain listed from its end */
    run_text(&r, "[{'ref': 'c', 'parents': ['b']}, {'ref': 'b', 'parents': ['a']},"
                 " {'ref': 'a'}]");
    expect_ok(&r);
    expect_order(&r, (size_t[]){2, 1, 0}, 3);
    run_done(&r);
}

/* A diamond listed child first: refs are found wherever they stand in the batch. */
static void test_diamond(void **state)
{
    struct run r = {0};
    run_text(&r, "[{'ref': 'd', 'parents': ['b', 'c']}, {'ref': 'c', 'parents': ['a']},"
                 " {'ref': 'b', 'parents': ['a']}, {'ref': 'a'}]");
    expect_ok(&r);
    expect_batch_parent(&r, 0, 0, 2);
    expect_batch_parent(&r, 0, 1, 1);
    expect_batch_parent(&r, 1, 0, 3);
    expect_batch_parent(&r, 2, 0, 3);
    expect_order(&r, (size_t[]){3, 1, 2, 0}, 4);
    run_done(&r);
}

/* Fan-in of 50 (one child of 50 parents) and fan-out of 50 (50 children of one parent). */
static void test_fan_in_and_out(void **state)
{
    json_t *jobs = json_array(), *parents = json_array();
    char ref[16];
    for (int i = 0; i < 50; i++) {
        snprintf(ref, sizeof(ref), "p%d", i);
        json_array_append_new(jobs, job(ref, NULL));
        json_array_append_new(parents, json_string(ref));
    }
    json_array_append_new(jobs, job("child", parents));
    for (int i = 0; i < 50; i++)
        json_array_append_new(jobs, job(NULL, json_pack("[s]", "child")));
    struct run r = {0};
    run_json(&r, jobs);
    expect_ok(&r);
    assert_int_equal(r.g.nedges, 100);
    for (size_t k = 0; k < 50; k++) {
        expect_batch_parent(&r, 50, k, k);
        expect_batch_parent(&r, 51 + k, 0, 50);
    }
    for (size_t k = 0; k <= 100; k++) /* the parents, the child, then its children */
        assert_int_equal(r.g.order[k], k);
    run_done(&r);
}

static void test_policy(void **state)
{
    struct run r = {0};
    run_text(&r, "[{'on_parent_failure': 'cancel'}, {'on_parent_failure': null},"
                 " {'on_parent_failure': 'run', 'parents': null, 'ref': null}]");
    expect_ok(&r);
    assert_int_equal(r.g.jobs[0].policy, ROUTE_PARENT_CANCEL);
    assert_int_equal(r.g.jobs[1].policy, ROUTE_PARENT_CANCEL);
    assert_int_equal(r.g.jobs[2].policy, ROUTE_PARENT_RUN);
    assert_null(r.g.jobs[2].ref);
    run_done(&r);
    const char *bad[] = {"'Run'", "'run\\u0000'", "1", "true", "''", "['run']", NULL};
    for (size_t i = 0; bad[i] != NULL; i++) {
        char text[64];
        snprintf(text, sizeof(text), "[{}, {'on_parent_failure': %s}]", bad[i]);
        refused(text, ROUTE_JOB_GRAPH_INVALID, 1, NULL, "\"on_parent_failure\" is \"cancel\"");
    }
}

static void test_self_parent(void **state)
{
    refused("[{'ref': 'a'}, {'ref': 'b', 'parents': ['a', 'b']}]", ROUTE_JOB_GRAPH_INVALID, 1,
            "'b'", "parent 1 is \"b\", the job's own ref");
}

static void test_repeated_parent(void **state)
{
    refused("[{'ref': 'a'}, {'parents': ['a', 'a']}]", ROUTE_JOB_GRAPH_INVALID, 1, "'a'",
            "parents 0 and 1 name the same job");
    refused("[{'parents': [5, 7, 5]}]", ROUTE_JOB_GRAPH_INVALID, 0, "5",
            "parents 0 and 2 name the same job");
    /* the first repeat in the order given, not the first in sort order */
    refused("[{'ref': 'a'}, {'parents': [9, 'a', 3, 9, 'a', 3]}]", ROUTE_JOB_GRAPH_INVALID, 1, "9",
            "parents 0 and 3 name the same job");
    /* an id and a ref never name the same job; the same id in two jobs is two edges */
    struct run r = {0};
    run_text(&r, "[{'ref': 'a', 'parents': [1]}, {'parents': ['a', 1]}]");
    expect_ok(&r);
    run_done(&r);
}

static void test_unknown_ref(void **state)
{
    refused("[{'ref': 'extract'}, {'ref': 'clean', 'parents': ['extract']},"
            " {'ref': 'load', 'parents': ['clen']}]",
            ROUTE_JOB_GRAPH_INVALID, 2, "'clen'",
            "parent 0, \"clen\", is the ref of no job of this batch");
    /* a ref is compared whole: a prefix, or another case, is not it */
    refused("[{'ref': 'ab'}, {'parents': ['a']}]", ROUTE_JOB_GRAPH_INVALID, 1, "'a'", "no job");
    refused("[{'ref': 'ab'}, {'parents': ['AB']}]", ROUTE_JOB_GRAPH_INVALID, 1, "'AB'", "no job");
}

static void test_duplicate_ref(void **state)
{
    refused("[{'ref': 'a'}, {'ref': 'b'}, {'ref': 'a'}]", ROUTE_JOB_GRAPH_INVALID, 2, "'a'",
            "ref \"a\" is already the ref of job 0");
    /* the first job, in batch order, whose ref an earlier job has */
    refused("[{'ref': 'x'}, {'ref': 'a'}, {'ref': 'b'}, {'ref': 'b'},"
            " {'ref': 'a'}, {'ref': 'a'}]",
            ROUTE_JOB_GRAPH_INVALID, 3, "'b'", "ref \"b\" is already the ref of job 2");
}

static void test_bad_types(void **state)
{
    const char *msg = "is neither a job id (a positive integer) nor a ref of this batch";
    refused("[{'parents': [1.5]}]", ROUTE_JOB_GRAPH_INVALID, 0, "1.5", msg);
    refused("[{'parents': [3.0]}]", ROUTE_JOB_GRAPH_INVALID, 0, "3.0", msg);
    refused("[{'parents': [true]}]", ROUTE_JOB_GRAPH_INVALID, 0, "true", msg);
    refused("[{'parents': [null]}]", ROUTE_JOB_GRAPH_INVALID, 0, "null", msg);
    refused("[{'parents': [{'id': 1}]}]", ROUTE_JOB_GRAPH_INVALID, 0, "{'id': 1}", msg);
    refused("[{'parents': [0]}]", ROUTE_JOB_GRAPH_INVALID, 0, "0", msg);
    refused("[{'parents': [-3]}]", ROUTE_JOB_GRAPH_INVALID, 0, "-3", msg);
    refused("[{}, {'parents': [1, '']}]", ROUTE_JOB_GRAPH_INVALID, 1, "''",
            "parent 1: a ref is not empty");
    refused("[{'parents': ['a\\u0000b']}]", ROUTE_JOB_GRAPH_INVALID, 0, "'a\\u0000b'",
            "a ref is valid UTF-8");
    refused("[{'parents': 'a'}]", ROUTE_JOB_GRAPH_INVALID, 0, NULL, "\"parents\" is an array");
    refused("[{'ref': 5}]", ROUTE_JOB_GRAPH_INVALID, 0, "5", "\"ref\": a ref is a string");
    refused("[{'ref': ''}]", ROUTE_JOB_GRAPH_INVALID, 0, "''", "a ref is not empty");
    /* the largest id is an id */
    struct run r = {0};
    run_text(&r, "[{'parents': [9223372036854775807]}]");
    expect_ok(&r);
    assert_int_equal(r.g.jobs[0].parents[0].id, INT64_MAX);
    run_done(&r);
}

/* A ref of 128 bytes is one; of 129 bytes, as a job's ref or as a parent, is not. */
static void test_ref_length(void **state)
{
    char ref[ROUTE_JOB_REF_MAX + 2];
    memset(ref, 'r', sizeof(ref) - 1);
    ref[ROUTE_JOB_REF_MAX] = '\0';
    struct run r = {0};
    run_json(&r, json_pack("[{s:s}, {s:[s]}]", "ref", ref, "parents", ref));
    expect_ok(&r);
    expect_batch_parent(&r, 1, 0, 0);
    run_done(&r);
    ref[ROUTE_JOB_REF_MAX] = 'r';
    ref[ROUTE_JOB_REF_MAX + 1] = '\0';
    char quoted[sizeof(ref) + 2];
    snprintf(quoted, sizeof(quoted), "'%s'", ref);
    run_json(&r, json_pack("[{s:s}]", "ref", ref));
    expect_refused(&r, ROUTE_JOB_GRAPH_INVALID, 0, quoted,
                   "\"ref\": a ref has at most 128 bytes; this one has 129");
    run_done(&r);
    run_json(&r, json_pack("[{}, {s:[s]}]", "parents", ref));
    expect_refused(&r, ROUTE_JOB_GRAPH_INVALID, 1, quoted,
                   "parent 0: a ref has at most 128 bytes; this one has 129");
    run_done(&r);
}

/* n jobs without refs, each with per ids as parents (1..per). */
static json_t *jobs_of_ids(size_t n, size_t per)
{
    json_t *jobs = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *parents = json_array();
        for (size_t k = 0; k < per; k++)
            json_array_append_new(parents, json_integer((json_int_t)k + 1));
        json_array_append_new(jobs, job(NULL, parents));
    }
    return jobs;
}

static void test_parents_limit(void **state)
{
    struct run r = {0};
    run_json(&r, jobs_of_ids(2, ROUTE_JOB_PARENTS_MAX));
    expect_ok(&r);
    assert_int_equal(r.g.jobs[1].nparents, ROUTE_JOB_PARENTS_MAX);
    assert_int_equal(r.g.nedges, 2 * ROUTE_JOB_PARENTS_MAX);
    run_done(&r);
    json_t *jobs = jobs_of_ids(2, ROUTE_JOB_PARENTS_MAX);
    json_array_append_new(json_object_get(json_array_get(jobs, 1), "parents"), json_integer(1001));
    run_json(&r, jobs);
    expect_refused(&r, ROUTE_JOB_GRAPH_INVALID, 1, NULL,
                   "a job has at most 1000 parents; this one has 1001");
    run_done(&r);
}

static void test_edges_limit(void **state)
{
    size_t jobs = ROUTE_JOB_EDGES_MAX / ROUTE_JOB_PARENTS_MAX;
    struct run r = {0};
    run_json(&r, jobs_of_ids(jobs, ROUTE_JOB_PARENTS_MAX));
    expect_ok(&r);
    assert_int_equal(r.g.nedges, ROUTE_JOB_EDGES_MAX);
    run_done(&r);
    json_t *more = jobs_of_ids(jobs, ROUTE_JOB_PARENTS_MAX);
    json_array_append_new(more, json_pack("{s:n}", "payload")); /* no parents: not past it */
    json_array_append_new(more, job(NULL, json_pack("[i]", 1)));
    run_json(&r, more);
    expect_refused(&r, ROUTE_JOB_GRAPH_INVALID, jobs + 1, NULL,
                   "a request names at most 10000 parents in all; jobs 0 to 11 name 10001");
    run_done(&r);
}

/* Checks text into r, which must be refused for the cycle want (JSON text) from job. */
static void expect_cycle_of(struct run *r, const char *text, const char *want, size_t job)
{
    run_text(r, text);
    expect_cycle(r);
    json_t *w = loads(want);
    if (!json_equal(json_object_get(r->err.ext, "cycle"), w))
        fail_msg("cycle is not %s (detail: %s)", want, r->err.detail);
    json_decref(w);
    assert_int_equal(json_integer_value(json_object_get(r->err.ext, "job")), job);
}

/* A 3-cycle in a DAG, listed after a job that waits on it: the cycle is reported, from its job
 * of the lowest index, without the job downstream. */
static void test_cycle_of_three(void **state)
{
    struct run r = {0};
    expect_cycle_of(&r,
                    "[{'ref': 'd', 'parents': ['c']}, {'ref': 'r'},"
                    " {'ref': 'e', 'parents': ['r']},"
                    " {'ref': 'a', 'parents': ['r', 'c']}, {'ref': 'b', 'parents': ['a']},"
                    " {'ref': 'c', 'parents': ['b', 17]},"
                    " {'ref': 'f', 'parents': ['e', 'd']}]",
                    "['a', 'c', 'b', 'a']", 3);
    assert_string_equal(r.err.detail, "job 3: ref \"a\" waits for itself through 2 other job(s); "
                                      "each ref in \"cycle\" names the next as a parent");
    run_done(&r);
}

static void test_cycle_of_two(void **state)
{
    struct run r = {0};
    expect_cycle_of(&r,
                    "[{'ref': 'x', 'parents': ['q']}, {'ref': 'p'},"
                    " {'ref': 'q', 'parents': ['p', 'w']}, {'ref': 'w', 'parents': ['q']},"
                    " {'ref': 'z', 'parents': ['p']}]",
                    "['q', 'w', 'q']", 2);
    run_done(&r);
}

/* Both cycles in one batch, beside a DAG: one of them is reported, and it is one of the input. */
static void test_two_cycles(void **state)
{
    struct run r = {0};
    run_text(&r, "[{'ref': 'top'}, {'ref': 'a', 'parents': ['top', 'c']},"
                 " {'ref': 'b', 'parents': ['a']}, {'ref': 'c', 'parents': ['b']},"
                 " {'ref': 'q', 'parents': ['top', 'w']}, {'ref': 'w', 'parents': ['q']},"
                 " {'ref': 'end', 'parents': ['c', 'w']}]");
    size_t len = expect_cycle(&r);
    assert_true(len == 2 || len == 3);
    run_done(&r);
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random DAG of n jobs in a shuffled batch order: job of rank r has ref "j<r>" and names up to
 * 8 jobs of lower ranks and sometimes an id as its parents. */
static json_t *random_dag(uint64_t seed, size_t n)
{
    uint64_t s = seed * 2654435761u + 1;
    size_t *rank = malloc(n * sizeof(size_t));
    assert_non_null(rank);
    for (size_t i = 0; i < n; i++)
        rank[i] = i;
    for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        size_t k = rng_next(&s) % (i + 1), t = rank[i];
        rank[i] = rank[k];
        rank[k] = t;
    }
    json_t *jobs = json_array();
    char ref[24];
    for (size_t i = 0; i < n; i++) {
        json_t *parents = json_array();
        size_t want = rank[i] == 0 ? 0 : rng_next(&s) % 9;
        for (size_t k = 0; k < want; k++) {
            snprintf(ref, sizeof(ref), "j%zu", (size_t)(rng_next(&s) % rank[i]));
            json_t *p = json_string(ref);
            size_t at;
            json_t *q;
            int dup = 0;
            json_array_foreach(parents, at, q) dup |= json_equal(p, q);
            if (dup)
                json_decref(p);
            else
                json_array_append_new(parents, p);
        }
        if (rng_next(&s) % 4 == 0)
            json_array_append_new(parents, json_integer((json_int_t)(rng_next(&s) % 1000000) + 1));
        snprintf(ref, sizeof(ref), "j%zu", rank[i]);
        json_array_append_new(jobs, job(ref, parents));
    }
    free(rank);
    return jobs;
}

/* Random DAGs of 1,000 jobs: each order is topological; with one edge added that closes a
 * cycle (a job named a parent by an ancestor of its, through a walk up its parents), the cycle
 * reported is one of the input. */
static void test_random_dags(void **state)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        print_message("seed %llu\n", (unsigned long long)seed);
        struct run r = {0};
        run_json(&r, random_dag(seed, 1000));
        expect_ok(&r);
        /* walk up from a job with a batch parent, then name that job a parent at the top */
        size_t from = 0, at, steps = 0;
        while (r.g.jobs[from].nparents == 0 || r.g.jobs[from].parents[0].id != 0)
            from++;
        for (at = from; r.g.jobs[at].nparents > 0 && r.g.jobs[at].parents[0].id == 0 && steps < 6;
             steps++)
            at = r.g.jobs[at].parents[0].index;
        json_t *top = json_array_get(r.jobs, at),
               *back = json_object_get(json_array_get(r.jobs, from), "ref");
        if (json_object_get(top, "parents") == NULL)
            json_object_set_new(top, "parents", json_array());
        json_array_insert(json_object_get(top, "parents"), 0, back);
        json_t *jobs = json_incref(r.jobs);
        run_done(&r);
        run_json(&r, jobs);
        assert_true(expect_cycle(&r) >= 2);
        run_done(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_jobs),      cmocka_unit_test(test_chain_with_ids),
        cmocka_unit_test(test_diamond),         cmocka_unit_test(test_fan_in_and_out),
        cmocka_unit_test(test_policy),          cmocka_unit_test(test_self_parent),
        cmocka_unit_test(test_repeated_parent), cmocka_unit_test(test_unknown_ref),
        cmocka_unit_test(test_duplicate_ref),   cmocka_unit_test(test_bad_types),
        cmocka_unit_test(test_ref_length),      cmocka_unit_test(test_parents_limit),
        cmocka_unit_test(test_edges_limit),     cmocka_unit_test(test_cycle_of_three),
        cmocka_unit_test(test_cycle_of_two),    cmocka_unit_test(test_two_cycles),
        cmocka_unit_test(test_random_dags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
