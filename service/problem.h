/* The table of problem codes: every non-2xx answer names one, with its HTTP status and title
 * (the core codes here, each family's registered from its routes), and the encoder of a problem
 * document, which cannot fail on any input. The OpenAPI document lists the same table (a test
 * compares them). Sending the response belongs to reply.c (svc_reply_problem). */
#ifndef SVC_PROBLEM_H
#define SVC_PROBLEM_H

#include <jansson.h>
#include <stddef.h>

struct svc_problem_info {
    const char *code; /* stable machine-readable word */
    int status;
    const char *title;
};

/* The codes of the HTTP layer itself, which any request may be answered with. A resource
 * family's own codes live with its routes (see struct svc_family) and are registered at start. */
enum svc_core_problem {
    SVC_PC_BAD_REQUEST,
    SVC_PC_INVALID_JSON,
    SVC_PC_JSON_TOO_DEEP,
    SVC_PC_NUMBER_OUT_OF_RANGE,
    SVC_PC_INVALID_PARAMETER,
    SVC_PC_UNAUTHORIZED,
    SVC_PC_FORBIDDEN,
    SVC_PC_ROUTE_NOT_FOUND,
    SVC_PC_METHOD_NOT_ALLOWED,
    SVC_PC_REQUEST_TIMEOUT,
    SVC_PC_PAYLOAD_TOO_LARGE,
    SVC_PC_URI_TOO_LONG,
    SVC_PC_UNSUPPORTED_MEDIA_TYPE,
    SVC_PC_HEADERS_TOO_LARGE,
    SVC_PC_RATE_LIMITED,
    SVC_PC_TOO_MANY_LONG_POLLS,
    SVC_PC_INTERNAL_ERROR,
    SVC_PC_NOT_IMPLEMENTED,
    SVC_PC_HTTP_VERSION_NOT_SUPPORTED,
    SVC_PC_COUNT
};
extern const struct svc_problem_info svc_core_problems[SVC_PC_COUNT];
/* The problem a reply names: SVC_P(NOT_FOUND) is &svc_core_problems[SVC_PC_NOT_FOUND]. */
#define SVC_P(name) (&svc_core_problems[SVC_PC_##name])

/* Adds a family's codes (rows: static, borrowed) to the table, before the server starts.
 * Returns 0, or -1 when a code is already in the table (the table is unchanged) or it is full. */
int svc_problem_register(const struct svc_problem_info *rows, size_t n);
/* Forgets every registered family (the core codes stay): for tests. */
void svc_problem_unregister_all(void);
/* The table: the core codes, then each registered family's, for the OpenAPI check and the
 * access log. Row i < svc_problem_count(), else NULL. */
size_t svc_problem_count(void);
const struct svc_problem_info *svc_problem_at(size_t i);

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
char *svc_problem_encode(const struct svc_problem_info *p, const char *detail,
                         const char *request_id, json_t *ext, size_t *len);
/* A constant internal_error document (status 500) for when even encoding failed. */
extern const char svc_problem_fallback[];
extern const size_t svc_problem_fallback_len;

#endif
