/* What the families share: the problem codes several of them answer, and the mapping from db/
 * statuses to problem responses (a sentence for people, the SQLSTATE in a member of its own). */
#include "routes/routes.h"

#include <string.h>

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

json_t *route_sqlstate_ext(const struct db_error *err)
{
    return err->sqlstate[0] ? json_pack("{s:s}", "sqlstate", err->sqlstate) : NULL;
}

/* The sentence a client reads for a database failure. The server's own text (which may carry
 * SQL context, relation names and row positions, or libpq's wording) goes to the log. */
static const char *db_sentence(enum db_status st, const char *sqlstate)
{
    switch (st) {
    case DB_ERR_UNAVAILABLE:
        if (strcmp(sqlstate, "25006") == 0)
            return "the database server takes no writes (read-only, or a failover under way); "
                   "retry shortly";
        if (strncmp(sqlstate, "57P0", 4) == 0)
            return "the database ended the connection or takes none now (a shutdown, a restart "
                   "or an administrator's command); retry shortly";
        return "the database connection was lost, or the database cannot be reached; retry "
               "shortly";
    case DB_ERR_TIMEOUT:
        if (strcmp(sqlstate, "55P03") == 0)
            return "the database did not answer in time: what this request needs stayed locked "
                   "by another transaction past the lock timeout; retry shortly";
        return "the database did not answer in time: a statement ran past the statement "
               "timeout; retry shortly";
    case DB_ERR_OUTCOME_UNKNOWN:
        return "the database connection was lost after COMMIT was sent, so the write may or may "
               "not have been made; retry only with a dedupe key, a producer sequence or a "
               "ledger digest, or read the resource first";
    default: /* DB_ERR_BUSY: db_tx_run's attempts all conflicted or had to run again */
        return "the transaction kept conflicting with concurrent ones; send the request again";
    }
}

enum svc_outcome route_db_problem(struct svc_request *req, enum db_status st,
                                  const struct db_error *err)
{
    const struct svc_problem_info *p;
    switch (st) {
    case DB_ERR_POOL_TIMEOUT: /* the pool's own sentence: how long, how many connections */
        return svc_reply_problem(req, ROUTE_P(POOL_EXHAUSTED), "%s", err->message);
    case DB_ERR_UNAVAILABLE:
        p = ROUTE_P(DATABASE_UNAVAILABLE);
        break;
    case DB_ERR_OUTCOME_UNKNOWN:
        p = ROUTE_P(OUTCOME_UNKNOWN);
        break;
    case DB_ERR_TIMEOUT:
        p = ROUTE_P(DATABASE_TIMEOUT);
        break;
    case DB_ERR_BUSY:
        p = ROUTE_P(DATABASE_BUSY);
        break;
    default:
        svc_log(SVC_LOG_ERROR, "database error", "request_id", svc_req_id(req), "sqlstate",
                err->sqlstate, "detail", err->message, NULL);
        return svc_reply_problem_ext(req, SVC_P(INTERNAL_ERROR), route_sqlstate_ext(err),
                                     "unexpected database error; see the log for request %s",
                                     svc_req_id(req));
    }
    svc_log(SVC_LOG_WARN, "database failure answered", "request_id", svc_req_id(req), "code",
            p->code, "sqlstate", err->sqlstate, "detail", err->message, NULL);
    return svc_reply_problem_ext(req, p, route_sqlstate_ext(err), "%s",
                                 db_sentence(st, err->sqlstate));
}
