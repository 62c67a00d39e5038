/* Fuzz target: the access-log line (svc_log_access_format). Input: request id, method, path,
 * separated by NULs, with a status and duration taken from the first bytes. The line is written
 * whatever the request held: one line of well-formed UTF-8 JSON whose members equal the inputs
 * when those are well-formed, the path cut at a character boundary. */
#include <stdlib.h>
#include <string.h>

#include "routes/routes.h"
#include "service/utf8.h"
#include "service/log.h"
#include "service/problem.h"
#include "tests/fuzz/fuzz.h"
#include "tests/fuzz/fuzz_routes.h"

/* Longest method the line must always hold (MHD hands any token; 128 is far past real ones). */
#define METHOD_MAX 128

static void check_member(json_t *doc, const char *name, const char *in, size_t inlen)
{
    json_t *v = json_object_get(doc, name);
    FUZZ_ASSERT(json_is_string(v));
    if (svc_utf8_valid(in, inlen))
        FUZZ_ASSERT(json_string_length(v) == inlen && memcmp(json_string_value(v), in, inlen) == 0);
}

static void check_line(const struct svc_access *a, const char *line, size_t len)
{
    FUZZ_ASSERT(line != NULL && strlen(line) == len && len > 0 && line[len - 1] == '\n');
    FUZZ_ASSERT(memchr(line, '\n', len - 1) == NULL && svc_utf8_valid(line, len));
    json_error_t err;
    json_t *doc = json_loadb(line, len, JSON_REJECT_DUPLICATES, &err);
    FUZZ_ASSERT(json_is_object(doc));
    check_member(doc, "request_id", a->request_id, strlen(a->request_id));
    check_member(doc, "method", a->method, strlen(a->method));
    check_member(doc, "route", a->route, strlen(a->route));
    json_t *path = json_object_get(doc, "path");
    FUZZ_ASSERT(json_is_string(path) && json_string_length(path) <= 3 * 512);
    if (a->path_len <= 512)
        check_member(doc, "path", a->path, a->path_len);
    FUZZ_ASSERT(json_integer_value(json_object_get(doc, "status")) == a->status);
    FUZZ_ASSERT(json_is_number(json_object_get(doc, "duration_ms")));
    FUZZ_ASSERT(a->code == NULL ||
                strcmp(json_string_value(json_object_get(doc, "code")), a->code) == 0);
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    char *rid, *rest, *method, *path;
    fuzz_split(data + 4, size - 4, &rid, &rest);
    fuzz_split((const uint8_t *)rest, strlen(rest), &method, &path);
    if (strlen(method) > METHOD_MAX || strlen(rid) > 128)
        goto done;
    size_t route = data[0] % (fuzz_routes_count + 1);
    struct svc_access a = {
        .request_id = rid,
        .method = method,
        .route = route < fuzz_routes_count ? fuzz_routes_table[route].path : "unmatched",
        .path = path,
        .path_len = strcspn(path, "?"),
        .status = 100 + data[1] % 500,
        .duration_ms = data[2] * 1000.0 + data[3] / 7.0,
        .code = data[3] % 4 ? svc_problem_at(data[3] % svc_problem_count())->code : NULL,
    };
    size_t len = 0;
    char *line = svc_log_access_format(&a, &len);
    check_line(&a, line, len);
    free(line);
done:
    free(rid);
    free(rest);
    free(method);
    free(path);
    return 0;
}
