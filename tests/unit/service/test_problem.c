/* Unit tests of service/problem.c: every enum value has a row with a code, an HTTP status from
 * 400 to 599 and a title; codes are unique lowercase words joined by underscores; out-of-range
 * values fall back to internal_error instead of reading past the table; svc_problem_count() is
 * the number of distinct rows a walk of the table finds, each documented in openapi.json. The
 * encoder turns any detail (cut inside a character, bytes that are not UTF-8) into well-formed
 * JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "service/json_util.h"
#include "service/openapi.h"
#include "service/problem.h"

/* Lowercase words of a-z joined by single underscores: "payload_too_large". */
static int is_code_word(const char *s)
{
    if (*s < 'a' || *s > 'z')
        return 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p >= 'a' && *p <= 'z')
            continue;
        if (*p == '_' && p[1] >= 'a' && p[1] <= 'z')
            continue;
        return 0;
    }
    return 1;
}

/* The codes of components.schemas.ProblemCode.enum in the served OpenAPI document. */
static json_t *documented_codes(json_t *doc)
{
    json_t *codes = json_object_get(
        json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                        "ProblemCode"),
        "enum");
    if (!json_is_array(codes))
        fail_msg("components.schemas.ProblemCode.enum is missing or not an array");
    return codes;
}

static int documented(json_t *codes, const char *code)
{
    size_t i;
    json_t *v;
    json_array_foreach(codes, i, v) if (json_is_string(v) &&
                                        strcmp(json_string_value(v), code) == 0) return 1;
    return 0;
}

/* Walks the table from its first row until a value falls back to internal_error (out of
 * range): every row walked is its own, its code distinct from the earlier rows' and documented
 * in the OpenAPI problem code enum, which lists no other code; svc_problem_count() is the
 * number of rows walked. */
static void test_count_is_the_walked_table(void **state)
{
    json_t *doc = json_loadb(svc_openapi_json, svc_openapi_json_len, 0, NULL);
    assert_non_null(doc);
    json_t *codes = documented_codes(doc);
    const struct svc_problem_info *internal = svc_problem_info(SVC_P_INTERNAL_ERROR);
    const struct svc_problem_info *rows[1024];
    size_t walked = 0;
    for (size_t i = 0; i < 1024; i++) {
        const struct svc_problem_info *p = svc_problem_info((enum svc_problem)i);
        if (p == internal && i != (size_t)SVC_P_INTERNAL_ERROR)
            break;
        if (p->code == NULL || p->status < 400 || p->status > 599 || p->title == NULL ||
            p->title[0] == '\0')
            fail_msg("problem %zu is incomplete", i);
        for (size_t j = 0; j < walked; j++)
            if (rows[j] == p || strcmp(rows[j]->code, p->code) == 0)
                fail_msg("problems %zu and %zu share code %s", j, i, p->code);
        if (!documented(codes, p->code))
            fail_msg("problem code %s is not in openapi.json's ProblemCode enum", p->code);
        rows[walked++] = p;
    }
    assert_true(walked > (size_t)SVC_P_INTERNAL_ERROR);
    assert_int_equal(svc_problem_count(), walked);
    assert_int_equal(json_array_size(codes), walked);
    json_decref(doc);
}

static void test_every_row_complete(void **state)
{
    for (size_t i = 0; i < svc_problem_count(); i++) {
        const struct svc_problem_info *p = svc_problem_info((enum svc_problem)i);
        assert_non_null(p);
        if (p->code == NULL || p->code[0] == '\0')
            fail_msg("problem %zu has no code", i);
        if (p->status < 400 || p->status > 599)
            fail_msg("problem %s has status %d, outside 400-599", p->code, p->status);
        if (p->title == NULL || p->title[0] == '\0')
            fail_msg("problem %s has no title", p->code);
        if (!is_code_word(p->code))
            fail_msg("problem code \"%s\" is not lowercase words with underscores", p->code);
    }
}

static void test_codes_unique(void **state)
{
    size_t n = svc_problem_count();
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(svc_problem_info((enum svc_problem)i)->code,
                       svc_problem_info((enum svc_problem)j)->code) == 0)
                fail_msg("problems %zu and %zu share code %s", i, j,
                         svc_problem_info((enum svc_problem)i)->code);
}

static void test_known_rows(void **state)
{
    assert_string_equal(svc_problem_info(SVC_P_ROUTE_NOT_FOUND)->code, "route_not_found");
    assert_int_equal(svc_problem_info(SVC_P_ROUTE_NOT_FOUND)->status, 404);
    assert_int_equal(svc_problem_info(SVC_P_METHOD_NOT_ALLOWED)->status, 405);
    assert_int_equal(svc_problem_info(SVC_P_PAYLOAD_TOO_LARGE)->status, 413);
    assert_int_equal(svc_problem_info(SVC_P_UNAUTHORIZED)->status, 401);
    assert_int_equal(svc_problem_info(SVC_P_FORBIDDEN)->status, 403);
    assert_int_equal(svc_problem_info(SVC_P_INTERNAL_ERROR)->status, 500);
}

static void test_out_of_range_falls_back(void **state)
{
    const struct svc_problem_info *internal = svc_problem_info(SVC_P_INTERNAL_ERROR);
    assert_ptr_equal(svc_problem_info(SVC_P_COUNT), internal);
    assert_ptr_equal(svc_problem_info((enum svc_problem)1000), internal);
    assert_ptr_equal(svc_problem_info((enum svc_problem) - 1), internal);
}

