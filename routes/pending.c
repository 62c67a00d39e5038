/* TRANSITIONAL (issue 16): the queue and ledger families until their files own them. */
#include "routes/routes.h"

const struct svc_problem_info queue_problems[QUEUE_PC_COUNT] = {
    [QUEUE_PC_INVALID_JOB] = {"invalid_job", 400, "Invalid job"},
    [QUEUE_PC_INVALID_LEASE] = {"invalid_lease", 400, "Invalid lease request"},
    [QUEUE_PC_QUEUE_NOT_FOUND] = {"queue_not_found", 404, "No such queue"},
    [QUEUE_PC_JOB_NOT_FOUND] = {"job_not_found", 404, "No such job"},
    [QUEUE_PC_LEASE_OWNER_MISMATCH] = {"lease_owner_mismatch", 409, "Lease held by another owner"},
    [QUEUE_PC_LEASE_FENCE_MISMATCH] = {"lease_fence_mismatch", 409, "Stale lease fence"},
    [QUEUE_PC_LEASE_EXPIRED] = {"lease_expired", 409, "Lease expired"},
    [QUEUE_PC_JOB_TERMINAL] = {"job_terminal", 409, "Job already finished"},
    [QUEUE_PC_JOB_NOT_FAILED] = {"job_not_failed", 409, "Job is not failed"},
    [QUEUE_PC_QUEUE_BUSY] = {"queue_busy", 409, "Queue has jobs in processing"},
};

static int queues_init(const struct svc_app *app)
{
    (void)app;
    route_queues_init();
    return 0;
}

static const struct svc_route queue_routes[] = {
    {"GET", "/queues", route_queues_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"PUT", "/queues/{queue}", route_queue_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER},
    {"GET", "/queues/{queue}", route_queue_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"DELETE", "/queues/{queue}", route_queue_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/jobs", route_jobs_enqueue, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER},
    {"GET", "/queues/{queue}/jobs", route_jobs_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/queues/{queue}/jobs/{id}", route_job_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"DELETE", "/queues/{queue}/jobs/{id}", route_job_cancel, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/jobs/{id}/retry", route_job_retry, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases", route_leases_claim, SVC_SCOPE_WORK, SVC_BODY_JSON,
     SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases:complete", route_leases_complete_batch, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"PATCH", "/queues/{queue}/leases/{job_id}", route_lease_heartbeat, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases/{job_id}/complete", route_lease_complete, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases/{job_id}/fail", route_lease_fail, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases/{job_id}/handback", route_lease_handback, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"POST", "/queues/{queue}/leases/{job_id}/release", route_lease_release, SVC_SCOPE_WORK,
     SVC_BODY_JSON, SVC_RUN_WORKER},
};

const struct svc_family route_queues_family = {
    .name = "queues",
    .routes = queue_routes,
    .nroutes = sizeof(queue_routes) / sizeof(queue_routes[0]),
    .problems = queue_problems,
    .nproblems = QUEUE_PC_COUNT,
    .init = queues_init,
    .render_metrics = route_queues_render_metrics,
    .janitor_pass = route_queues_janitor_pass,
};
