/* Unit tests of routes/params.c, the validators every route file shares, at their edges: body
 * members (allowed names; integers and numbers inside inclusive bounds, absent or null) and query
 * parameters (an integer is the whole text: no leading space or '+', no overflow; a cursor is
 * valid UTF-8). The request is a stand-in: svc_req_query and svc_reply_problem(_ext) are defined
 * here, so that the test sees the query the validator read and the problem it answered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "routes/routes.h"

struct svc_request {
    const char *name, *value; /* the one query parameter */
    int problems;             /* svc_reply_problem calls */
    const struct svc_problem_info *problem;
    char detail[256];
};

const char *svc_req_query(const struct svc_request *req, const char *name)
{
    return req->name != NULL && strcmp(req->name, name) == 0 ? req->value : NULL;
}

/* The stand-in has one parameter: the path's and the query's are the same here. */
const char *svc_req_param(const struct svc_request *req, const char *name)
{
    return svc_req_query(req, name);
}

/* routes.c (the shared codes params.c answers with) also maps db/ statuses, logging the id. */
const char *svc_req_id(const struct svc_request *req)
{
    (void)req;
    return "test";
}

enum svc_outcome svc_reply_problem(struct svc_request *req, const struct svc_problem_info *p,
                                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->detail, sizeof(req->detail), fmt, ap);
    va_end(ap);
    req->problems++;
    req->problem = p;
    return SVC_REPLIED;
}

/* routes.c's database problems carry the SQLSTATE as an extra member (not looked at here). */
enum svc_outcome svc_reply_problem_ext(struct svc_request *req, const struct svc_problem_info *p,
                                       json_t *ext, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->detail, sizeof(req->detail), fmt, ap);
    va_end(ap);
    json_decref(ext);
    req->problems++;
    req->problem = p;
    return SVC_REPLIED;
}

static void test_only_members(void **state)
{
    static const char *const allowed[] = {"a", "bc", NULL};
    char why[128] = "";
    json_t *obj = json_pack("{s:i, s:i}", "a", 1, "bc", 2);
    assert_true(route_only_members(obj, allowed, why, sizeof(why)));
    json_object_set_new(obj, "b", json_true()); /* a prefix of an allowed name is not it */
    assert_false(route_only_members(obj, allowed, why, sizeof(why)));
    assert_string_equal(why, "unknown member \"b\"");
    json_decref(obj);
    obj = json_object();
    assert_true(route_only_members(obj, allowed, why, sizeof(why)));
    json_decref(obj);
}

/* Validates {"n": v} (v stolen; NULL: no member) against [min, max]; returns the verdict. */
static int int_member(json_t *v, int nullable, long long *value, char *why)
{
    json_t *obj = json_object();
    if (v != NULL)
        json_object_set_new(obj, "n", v);
    int ok = route_int_member(obj, "n", -5, 10, 7, nullable, value, why, 128);
    json_decref(obj);
    return ok;
}

static void test_int_member_bounds(void **state)
{
    long long value = 0;
    char why[128] = "";
    assert_true(int_member(NULL, 0, &value, why));
    assert_int_equal(value, 7); /* absent: the default */
    assert_true(int_member(json_integer(-5), 0, &value, why));
    assert_int_equal(value, -5);
    assert_true(int_member(json_integer(10), 0, &value, why));
    assert_int_equal(value, 10);
    assert_false(int_member(json_integer(11), 0, &value, why));
    assert_string_equal(why, "\"n\" must be an integer from -5 to 10");
    assert_false(int_member(json_integer(-6), 0, &value, why));
    assert_false(int_member(json_integer(LLONG_MIN), 0, &value, why));
    assert_false(int_member(json_real(3.0), 0, &value, why)); /* 3.0 is no integer */
    assert_false(int_member(json_string("3"), 0, &value, why));
    assert_false(int_member(json_true(), 0, &value, why));
}

static void test_int_member_null(void **state)
{
    long long value = 99;
    char why[128] = "";
    assert_true(int_member(json_null(), 1, &value, why));
    assert_int_equal(value, 0); /* null where allowed: 0, not the default */
    assert_false(int_member(json_null(), 0, &value, why));
    assert_string_equal(why, "\"n\" must be an integer from -5 to 10");
    assert_false(int_member(json_integer(11), 1, &value, why));
    assert_string_equal(why, "\"n\" must be an integer from -5 to 10 (or null)");
}

static int num_member(json_t *v, double *value, char *why)
{
    json_t *obj = json_object();
    if (v != NULL)
        json_object_set_new(obj, "x", v);
    int ok = route_num_member(obj, "x", 0.5, 2, 1.25, value, why, 128);
    json_decref(obj);
    return ok;
}

static void test_num_member_bounds(void **state)
{
    double value = 0;
    char why[128] = "";
    assert_true(num_member(NULL, &value, why));
    assert_true(value == 1.25);
    assert_true(num_member(json_real(0.5), &value, why));
    assert_true(value == 0.5);
    assert_true(num_member(json_integer(2), &value, why)); /* an integer is a number */
    assert_true(value == 2);
    assert_false(num_member(json_real(2.0000001), &value, why));
    assert_string_equal(why, "\"x\" must be a number from 0.5 to 2");
    assert_false(num_member(json_real(0.4999), &value, why));
    assert_false(num_member(json_string("1"), &value, why));
    assert_false(num_member(json_null(), &value, why));
}

