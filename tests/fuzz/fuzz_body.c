/* Fuzz target: JSON body validation as the routes do it (routes/params.c) and the problem it
 * answers with. Input: a request body. A body that parses is checked for unknown members and
 * for bounded integer and number members; every refusal's sentence, whatever the member names
 * held (a member name of 100 x "é" once broke the answer), encodes into a problem document that
 * parses. Accepted values lie within their bounds. */
#include <stdlib.h>
#include <string.h>

#include "routes/routes.h"
#include "routes/json_util.h"
#include "service/problem.h"
#include "tests/fuzz/fuzz.h"

static void refusal(const char *why)
{
    size_t len = 0;
    char *text = svc_problem_encode(ROUTE_P(INVALID_CONFIG), why, "fuzz", NULL, &len);
    FUZZ_ASSERT(text != NULL);
    json_error_t err;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    FUZZ_ASSERT(json_is_string(json_object_get(doc, "detail")));
    FUZZ_ASSERT(json_string_length(json_object_get(doc, "detail")) > 0);
    json_decref(doc);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const allowed[] = {"retention_seconds", "headless_ttl_seconds", "ratio",
                                          NULL};
    char *text = fuzz_cstr(data, size);
    json_t *body = fuzz_json(text);
    char why[1024];
    if (json_is_object(body)) {
        if (!route_only_members(body, allowed, why, sizeof(why)))
            refusal(why);
        long long v = -1;
        if (route_int_member(body, "retention_seconds", 1, 1000000, 7, 1, &v, why, sizeof(why)))
            FUZZ_ASSERT(v == 0 || v == 7 || (v >= 1 && v <= 1000000));
        else
            refusal(why);
        if (route_int_member(body, "headless_ttl_seconds", 0, 86400, 60, 0, &v, why, sizeof(why)))
            FUZZ_ASSERT(v >= 0 && v <= 86400);
        else
            refusal(why);
        double d = -1;
        if (route_num_member(body, "ratio", 0.0, 1.0, 0.5, &d, why, sizeof(why)))
            FUZZ_ASSERT(d >= 0.0 && d <= 1.0);
        else
            refusal(why);
    }
    json_decref(body);
    free(text);
    return 0;
}
