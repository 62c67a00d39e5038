/* Unit tests of service/problem.c: every core code has a row with a code, an HTTP status from
 * 400 to 599 and a title; codes are unique lowercase words joined by underscores, documented in
 * openapi.json; a family's codes join the table and a code taken twice is refused (the whole
 * table with every family is checked against openapi.json in
 * tests/unit/routes/test_route_table_openapi.c). The encoder turns any detail (cut inside a
 * character, bytes that are not UTF-8) into well-formed JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "service/utf8.h"
#include "service/openapi.h"
#include "service/problem.h"

/* A family's code, as routes register theirs. */
static const struct svc_problem_info key_problem = {"invalid_key", 400, "Invalid key"};

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

/* The core table with no family registered: every row complete, its code a distinct code word
 * documented in openapi.json's ProblemCode enum, and the table ends where svc_problem_at says. */
static void test_core_rows(void **state)
{
    json_t *doc = json_loadb(svc_openapi_json, svc_openapi_json_len, 0, NULL);
    assert_non_null(doc);
    json_t *codes = documented_codes(doc);
    svc_problem_unregister_all();
    assert_int_equal(svc_problem_count(), SVC_PC_COUNT);
    for (size_t i = 0; i < svc_problem_count(); i++) {
        const struct svc_problem_info *p = svc_problem_at(i);
        assert_ptr_equal(p, &svc_core_problems[i]);
        if (p->code == NULL || !is_code_word(p->code))
            fail_msg("core problem %zu has no code word", i);
        if (p->status < 400 || p->status > 599 || p->title == NULL || p->title[0] == '\0')
            fail_msg("problem %s is incomplete", p->code);
        for (size_t j = 0; j < i; j++)
            if (strcmp(svc_problem_at(j)->code, p->code) == 0)
                fail_msg("problems %zu and %zu share code %s", j, i, p->code);
        if (!documented(codes, p->code))
            fail_msg("problem code %s is not in openapi.json's ProblemCode enum", p->code);
    }
    assert_null(svc_problem_at(SVC_PC_COUNT));
    assert_null(svc_problem_at((size_t)-1));
    json_decref(doc);
}

/* A family's rows join the table after the core's, in registration order; a set that reuses a
 * code (another's or its own) is refused whole and the table is left as it was. */
static void test_register(void **state)
{
    static const struct svc_problem_info a[] = {{"alpha_one", 400, "A1"}, {"alpha_two", 404, "A2"}};
    static const struct svc_problem_info b[] = {{"beta_one", 409, "B1"}};
    static const struct svc_problem_info taken_core[] = {{"gamma", 400, "G"},
                                                         {"bad_request", 400, "again"}};
    static const struct svc_problem_info taken_a[] = {{"alpha_two", 409, "again"}};
    static const struct svc_problem_info twice[] = {{"delta", 400, "D"}, {"delta", 404, "D"}};
    svc_problem_unregister_all();
    assert_int_equal(svc_problem_register(a, 2), 0);
    assert_int_equal(svc_problem_register(b, 1), 0);
    assert_int_equal(svc_problem_count(), SVC_PC_COUNT + 3);
    assert_ptr_equal(svc_problem_at(SVC_PC_COUNT), &a[0]);
    assert_ptr_equal(svc_problem_at(SVC_PC_COUNT + 1), &a[1]);
    assert_ptr_equal(svc_problem_at(SVC_PC_COUNT + 2), &b[0]);
    assert_null(svc_problem_at(SVC_PC_COUNT + 3));
    assert_int_equal(svc_problem_register(taken_core, 2), -1);
    assert_int_equal(svc_problem_register(taken_a, 1), -1);
    assert_int_equal(svc_problem_register(twice, 2), -1);
    assert_int_equal(svc_problem_count(), SVC_PC_COUNT + 3);
    svc_problem_unregister_all();
    assert_int_equal(svc_problem_count(), SVC_PC_COUNT);
}

static void test_known_rows(void **state)
{
    assert_string_equal(SVC_P(ROUTE_NOT_FOUND)->code, "route_not_found");
    assert_int_equal(SVC_P(ROUTE_NOT_FOUND)->status, 404);
    assert_int_equal(SVC_P(METHOD_NOT_ALLOWED)->status, 405);
    assert_int_equal(SVC_P(PAYLOAD_TOO_LARGE)->status, 413);
    assert_int_equal(SVC_P(UNAUTHORIZED)->status, 401);
    assert_int_equal(SVC_P(FORBIDDEN)->status, 403);
    assert_int_equal(SVC_P(INTERNAL_ERROR)->status, 500);
}

/* No problem at all (NULL) encodes as internal_error rather than crashing. */
static void test_null_is_internal_error(void **state)
{
    size_t len = 0;
    char *text = svc_problem_encode(NULL, "x", "r", NULL, &len);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"code\":\"internal_error\""));
    free(text);
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
static json_t *encode_ok(const struct svc_problem_info *p, const char *detail, const char *rid,
                         json_t *ext)
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
    const struct svc_problem_info *info = p;
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
    json_t *doc = encode_ok(SVC_P(ROUTE_NOT_FOUND), "no route matches /x", "rid-1", ext);
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
            json_t *doc = encode_ok(&key_problem, detail, "r", NULL);
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
    json_t *doc = encode_ok(SVC_P(ROUTE_NOT_FOUND), "no route matches /nope\xff", "r", NULL);
    assert_string_equal(detail_of(doc), "no route matches /nope\xef\xbf\xbd");
    json_decref(doc);
    /* a stray continuation, an overlong '/', a surrogate, a truncated character, controls */
    doc = encode_ok(SVC_P(METHOD_NOT_ALLOWED), "G\xffT \x80 \xc0\xaf \xed\xa0\x80 \x01\n\xe2\x82",
                    "r", NULL);
    assert_string_equal(detail_of(doc), "G\xef\xbf\xbdT \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd "
                                        "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \x01\n"
                                        "\xef\xbf\xbd\xef\xbf\xbd");
    json_decref(doc);
    /* the request id is cleaned the same way; NULL detail and id are empty strings */
    doc = encode_ok(SVC_P(BAD_REQUEST), NULL, "\xfe\"id", NULL);
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
        cmocka_unit_test(test_core_rows),
        cmocka_unit_test(test_register),
        cmocka_unit_test(test_known_rows),
        cmocka_unit_test(test_null_is_internal_error),
        cmocka_unit_test(test_code_word_checker),
        cmocka_unit_test(test_encode_plain),
        cmocka_unit_test(test_encode_cuts_at_character_boundary),
        cmocka_unit_test(test_encode_replaces_invalid_bytes),
        cmocka_unit_test(test_fallback_is_a_problem_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