/* route_int_query on ?n=text within [min, max] (default 5): returns its verdict. */
static int int_query(const char *text, long long min, long long max, long long *value,
                     struct svc_request *req)
{
    memset(req, 0, sizeof(*req));
    req->name = "n";
    req->value = text;
    enum svc_outcome out = SVC_FATAL;
    int rc = route_int_query(req, "n", min, max, 5, value, &out);
    if (rc == 0) {
        assert_int_equal(req->problems, 0);
    } else {
        assert_int_equal(rc, -1);
        assert_int_equal(req->problems, 1);
        assert_ptr_equal(req->problem, SVC_P(INVALID_PARAMETER));
        assert_int_equal(out, SVC_REPLIED);
    }
    return rc;
}

static void test_int_query_accepts_the_number(void **state)
{
    struct svc_request req;
    long long value = 0;
    assert_int_equal(int_query(NULL, 1, 100, &value, &req), 0);
    assert_int_equal(value, 5); /* absent: the default */
    assert_int_equal(int_query("1", 1, 100, &value, &req), 0);
    assert_int_equal(value, 1);
    assert_int_equal(int_query("100", 1, 100, &value, &req), 0);
    assert_int_equal(value, 100);
    assert_int_equal(int_query("007", 1, 100, &value, &req), 0);
    assert_int_equal(value, 7);
    assert_int_equal(int_query("-3", -10, 10, &value, &req), 0);
    assert_int_equal(value, -3);
    assert_int_equal(int_query("9223372036854775807", 0, LLONG_MAX, &value, &req), 0);
    assert_true(value == LLONG_MAX);
}

static void test_int_query_rejects_other_text(void **state)
{
    static const char *const bad[] = {"0", "101", " 5",   "+5",  "5 ",  "5x",   "",
                                      "-", "--5", "0x10", "1e2", "\t5", "-0x1", "5.0"};
    struct svc_request req;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long long value = 0;
        if (int_query(bad[i], 1, 100, &value, &req) != -1)
            fail_msg("n=\"%s\" was accepted as %lld", bad[i], value);
        assert_string_equal(req.detail, "n must be an integer from 1 to 100");
    }
}

/* Past the range of long long strtoll answers LLONG_MAX/MIN with ERANGE: not the bound. */
static void test_int_query_overflow(void **state)
{
    struct svc_request req;
    long long value = 0;
    assert_int_equal(int_query("9223372036854775808", 0, LLONG_MAX, &value, &req), -1);
    assert_int_equal(int_query("99999999999999999999999", 0, LLONG_MAX, &value, &req), -1);
    assert_int_equal(int_query("-9223372036854775809", LLONG_MIN, 0, &value, &req), -1);
    assert_int_equal(int_query("-9223372036854775808", LLONG_MIN, 0, &value, &req), 0);
    assert_true(value == LLONG_MIN);
}

static void test_cursor_query(void **state)
{
    struct svc_request req = {"after", NULL, 0, 0, ""};
    const char *after = "x";
    enum svc_outcome out = SVC_FATAL;
    assert_int_equal(route_cursor_query(&req, &after, &out), 0);
    assert_null(after);
    req.value = "caf\xc3\xa9";
    assert_int_equal(route_cursor_query(&req, &after, &out), 0);
    assert_string_equal(after, "caf\xc3\xa9");
    assert_int_equal(req.problems, 0);
    req.value = "caf\xc3";
    assert_int_equal(route_cursor_query(&req, &after, &out), -1);
    assert_int_equal(req.problems, 1);
    assert_ptr_equal(req.problem, SVC_P(INVALID_PARAMETER));
    assert_string_equal(req.detail, "after must be valid UTF-8");
    assert_int_equal(out, SVC_REPLIED);
}

/* A path parameter naming a resource: a valid name comes back as it is, anything else is a 400
 * invalid_name whose detail says which name and why. */
static void test_name_param(void **state)
{
    enum svc_outcome out = SVC_FATAL;
    struct svc_request req = {.name = "queue", .value = "mail-1"};
    assert_string_equal(route_name_param(&req, "queue", &out), "mail-1");
    assert_int_equal(req.problems, 0);
    static const char *const bad[] = {"", "a b", "_other", "é"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct svc_request r = {.name = "topic", .value = bad[i]};
        assert_null(route_name_param(&r, "topic", &out));
        assert_int_equal(r.problems, 1);
        assert_ptr_equal(r.problem, ROUTE_P(INVALID_NAME));
        assert_int_equal(out, SVC_REPLIED);
        assert_int_equal(strncmp(r.detail, "topic name: ", 12), 0);
    }
    struct svc_request q = {.name = "producer", .value = "web"};
    assert_int_equal(route_valid_name(&q, "web", "producer", &out), 0);
    assert_int_equal(route_valid_name(&q, "w/b", "producer", &out), -1);
    assert_int_equal(strncmp(q.detail, "producer name: ", 15), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_only_members),
        cmocka_unit_test(test_int_member_bounds),
        cmocka_unit_test(test_int_member_null),
        cmocka_unit_test(test_num_member_bounds),
        cmocka_unit_test(test_int_query_accepts_the_number),
        cmocka_unit_test(test_int_query_rejects_other_text),
        cmocka_unit_test(test_int_query_overflow),
        cmocka_unit_test(test_cursor_query),
        cmocka_unit_test(test_name_param),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
