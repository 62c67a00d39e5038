/* Unit tests of service/problem.c: every enum value has a row with a code, an HTTP status from
 * 400 to 599 and a title; codes are unique lowercase words joined by underscores; out-of-range
 * values fall back to internal_error instead of reading past the table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

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

static void test_count_matches_enum(void **state)
{
    assert_int_equal(svc_problem_count(), SVC_P_COUNT);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_matches_enum),
        cmocka_unit_test(test_every_row_complete),
        cmocka_unit_test(test_codes_unique),
        cmocka_unit_test(test_known_rows),
        cmocka_unit_test(test_out_of_range_falls_back),
        cmocka_unit_test(test_code_word_checker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
