/* The problem code table and the problem document encoder (see problem.h). Add a row here and
 * to openapi/openapi.json (components.schemas.ProblemCode) together; tests fail when they
 * differ. */
#include "service/problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/json_util.h"

static const struct svc_problem_info problems[SVC_P_COUNT] = {
    [SVC_P_BAD_REQUEST] = {"bad_request", 400, "Bad request"},
    [SVC_P_INVALID_JSON] = {"invalid_json", 400, "Request body is not valid JSON"},
    [SVC_P_JSON_TOO_DEEP] = {"json_too_deep", 400, "JSON body nests too deeply"},
    [SVC_P_INVALID_NAME] = {"invalid_name", 400, "Invalid name"},
    [SVC_P_INVALID_PARAMETER] = {"invalid_parameter", 400, "Invalid parameter"},
    [SVC_P_INVALID_KEY] = {"invalid_key", 400, "Invalid key"},
    [SVC_P_INVALID_CONFIG] = {"invalid_config", 400, "Invalid configuration"},
    [SVC_P_INVALID_MESSAGE] = {"invalid_message", 400, "Invalid message"},
    [SVC_P_INVALID_MERGE_PATCH] = {"invalid_merge_patch", 400, "Invalid merge patch"},
    [SVC_P_BATCH_TOO_LARGE] = {"batch_too_large", 400, "Batch too large"},
    [SVC_P_INVALID_JOB] = {"invalid_job", 400, "Invalid job"},
    [SVC_P_INVALID_LEASE] = {"invalid_lease", 400, "Invalid lease request"},
    [SVC_P_INVALID_TRANSACTION] = {"invalid_transaction", 400, "Invalid transaction"},
    [SVC_P_INVALID_CHECKPOINT] = {"invalid_checkpoint", 400, "Invalid checkpoint"},
    [SVC_P_INVALID_CONSUMER] = {"invalid_consumer", 400, "Invalid consumer request"},
    [SVC_P_UNAUTHORIZED] = {"unauthorized", 401, "Missing or invalid bearer token"},
    [SVC_P_FORBIDDEN] = {"forbidden", 403, "Token lacks the required scope"},
    [SVC_P_ROUTE_NOT_FOUND] = {"route_not_found", 404, "No such route"},
    [SVC_P_TOPIC_NOT_FOUND] = {"topic_not_found", 404, "No such topic"},
    [SVC_P_PRODUCER_NOT_FOUND] = {"producer_not_found", 404, "No such producer"},
    [SVC_P_HEAD_NOT_FOUND] = {"head_not_found", 404, "Key has no head"},
    [SVC_P_KEY_DELETED] = {"key_deleted", 404, "Key deleted"},
    [SVC_P_CONSUMER_NOT_FOUND] = {"consumer_not_found", 404, "No such consumer"},
    [SVC_P_QUEUE_NOT_FOUND] = {"queue_not_found", 404, "No such queue"},
    [SVC_P_JOB_NOT_FOUND] = {"job_not_found", 404, "No such job"},
    [SVC_P_LEASE_OWNER_MISMATCH] = {"lease_owner_mismatch", 409, "Lease held by another owner"},
    [SVC_P_LEASE_FENCE_MISMATCH] = {"lease_fence_mismatch", 409, "Stale lease fence"},
    [SVC_P_LEASE_EXPIRED] = {"lease_expired", 409, "Lease expired"},
    [SVC_P_JOB_TERMINAL] = {"job_terminal", 409, "Job already finished"},
    [SVC_P_JOB_NOT_FAILED] = {"job_not_failed", 409, "Job is not failed"},
    [SVC_P_QUEUE_BUSY] = {"queue_busy", 409, "Queue has jobs in processing"},
    [SVC_P_LEDGER_NOT_FOUND] = {"ledger_not_found", 404, "No such ledger"},
    [SVC_P_TRANSACTION_NOT_FOUND] = {"transaction_not_found", 404, "Transaction not executed"},
    [SVC_P_OBJECT_NOT_FOUND] = {"object_not_found", 404, "No such object"},
    [SVC_P_OBJECT_DELETED] = {"object_deleted", 404, "Object deleted"},
    [SVC_P_DISPLAY_NOT_FOUND] = {"display_not_found", 404, "No such display"},
    [SVC_P_DEPENDENCIES_PENDING] = {"dependencies_pending", 409,
                                    "Inputs not yet at their versions"},
    [SVC_P_SUPERSEDED] = {"superseded", 409, "Inputs already past their versions"},
    [SVC_P_BELOW_HORIZON] = {"below_horizon", 409, "Below the ledger's horizon"},
    [SVC_P_CONSUMER_CONFLICT] = {"consumer_conflict", 409, "Consumer not at the expected offset"},
    [SVC_P_OFFSET_BEYOND_END] = {"offset_beyond_end", 409, "Offset past the log's readable end"},
    [SVC_P_PRECONDITION_FAILED] = {"precondition_failed", 412, "Precondition failed"},
    [SVC_P_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405, "Method not allowed"},
    [SVC_P_PAYLOAD_TOO_LARGE] = {"payload_too_large", 413, "Request body too large"},
    [SVC_P_URI_TOO_LONG] = {"uri_too_long", 414, "Request target too long"},
    [SVC_P_UNSUPPORTED_MEDIA_TYPE] = {"unsupported_media_type", 415, "Unsupported media type"},
    [SVC_P_HEADERS_TOO_LARGE] = {"headers_too_large", 431, "Request headers too large"},
    [SVC_P_INTERNAL_ERROR] = {"internal_error", 500, "Internal error"},
    [SVC_P_DATABASE_UNAVAILABLE] = {"database_unavailable", 503, "Database unavailable"},
    [SVC_P_POOL_EXHAUSTED] = {"pool_exhausted", 503, "No database connection free"},
    [SVC_P_DATABASE_TIMEOUT] = {"database_timeout", 503, "Database statement timed out"},
    [SVC_P_DATABASE_BUSY] = {"database_busy", 503, "Transaction kept conflicting; retry"},
    [SVC_P_SCHEMA_NOT_READY] = {"schema_not_ready", 503, "Database schema not ready"},
    [SVC_P_OUTCOME_UNKNOWN] = {"outcome_unknown", 503, "Connection lost after COMMIT was sent"},
};

