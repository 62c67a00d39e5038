/* The problem code table and the problem document encoder (see problem.h). A code belongs to
 * openapi/openapi.json (components.schemas.ProblemCode) too: tests fail when they differ. */
#include "service/problem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/utf8.h"

const struct svc_problem_info svc_core_problems[SVC_PC_COUNT] = {
    [SVC_PC_BAD_REQUEST] = {"bad_request", 400, "Bad request"},
    [SVC_PC_INVALID_JSON] = {"invalid_json", 400, "Request body is not valid JSON"},
    [SVC_PC_JSON_TOO_DEEP] = {"json_too_deep", 400, "JSON body nests too deeply"},
    [SVC_PC_NUMBER_OUT_OF_RANGE] = {"number_out_of_range", 400, "JSON number out of range"},
    [SVC_PC_INVALID_PARAMETER] = {"invalid_parameter", 400, "Invalid parameter"},
    [SVC_PC_UNAUTHORIZED] = {"unauthorized", 401, "Missing or invalid bearer token"},
    [SVC_PC_FORBIDDEN] = {"forbidden", 403, "Token lacks the required scope"},
    [SVC_PC_ROUTE_NOT_FOUND] = {"route_not_found", 404, "No such route"},
    [SVC_PC_METHOD_NOT_ALLOWED] = {"method_not_allowed", 405, "Method not allowed"},
    [SVC_PC_REQUEST_TIMEOUT] = {"request_timeout", 408, "Request not received in time"},
    [SVC_PC_PAYLOAD_TOO_LARGE] = {"payload_too_large", 413, "Request body too large"},
    [SVC_PC_URI_TOO_LONG] = {"uri_too_long", 414, "Request target too long"},
    [SVC_PC_UNSUPPORTED_MEDIA_TYPE] = {"unsupported_media_type", 415, "Unsupported media type"},
    [SVC_PC_HEADERS_TOO_LARGE] = {"headers_too_large", 431, "Request headers too large"},
    [SVC_PC_RATE_LIMITED] = {"rate_limited", 429, "Token over its request rate"},
    [SVC_PC_TOO_MANY_LONG_POLLS] = {"too_many_long_polls", 429,
                                    "Token over its long-polls at once"},
    [SVC_PC_INTERNAL_ERROR] = {"internal_error", 500, "Internal error"},
    [SVC_PC_NOT_IMPLEMENTED] = {"not_implemented", 501, "Not implemented"},
    [SVC_PC_HTTP_VERSION_NOT_SUPPORTED] = {"http_version_not_supported", 505,
                                           "HTTP version not supported"},
};

/* The registered families' rows, in registration order (written before serving only). */
#define FAMILIES_MAX 16
static struct {
    const struct svc_problem_info *rows;
    size_t n;
} families[FAMILIES_MAX];
static size_t nfamilies;

size_t svc_problem_count(void)
{
    size_t n = SVC_PC_COUNT;
    for (size_t f = 0; f < nfamilies; f++)
        n += families[f].n;
    return n;
}

const struct svc_problem_info *svc_problem_at(size_t i)
{
    if (i < SVC_PC_COUNT)
        return &svc_core_problems[i];
    i -= SVC_PC_COUNT;
    for (size_t f = 0; f < nfamilies; f++) {
        if (i < families[f].n)
            return &families[f].rows[i];
        i -= families[f].n;
    }
    return NULL;
}

static int taken(const char *code)
{
    for (size_t i = 0, n = svc_problem_count(); i < n; i++)
        if (strcmp(svc_problem_at(i)->code, code) == 0)
            return 1;
    return 0;
}

int svc_problem_register(const struct svc_problem_info *rows, size_t n)
{
    if (nfamilies == FAMILIES_MAX)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (taken(rows[i].code))
            return -1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(rows[i].code, rows[j].code) == 0)
                return -1;
    }
    families[nfamilies].rows = rows;
    families[nfamilies].n = n;
    nfamilies++;
    return 0;
}

void svc_problem_unregister_all(void)
{
    nfamilies = 0;
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

char *svc_problem_encode(const struct svc_problem_info *info, const char *detail,
                         const char *request_id, json_t *ext, size_t *len)
{
    if (info == NULL)
        info = SVC_P(INTERNAL_ERROR);
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
