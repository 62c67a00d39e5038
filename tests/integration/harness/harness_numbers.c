/* Round trips of big numbers (see harness_numbers.h). */
#include "harness_numbers.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

json_t *th_svc_call_flags(const char *method, const char *path, const char *ct, const char *header,
                          const char *body, long want, size_t flags)
{
    char ctline[96];
    snprintf(ctline, sizeof(ctline), "Content-Type: %s", ct ? ct : "application/json");
    const char *headers[] = {ctline, header, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, method, path, body ? headers : headers + 1, body,
                             body ? strlen(body) : 0, &r),
                     0);
    if (r.status != want)
        fail_msg("%s %s: expected %ld, got %ld %s", method, path, want, r.status,
                 r.body ? r.body : "");
    json_error_t jerr;
    json_t *j = json_loadb(r.body, r.len, flags, &jerr);
    if (j == NULL)
        fail_msg("%s %s: not JSON (%s): %.300s", method, path, jerr.text, r.body);
    th_response_free(&r);
    return j;
}

void th_assert_big_numbers(const json_t *v, const char *where)
{
    static const char *const keys[] = {"pos", "neg", "huge", "digits", "tiny"};
    const double want[] = {1e19, -1e19, 1.5e300, 123456789012345678901234567890.0, 1e-300};
    if (!json_is_object(v))
        fail_msg("%s is not the object written (type %d)", where, v ? (int)json_typeof(v) : -1);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        json_t *n = json_object_get(v, keys[i]);
        if (!json_is_number(n) || json_number_value(n) != want[i])
            fail_msg("%s: %s is %.17g, want %.17g", where, keys[i],
                     json_is_number(n) ? json_number_value(n) : -1.0, want[i]);
    }
    json_t *deep =
        json_array_get(json_object_get(json_array_get(json_object_get(v, "deep"), 0), "n"), 0);
    if (!json_is_number(deep) || json_number_value(deep) != 1e19)
        fail_msg("%s: deep[0].n[0] is not 1e19", where);
}

void th_assert_plain_values(const json_t *v, const char *where)
{
    json_t *want = json_loads(TH_PLAIN_VALUES, 0, NULL);
    assert_non_null(want);
    if (!json_equal(v, want)) {
        char *got = v ? json_dumps(v, JSON_ENCODE_ANY) : NULL;
        fail_msg("%s is %s, want %s", where, got ? got : "(none)", TH_PLAIN_VALUES);
    }
    json_decref(want);
}
