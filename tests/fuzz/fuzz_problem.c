/* Fuzz target: the problem encoder (svc_problem_encode). Input: a byte choosing the problem,
 * then detail, a NUL, the request id, a NUL and JSON for the extension members. Whatever the
 * bytes, the document is always sent: it parses as JSON, carries the table's type, title, status
 * and code, a detail of at most SVC_PROBLEM_DETAIL_MAX bytes (plus the ellipsis of a cut) that
 * equals a short well-formed detail exactly, and the extension members it does not override. */
#include <stdlib.h>
#include <string.h>

#include "service/utf8.h"
#include "service/problem.h"
#include "tests/fuzz/fuzz.h"

static const char *member(json_t *doc, const char *name)
{
    json_t *v = json_object_get(doc, name);
    FUZZ_ASSERT(json_is_string(v));
    return json_string_value(v);
}

static void check_string(json_t *doc, const char *name, const char *in, size_t max)
{
    const char *got = member(doc, name);
    size_t n = strlen(got), inlen = strlen(in);
    FUZZ_ASSERT(svc_utf8_valid(got, n));
    FUZZ_ASSERT(n <= max + 3); /* + the ellipsis U+2026 of a cut */
    if (inlen <= max && svc_utf8_valid(in, inlen))
        FUZZ_ASSERT(strcmp(got, in) == 0);
}

static void check_doc(const struct svc_problem_info *info, const char *detail, const char *rid,
                      json_t *ext, const char *text, size_t len)
{
    FUZZ_ASSERT(text != NULL && strlen(text) == len && svc_utf8_valid(text, len));
    json_error_t err;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    FUZZ_ASSERT(json_is_object(doc));
    FUZZ_ASSERT(strncmp(member(doc, "type"), SVC_PROBLEM_TYPE_PREFIX,
                        strlen(SVC_PROBLEM_TYPE_PREFIX)) == 0);
    FUZZ_ASSERT(strcmp(member(doc, "type") + strlen(SVC_PROBLEM_TYPE_PREFIX), info->code) == 0);
    FUZZ_ASSERT(strcmp(member(doc, "code"), info->code) == 0);
    FUZZ_ASSERT(strcmp(member(doc, "title"), info->title) == 0);
    FUZZ_ASSERT(json_integer_value(json_object_get(doc, "status")) == info->status);
    check_string(doc, "detail", detail, SVC_PROBLEM_DETAIL_MAX);
    check_string(doc, "request_id", rid, 256);
    const char *name;
    json_t *v;
    json_object_foreach(ext, name, v)
    {
        static const char *const own[] = {"type",   "title", "status",
                                          "detail", "code",  "request_id"};
        int taken = 0;
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            taken = taken || strcmp(own[i], name) == 0;
        FUZZ_ASSERT(taken || json_equal(json_object_get(doc, name), v));
    }
    json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const struct svc_problem_info *p = svc_problem_at(data[0] % svc_problem_count());
    char *detail, *rest, *rid, *exttext;
    fuzz_split(data + 1, size - 1, &detail, &rest);
    fuzz_split((const uint8_t *)rest, strlen(rest), &rid, &exttext);
    json_t *ext = fuzz_json(exttext);
    size_t len = 0;
    char *text = svc_problem_encode(p, detail, rid, json_is_object(ext) ? ext : NULL, &len);
    check_doc(p, detail, rid, json_is_object(ext) ? ext : NULL, text, len);
    /* the fallback for the impossible case is a problem document too */
    json_error_t err;
    json_t *fb = json_loadb(svc_problem_fallback, svc_problem_fallback_len, 0, &err);
    FUZZ_ASSERT(json_is_object(fb) && json_integer_value(json_object_get(fb, "status")) == 500);
    json_decref(fb);
    json_decref(ext);
    free(text);
    free(detail);
    free(rest);
    free(rid);
    free(exttext);
    return 0;
}
