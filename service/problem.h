/* The table of problem codes: every non-2xx answer names one, with its HTTP status and title,
 * and the encoder of a problem document, which cannot fail on any input. The OpenAPI document
 * lists the same table (a test compares them). Sending the response belongs to http.c
 * (svc_reply_problem). */
#ifndef SVC_PROBLEM_H
#define SVC_PROBLEM_H

#include <jansson.h>
#include <stddef.h>

enum svc_problem {
    SVC_P_BAD_REQUEST,
    SVC_P_INVALID_JSON,
    SVC_P_JSON_TOO_DEEP,
    SVC_P_INVALID_NAME,
    SVC_P_INVALID_PARAMETER,
    SVC_P_INVALID_KEY,
    SVC_P_INVALID_CONFIG,
    SVC_P_INVALID_MESSAGE,
    SVC_P_INVALID_MERGE_PATCH,
    SVC_P_BATCH_TOO_LARGE,
    SVC_P_INVALID_JOB,
    SVC_P_INVALID_LEASE,
    SVC_P_INVALID_TRANSACTION,
    SVC_P_INVALID_CHECKPOINT,
    SVC_P_INVALID_CONSUMER,
    SVC_P_UNAUTHORIZED,
    SVC_P_FORBIDDEN,
    SVC_P_ROUTE_NOT_FOUND,
    SVC_P_TOPIC_NOT_FOUND,
    SVC_P_PRODUCER_NOT_FOUND,
    SVC_P_HEAD_NOT_FOUND,
    SVC_P_KEY_DELETED,
    SVC_P_CONSUMER_NOT_FOUND,
    SVC_P_QUEUE_NOT_FOUND,
    SVC_P_JOB_NOT_FOUND,
    SVC_P_LEDGER_NOT_FOUND,
    SVC_P_TRANSACTION_NOT_FOUND,
    SVC_P_OBJECT_NOT_FOUND,
    SVC_P_OBJECT_DELETED,
    SVC_P_DISPLAY_NOT_FOUND,
    SVC_P_METHOD_NOT_ALLOWED,
    SVC_P_LEASE_OWNER_MISMATCH,
    SVC_P_LEASE_FENCE_MISMATCH,
    SVC_P_LEASE_EXPIRED,
    SVC_P_JOB_TERMINAL,
    SVC_P_JOB_NOT_FAILED,
    SVC_P_QUEUE_BUSY,
    SVC_P_DEPENDENCIES_PENDING,
    SVC_P_SUPERSEDED,
    SVC_P_BELOW_HORIZON,
    SVC_P_CONSUMER_CONFLICT,
    SVC_P_OFFSET_BEYOND_END,
    SVC_P_PRECONDITION_FAILED,
    SVC_P_PAYLOAD_TOO_LARGE,
    SVC_P_URI_TOO_LONG,
    SVC_P_UNSUPPORTED_MEDIA_TYPE,
    SVC_P_HEADERS_TOO_LARGE,
    SVC_P_INTERNAL_ERROR,
    SVC_P_DATABASE_UNAVAILABLE,
    SVC_P_POOL_EXHAUSTED,
    SVC_P_DATABASE_TIMEOUT,
    SVC_P_DATABASE_BUSY,
    SVC_P_SCHEMA_NOT_READY,
    SVC_P_OUTCOME_UNKNOWN,
    SVC_P_COUNT
};

struct svc_problem_info {
    const char *code; /* stable machine-readable word */
    int status;
    const char *title;
};

/* Table row of p; never NULL for a valid enum value. */
const struct svc_problem_info *svc_problem_info(enum svc_problem p);
/* Number of rows, and row i, for tests and the OpenAPI check. */
size_t svc_problem_count(void);
/* The "type" URI of a code: "urn:rowlock:problem:<code>". */
#define SVC_PROBLEM_TYPE_PREFIX "urn:rowlock:problem:"

/* Longest "detail" in bytes; a longer one is cut at a character boundary and ends in "…". */
#define SVC_PROBLEM_DETAIL_MAX 1024

/* The problem document of p as compact JSON text: type, title, status, detail, code, request_id,
 * then the members of ext (borrowed, may be NULL; members the document already has are ignored).
 * detail and request_id may hold any bytes: what is not UTF-8 becomes U+FFFD and detail is cut at
 * SVC_PROBLEM_DETAIL_MAX bytes, so the text is always well-formed UTF-8 without NUL. Returns
 * malloc'd text (its length in *len), or NULL only when out of memory; the caller then sends
 * svc_problem_fallback. */
char *svc_problem_encode(enum svc_problem p, const char *detail, const char *request_id,
                         json_t *ext, size_t *len);
/* A constant internal_error document (status 500) for when even encoding failed. */
extern const char svc_problem_fallback[];
extern const size_t svc_problem_fallback_len;

#endif
