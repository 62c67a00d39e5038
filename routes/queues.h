/* The queues family's own header: its problem codes, and what routes/queues.c (queues, jobs,
 * metrics, janitor) and routes/leases.c (claims, lease writes, settlements) share. */
#ifndef ROUTES_QUEUES_H
#define ROUTES_QUEUES_H

#include <jansson.h>
#include <stdint.h>

#include "db/queues.h"
#include "routes/job_graph.h"
#include "routes/routes.h"
#include "service/jpage.h"

enum queue_problem {
    QUEUE_PC_INVALID_JOB,
    QUEUE_PC_INVALID_LEASE,
    QUEUE_PC_QUEUE_NOT_FOUND,
    QUEUE_PC_JOB_NOT_FOUND,
    QUEUE_PC_LEASE_OWNER_MISMATCH,
    QUEUE_PC_LEASE_FENCE_MISMATCH,
    QUEUE_PC_LEASE_EXPIRED,
    QUEUE_PC_JOB_TERMINAL,
    QUEUE_PC_JOB_CANCELLED,
    QUEUE_PC_JOB_NOT_FAILED,
    QUEUE_PC_QUEUE_BUSY,
    QUEUE_PC_QUEUE_HAS_SCHEDULES,
    QUEUE_PC_KEY_NOT_FOUND,
    QUEUE_PC_INVALID_FILTER,
    QUEUE_PC_INVALID_DEPENDENCIES,
    QUEUE_PC_DEPENDENCY_CYCLE,
    QUEUE_PC_UNKNOWN_PARENT,
    QUEUE_PC_PARENT_FAILED,
    QUEUE_PC_TOO_MANY_CHILDREN,
    QUEUE_PC_EFFECT_REFUSED,
    QUEUE_PC_COUNT
};
extern const struct svc_problem_info queue_problems[QUEUE_PC_COUNT];
#define QUEUE_P(name) (&queue_problems[QUEUE_PC_##name])

/* How a request item parsed: into the workflow's input, refused with a reason (400), or valid
 * but its JSON could not be encoded for the database (500: out of memory). */
enum parsed { PARSE_OK, PARSE_INVALID, PARSE_UNENCODABLE };

/* Jobs to enqueue, parsed and checked: POST /queues/{queue}/jobs, and a completion's enqueue
 * effects (routes/effects.c). */
struct queue_enqueue {
    const char *what; /* what problems' details start with ("" for the enqueue route) */
    json_t *batch;    /* the "jobs" array (borrowed), NULL for one job */
    size_t n;
    struct db_job_in *jobs;
    struct db_job_ref *refs;       /* out: each job's id and whether it was a duplicate */
    char **payloads;               /* the jobs' payload texts, owned */
    struct route_job_graph graph;  /* the jobs' parents, checked */
    struct db_job_parent *parents; /* graph.edges as the workflow takes them */
    struct db_dep_refusal refusal; /* out: the parent a refusal names */
};
/* Parses the JSON array jobs (borrowed: it outlives e's use) into e, as the enqueue route parses
 * a batch; what prefixes each problem's detail. 0, or -1 after replying. */
int queue_enqueue_parse_jobs(struct svc_request *req, json_t *jobs, const char *what,
                             struct queue_enqueue *e, enum svc_outcome *out);
void queue_enqueue_free(struct queue_enqueue *e);
/* Whether an enqueue's verdict is a refusal of its jobs (a value, a parent), which
 * queue_enqueue_refused answers as the enqueue route does. */
int queue_enqueue_refusal(enum db_queue_verdict v);
enum svc_outcome queue_enqueue_refused(struct svc_request *req, const struct queue_enqueue *e,
                                       enum db_queue_verdict v, const struct db_error *err);
/* Counts n jobs enqueued into queue and wakes as many of its waiting claims. */
void queue_enqueued(struct svc_request *req, const char *queue, size_t n);

/* Counters of routes/queues.c that the lease routes add to (labelled by queue). */
extern struct svc_counter_vec *queue_m_claims, *queue_m_reclaims, *queue_m_completions,
    *queue_m_failures;