const struct svc_problem_info *svc_problem_info(enum svc_problem p)
{
    if ((unsigned)p >= SVC_P_COUNT)
        p = SVC_P_INTERNAL_ERROR;
    return &problems[p];
}

size_t svc_problem_count(void)
{
    return SVC_P_COUNT;
}

#define FALLBACK                                                                                   \
    "{\"type\":\"" SVC_PROBLEM_TYPE_PREFIX "internal_error\",\"title\":\"Internal error\","        \
    "\"status\":500,\"detail\":\"the answer could not be encoded\",\"code\":\"internal_error\"}"
const char svc_problem_fallback[] = FALLBACK;
const size_t svc_problem_fallback_len = sizeof(FALLBACK) - 1;

/* A JSON string of s cleaned to UTF-8 and cut at max bytes ("…" marks a cut). */
static json_t *clean_string(const char *s, size_t max)
{
    static const char ellipsis[] = "\xe2\x80\xa6"; /* U+2026 */
    s = s != NULL ? s : "";
    char *out = malloc(max + sizeof(ellipsis));
    if (out == NULL)
        return NULL;
    int cut;
    size_t n = svc_utf8_clean(s, strlen(s), out, max, &cut);
    if (cut) {
        memcpy(out + n, ellipsis, sizeof(ellipsis));
        n += sizeof(ellipsis) - 1;
    }
    json_t *j = json_stringn_nocheck(out, n);
    free(out);
    return j;
}

char *svc_problem_encode(enum svc_problem p, const char *detail, const char *request_id,
                         json_t *ext, size_t *len)
{
    const struct svc_problem_info *info = svc_problem_info(p);
    char *text = NULL;
    char type[96];
    snprintf(type, sizeof(type), "%s%s", SVC_PROBLEM_TYPE_PREFIX, info->code);
    json_t *doc = json_object();
    if (doc == NULL || json_object_set_new(doc, "type", json_string(type)) != 0 ||
        json_object_set_new(doc, "title", json_string(info->title)) != 0 ||
        json_object_set_new(doc, "status", json_integer(info->status)) != 0 ||
        json_object_set_new(doc, "detail", clean_string(detail, SVC_PROBLEM_DETAIL_MAX)) != 0 ||
        json_object_set_new(doc, "code", json_string(info->code)) != 0 ||
        json_object_set_new(doc, "request_id", clean_string(request_id, 256)) != 0)
        goto done;
    if (json_is_object(ext) && json_object_update_missing(doc, ext) != 0)
        goto done;
    text = json_dumps(doc, JSON_COMPACT);
    if (text != NULL && len != NULL)
        *len = strlen(text);
done:
    json_decref(doc);
    return text;
}
