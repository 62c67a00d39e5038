/* The route table: every REST route with its handler, required scope and body type. The OpenAPI
 * document must list exactly these (tests/unit/routes/test_route_table_openapi.c checks). Also the
 * shared mapping from db/ statuses to problem responses. */
#include "routes/routes.h"

#include "service/log.h"

const struct svc_route routes_table[] = {
    {"GET", "/healthz", route_healthz, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/readyz", route_readyz, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/metrics", route_metrics, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/openapi.json", route_openapi, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/ui", route_ui_page, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/ui/", route_ui_slash, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/ui/app.js", route_ui_script, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/ui/app.css", route_ui_style, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/whoami", route_whoami, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE},
    {"GET", "/topics", route_topics_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"PUT", "/topics/{topic}", route_topic_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER},
    {"GET", "/topics/{topic}", route_topic_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"DELETE", "/topics/{topic}", route_topic_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"PUT", "/topics/{topic}/producers/{producer}", route_producer_put, SVC_SCOPE_ADMIN,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"POST", "/topics/{topic}/messages", route_messages_produce, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/messages", route_messages_read, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/keys", route_keys_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/keys/{key}/messages", route_key_history, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/keys/{key}/head", route_head_get, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"PATCH", "/topics/{topic}/keys/{key}/head", route_head_patch, SVC_SCOPE_WRITE,
     SVC_BODY_MERGE_PATCH, SVC_RUN_WORKER},
    {"PUT", "/topics/{topic}/keys/{key}/head", route_head_put, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER},
    {"DELETE", "/topics/{topic}/keys/{key}/head", route_head_delete, SVC_SCOPE_WRITE, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/consumers", route_consumers_list, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"PUT", "/topics/{topic}/consumers/{consumer}", route_consumer_put, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"GET", "/topics/{topic}/consumers/{consumer}", route_consumer_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER},
    {"DELETE", "/topics/{topic}/consumers/{consumer}", route_consumer_delete, SVC_SCOPE_WRITE,
     SVC_BODY_NONE, SVC_RUN_WORKER},
    {"POST", "/topics/{topic}/consumers/{consumer}/commit", route_consumer_commit, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER},
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
    {"GET", "/ledgers", route_ledgers_list, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"PUT", "/ledgers/{ledger}", route_ledger_put, SVC_SCOPE_ADMIN, SVC_BODY_JSON, SVC_RUN_WORKER},
    {"GET", "/ledgers/{ledger}", route_ledger_get, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER},
    {"DELETE", "/ledgers/{ledger}", route_ledger_delete, SVC_SCOPE_ADMIN, SVC_BODY_NONE,
     SVC_RUN_WORKER},
    {"POST", "/ledgers/{ledger}/transactions", route_ledger_submit, SVC_SCOPE_WRITE, SVC_BODY_JSON,
     SVC_RUN_WORKER},
    {"POST", "/ledgers/{ledger}/checkpoints", route_ledger_checkpoint, SVC_SCOPE_WRITE,
     SVC_BODY_JSON, SVC_RUN_WORKER},
    {"GET", "/ledgers/{ledger}/transactions/{digest}", route_ledger_tx_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/ledgers/{ledger}/objects/{id}", route_ledger_object_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/ledgers/{ledger}/displays/{type}", route_ledger_display_get, SVC_SCOPE_READ,
     SVC_BODY_NONE, SVC_RUN_WORKER},
    {"GET", "/ledgers/{ledger}/events", route_ledger_events, SVC_SCOPE_READ, SVC_BODY_NONE,
     SVC_RUN_WORKER},
};

const size_t routes_count = sizeof(routes_table) / sizeof(routes_table[0]);

enum svc_outcome route_db_problem(struct svc_request *req, enum db_status st,
                                  const struct db_error *err)
{
    switch (st) {
    case DB_ERR_POOL_TIMEOUT:
        return svc_reply_problem(req, SVC_P_POOL_EXHAUSTED, "%s", err->message);
    case DB_ERR_UNAVAILABLE:
        return svc_reply_problem(req, SVC_P_DATABASE_UNAVAILABLE, "%s", err->message);
    case DB_ERR_OUTCOME_UNKNOWN:
        svc_log(SVC_LOG_WARN, "write outcome unknown", "request_id", svc_req_id(req), "detail",
                err->message, NULL);
        return svc_reply_problem(req, SVC_P_OUTCOME_UNKNOWN,
                                 "%s; retry only with a dedupe key, a producer sequence or a "
                                 "ledger digest, or read the resource first",
                                 err->message);
    case DB_ERR_TIMEOUT:
        return svc_reply_problem(req, SVC_P_DATABASE_TIMEOUT, "%s", err->message);
    case DB_ERR_RETRY:
        return svc_reply_problem(req, SVC_P_DATABASE_BUSY,
                                 "the transaction kept conflicting with concurrent ones: %s",
                                 err->message);
    default:
        svc_log(SVC_LOG_ERROR, "database error", "request_id", svc_req_id(req), "sqlstate",
                err->sqlstate, "detail", err->message, NULL);
        return svc_reply_problem(req, SVC_P_INTERNAL_ERROR,
                                 "unexpected database error (SQLSTATE %s); see the log for "
                                 "request %s",
                                 err->sqlstate[0] ? err->sqlstate : "none", svc_req_id(req));
    }
}
