/* The dependencies of an enqueue batch, checked in C before any SQL: each job's "ref",
 * "parents" and "on_parent_failure" read from its JSON object, refs unique and resolved to batch
 * indexes, the limits, and no cycle among the batch's jobs; the answer is an order that puts
 * every job after its batch parents. The rest of a job (routes/queues.c), the problem responses
 * (the route, from the status and error here) and linking by ids (db/) do not belong here. */
#ifndef ROUTES_JOB_GRAPH_H
#define ROUTES_JOB_GRAPH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define ROUTE_JOB_REF_MAX     128   /* bytes of a ref (the key rule otherwise: non-empty UTF-8) */
#define ROUTE_JOB_PARENTS_MAX 1000  /* parents of one job */
#define ROUTE_JOB_EDGES_MAX   10000 /* parents of all the jobs of one request, summed */

/* Bytes of an error's detail: the longest sentence with a ref in it fits. */
#define ROUTE_JOB_GRAPH_DETAIL_SIZE 320

/* What the check found. Each refusal is answered 400 with the problem code in its comment. */
enum route_job_graph_status {
    ROUTE_JOB_GRAPH_OK,
    ROUTE_JOB_GRAPH_INVALID, /* invalid_dependencies */
    ROUTE_JOB_GRAPH_CYCLE,   /* dependency_cycle */
    ROUTE_JOB_GRAPH_NOMEM,   /* out of memory (500) */
};

/* on_parent_failure: what a job does when a parent fails or is cancelled. */
enum route_parent_policy { ROUTE_PARENT_CANCEL, ROUTE_PARENT_RUN };

/* One parent of a job: a job that existed before the request (id > 0), or a job of the batch
 * (id 0, index its batch index). */
struct route_job_parent {
    int64_t id;
    size_t index;
};

/* One job's dependencies. */
struct route_job_deps {
    const char *ref; /* borrowed from the job's JSON; NULL when it has none */
    enum route_parent_policy policy;
    size_t nparents;
    const struct route_job_parent *parents; /* in the order given (points into edges) */
};

/* A checked batch. Its refs are borrowed from the JSON it was read from, which outlives it. */
struct route_job_graph {
    size_t n;                    /* jobs in the batch */
    struct route_job_deps *jobs; /* n, by batch index */
    /* the n batch indexes, every job after its batch parents (those without any first, in
     * batch order) */
    size_t *order;
    size_t nedges; /* parents of all the jobs (0: a batch without dependencies) */
    struct route_job_parent *edges;
};

/* Why a batch was refused: a detail that names the job's index and the reference at fault, and
 * the problem's extra members, ext: {"job": index, "reference": the value at fault} (reference
 * absent where the fault is a count), or {"job": index, "cycle": ["a", "b", "c", "a"]}. */
struct route_job_graph_error {
    char detail[ROUTE_JOB_GRAPH_DETAIL_SIZE];
    json_t *ext;
};

/* Checks the dependencies of jobs (borrowed): an array of job objects, or one job object (a
 * batch of one). A job that is not an object has none (refusing it is the job parser's). Refs:
 * unique, 1-128 bytes of the key rule. parents: an array of job ids (positive integers) and
 * refs of other jobs of the batch, none twice, at most ROUTE_JOB_PARENTS_MAX a job and
 * ROUTE_JOB_EDGES_MAX in all. on_parent_failure: "cancel" (the default) or "run". null is the
 * same as absent. Integer parents are only range-checked: a new job's id is drawn at insert, so
 * an id can never close a cycle.
 * OK: *g holds the graph (free it with route_job_graph_free), err->ext is NULL. INVALID or
 * CYCLE: err holds why, and err->ext a new reference the caller owns (svc_reply_problem_ext
 * steals it). A cycle's "job" is its job of the lowest index, whose ref is the first and the
 * last of "cycle"; each ref there names the next as a parent.
 * NOMEM: nothing to report. On any status but OK, *g is empty; route_job_graph_free(g) is safe
 * either way. */
enum route_job_graph_status route_job_graph_check(json_t *jobs, struct route_job_graph *g,
                                                  struct route_job_graph_error *err);
/* Frees what g holds (not the JSON its refs point into) and empties it; an empty g is a no-op. */
void route_job_graph_free(struct route_job_graph *g);

#endif