static void test_code_word_checker(void **state)
{
    assert_true(is_code_word("bad_request"));
    assert_true(is_code_word("forbidden"));
    assert_false(is_code_word("Bad_request"));
    assert_false(is_code_word("bad__request"));
    assert_false(is_code_word("bad_"));
    assert_false(is_code_word("_bad"));
    assert_false(is_code_word("bad-request"));
    assert_false(is_code_word("e404"));
    assert_false(is_code_word(""));
}

/* Encodes detail and checks the text: well-formed UTF-8 without NUL, parsed by jansson, with
 * the table's members. Returns the parsed document (json_decref it). */
static json_t *encode_ok(enum svc_problem p, const char *detail, const char *rid, json_t *ext)
{
    size_t len = 0;
    char *text = svc_problem_encode(p, detail, rid, ext, &len);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    assert_true(svc_utf8_valid(text, len));
    json_error_t err;
    json_t *doc = json_loadb(text, len, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, text);
    free(text);
    const struct svc_problem_info *info = svc_problem_info(p);
    assert_string_equal(json_string_value(json_object_get(doc, "code")), info->code);
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), info->status);
    assert_non_null(json_string_value(json_object_get(doc, "detail")));
    return doc;
}

static const char *detail_of(json_t *doc)
{
    return json_string_value(json_object_get(doc, "detail"));
}

static void test_encode_plain(void **state)
{
    json_t *ext = json_pack("{s:i, s:s}", "retry", 3, "code", "not_this_one");
    json_t *doc = encode_ok(SVC_P_ROUTE_NOT_FOUND, "no route matches /x", "rid-1", ext);
    assert_string_equal(detail_of(doc), "no route matches /x");
    assert_string_equal(json_string_value(json_object_get(doc, "request_id")), "rid-1");
    assert_string_equal(json_string_value(json_object_get(doc, "type")),
                        "urn:rowlock:problem:route_not_found");
    assert_int_equal(json_integer_value(json_object_get(doc, "retry")), 3);
    json_decref(doc);
    json_decref(ext);
}

/* A detail of SVC_PROBLEM_DETAIL_MAX - k ASCII bytes then characters of width w: the cut falls
 * inside one of them for every k < w. */
static void test_encode_cuts_at_character_boundary(void **state)
{
    static const char *chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x94\x91"};
    for (size_t c = 0; c < 3; c++) {
        size_t w = strlen(chars[c]);
        for (size_t k = 0; k < w; k++) {
            char detail[SVC_PROBLEM_DETAIL_MAX + 64];
            size_t n = SVC_PROBLEM_DETAIL_MAX - k;
            memset(detail, 'a', n);
            while (n + w < sizeof(detail)) {
                memcpy(detail + n, chars[c], w);
                n += w;
            }
            detail[n] = '\0';
            json_t *doc = encode_ok(SVC_P_INVALID_KEY, detail, "r", NULL);
            const char *d = detail_of(doc);
            size_t dl = strlen(d);
            /* kept whole characters only, then the ellipsis */
            assert_true(dl <= SVC_PROBLEM_DETAIL_MAX + 3);
            assert_memory_equal(d + dl - 3, "\xe2\x80\xa6", 3);
            assert_memory_equal(d, detail, dl - 3);
            assert_true(svc_utf8_valid(d, dl));
            json_decref(doc);
        }
    }
}

static void test_encode_replaces_invalid_bytes(void **state)
{
    json_t *doc = encode_ok(SVC_P_ROUTE_NOT_FOUND, "no route matches /nope\xff", "r", NULL);
    assert_string_equal(detail_of(doc), "no route matches /nope\xef\xbf\xbd");
    json_decref(doc);
    /* a stray continuation, an overlong '/', a surrogate, a truncated character, controls */
    doc = encode_ok(SVC_P_METHOD_NOT_ALLOWED, "G\xffT \x80 \xc0\xaf \xed\xa0\x80 \x01\n\xe2\x82",
                    "r", NULL);
    assert_string_equal(detail_of(doc), "G\xef\xbf\xbdT \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
                                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \x01\n"
                                        "\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(doc);
    /* the request id is cleaned the same way; NULL detail and id are empty strings */
    doc = encode_ok(SVC_P_BAD_REQUEST, NULL, "\xfe\"id", NULL);
    assert_string_equal(json_string_value(json_object_get(doc, "request_id")), "\xef\xbf\xbd\"id");
    assert_string_equal(detail_of(doc), "");
    json_decref(doc);
}

static void test_fallback_is_a_problem_document(void **state)
{
    assert_int_equal(svc_problem_fallback_len, strlen(svc_problem_fallback));
    json_t *doc = json_loadb(svc_problem_fallback, svc_problem_fallback_len, 0, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "code")), "internal_error");
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), 500);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_is_the_walked_table),
        cmocka_unit_test(test_every_row_complete),
        cmocka_unit_test(test_codes_unique),
        cmocka_unit_test(test_known_rows),
        cmocka_unit_test(test_out_of_range_falls_back),
        cmocka_unit_test(test_code_word_checker),
        cmocka_unit_test(test_encode_plain),
        cmocka_unit_test(test_encode_cuts_at_character_boundary),
        cmocka_unit_test(test_encode_replaces_invalid_bytes),
        cmocka_unit_test(test_fallback_is_a_problem_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