/* Jobs changed by the bulk operator actions (routes/job_bulk.c), labelled by queue and action. */
extern struct svc_counter_vec *queue_m_bulk;

/* o with its member name set to v (both stolen). A NULL v (a json_pack or copy that failed)
 * fails the whole value: NULL, which svc_reply_json answers with 500 internal_error. */
json_t *queue_with(json_t *o, const char *name, json_t *v);
/* The same for an array's element. */
json_t *queue_appended(json_t *arr, json_t *v);
/* ROWLOCK_RESPONSE_BUDGET: the bytes a page of jobs or leases may take. */
long long queue_budget(struct svc_request *req);
/* The wake-up channel of a queue ("queue:<name>") in buf (SVC_CHANNEL_MAX bytes hold any). */
const char *queue_channel(const char *queue, char *buf, size_t size);
/* Counts a refused lease write by its reason. */
void queue_count_rejection(const char *queue, enum db_queue_verdict v);
/* The {queue} path parameter into *queue and the job id parameter name; 0 after replying 400. */
int64_t queue_job_params(struct svc_request *req, const char *name, const char **queue,
                         enum svc_outcome *out);
/* The JSON text of j's member name into *text (malloc'd, the caller frees it; NULL when the
 * member is absent). 0, or -1 when it cannot be encoded. */
int queue_member_text(json_t *j, const char *name, char **text);
/* "owner": non-empty UTF-8 up to 255 bytes. 1, or 0 with why. */
int queue_owner_member(json_t *b, const char **owner, char *why, size_t size);
/* Closes a page with the top-level members of tail (stolen) and replies with it; 500 when the
 * page or tail (a json_pack that failed) could not be encoded. */
enum svc_outcome queue_page_reply(struct svc_request *req, struct svc_jpage *page, json_t *tail,
                                  const char *what);
/* The answer to a workflow that did not succeed: its database failure (st), else its verdict v
 * on the queue (and job id, 0 when none). */
enum svc_outcome queue_refused(struct svc_request *req, enum db_status st,
                               const struct db_error *err, const char *queue,
                               enum db_queue_verdict v, int64_t id);
/* A queue's or key's limits as the API shows them: {"concurrency": N or null, "rate": {"limit",
 * "period_seconds", "burst"} or null}. */
json_t *queue_limits_json(const struct db_queue_limits *l);
/* obj's member name (absent or null: no limits) as limits into *l. 1, or 0 with why. */
int queue_limits_parse(json_t *obj, const char *name, struct db_queue_limits *l, char *why,
                       size_t size);
/* routes/queue_keys.c: a queue's concurrency keys. */
enum svc_outcome route_queue_key_put(struct svc_request *req);
enum svc_outcome route_queue_key_get(struct svc_request *req);
enum svc_outcome route_queue_key_delete(struct svc_request *req);
enum svc_outcome route_queue_keys_list(struct svc_request *req);
/* Wakes n claims waiting on the queue (-1: every one). */
void queue_wake(struct svc_request *req, const char *queue, long n);
/* Wakes n when the queue has a limit (settlements there free slots). */
void queue_wake_limited(struct svc_request *req, const char *queue, long n);

/* routes/leases.c: the handlers of claims, lease writes and settlements. */
enum svc_outcome route_leases_claim(struct svc_request *req);
enum svc_outcome route_lease_heartbeat(struct svc_request *req);
enum svc_outcome route_lease_complete(struct svc_request *req);
enum svc_outcome route_lease_fail(struct svc_request *req);
enum svc_outcome route_lease_handback(struct svc_request *req);
enum svc_outcome route_lease_release(struct svc_request *req);
enum svc_outcome route_leases_complete_batch(struct svc_request *req);

/* routes/job_bulk.c: the bulk operator actions, one page of jobs a call. */
enum svc_outcome route_jobs_retry_bulk(struct svc_request *req);
enum svc_outcome route_jobs_cancel_bulk(struct svc_request *req);

/* The family (routes/families.c). */
extern const struct svc_family route_queues_family;

#endif
