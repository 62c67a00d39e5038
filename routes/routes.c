/* What the families share: the problem codes several of them answer, and the mapping from db/
 * statuses to problem responses. */
#include "routes/routes.h"

#include "service/log.h"

const struct svc_problem_info route_problems[ROUTE_PC_COUNT] = {
    [ROUTE_PC_INVALID_NAME] = {"invalid_name", 400, "Invalid name"},
    [ROUTE_PC_INVALID_KEY] = {"invalid_key", 400, "Invalid key"},
    [ROUTE_PC_INVALID_CONFIG] = {"invalid_config", 400, "Invalid configuration"},
    [ROUTE_PC_BATCH_TOO_LARGE] = {"batch_too_large", 400, "Batch too large"},
    [ROUTE_PC_DATABASE_UNAVAILABLE] = {"database_unavailable", 503, "Database unavailable"},
    [ROUTE_PC_POOL_EXHAUSTED] = {"pool_exhausted", 503, "No database connection free"},
    [ROUTE_PC_DATABASE_TIMEOUT] = {"database_timeout", 503, "Database statement timed out"},
    [ROUTE_PC_DATABASE_BUSY] = {"database_busy", 503, "Transaction kept conflicting; retry"},
    [ROUTE_PC_OUTCOME_UNKNOWN] = {"outcome_unknown", 503, "Connection lost after COMMIT was sent"},
};

/* No routes of its own: the codes every family may answer. */
const struct svc_family route_common_family = {
    .name = "common",
    .problems = route_problems,
    .nproblems = ROUTE_PC_COUNT,
};

enum svc_outcome route_db_problem(struct svc_request *req, enum db_status st,
                                  const struct db_error *err)
{
    switch (st) {
    case DB_ERR_POOL_TIMEOUT:
        return svc_reply_problem(req, ROUTE_P(POOL_EXHAUSTED), "%s", err->message);
    case DB_ERR_UNAVAILABLE:
        return svc_reply_problem(req, ROUTE_P(DATABASE_UNAVAILABLE), "%s", err->message);
    case DB_ERR_OUTCOME_UNKNOWN:
        svc_log(SVC_LOG_WARN, "write outcome unknown", "request_id", svc_req_id(req), "detail",
                err->message, NULL);
        return svc_reply_problem(req, ROUTE_P(OUTCOME_UNKNOWN),
                                 "%s; retry only with a dedupe key, a producer sequence or a "
                                 "ledger digest, or read the resource first",
                                 err->message);
    case DB_ERR_TIMEOUT:
        return svc_reply_problem(req, ROUTE_P(DATABASE_TIMEOUT), "%s", err->message);
    case DB_ERR_BUSY: /* db_tx_run's attempts all conflicted or had to run again */
        return svc_reply_problem(req, ROUTE_P(DATABASE_BUSY),
                                 "the transaction kept conflicting with concurrent ones: %s",
                                 err->message);
    default:
        svc_log(SVC_LOG_ERROR, "database error", "request_id", svc_req_id(req), "sqlstate",
                err->sqlstate, "detail", err->message, NULL);
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR),
                                 "unexpected database error (SQLSTATE %s); see the log for "
                                 "request %s",
                                 err->sqlstate[0] ? err->sqlstate : "none", svc_req_id(req));
    }
}
