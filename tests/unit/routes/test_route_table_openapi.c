/* Unit tests tying the embedded OpenAPI document (service/openapi.h) to the code: every route of
 * routes_table is documented under `paths` and every documented operation is in the table,
 * components.schemas.ProblemCode.enum is exactly the problem code table, and every operation
 * documents at least one 2xx response. Mismatches are listed before the test fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "routes/routes.h"
#include "service/openapi.h"
#include "service/problem.h"

static struct svc_route *routes_table;
static size_t routes_count;

/* Operation keys of an OpenAPI 3.1 path item; its other keys (summary, parameters...) are not. */
static const char *const http_methods[] = {"get",     "put",  "post",  "delete",
                                           "options", "head", "patch", "trace"};

static int is_operation_key(const char *key)
{
    for (size_t i = 0; i < sizeof(http_methods) / sizeof(http_methods[0]); i++)
        if (strcmp(key, http_methods[i]) == 0)
            return 1;
    return 0;
}

static int setup_document(void **state)
{
    json_error_t error;
    json_t *doc = json_loadb(svc_openapi_json, svc_openapi_json_len, 0, &error);
    if (doc == NULL) {
        print_error("openapi/openapi.json is not valid JSON: line %d column %d: %s\n", error.line,
                    error.column, error.text);
        return -1;
    }
    *state = doc;
    return 0;
}

static int teardown_document(void **state)
{
    json_decref(*state);
    return 0;
}

static json_t *document_paths(void **state)
{
    json_t *paths = json_object_get(*state, "paths");
    if (!json_is_object(paths))
        fail_msg("the document has no `paths` object");
    return paths;
}

/* The table route documenting method (lowercase) on path, or NULL. */
static const struct svc_route *table_route(const char *method, const char *path)
{
    for (size_t i = 0; i < routes_count; i++)
        if (strcasecmp(routes_table[i].method, method) == 0 &&
            strcmp(routes_table[i].path, path) == 0)
            return &routes_table[i];
    return NULL;
}

static void test_document_basics(void **state)
{
    const char *version = json_string_value(json_object_get(*state, "openapi"));
    if (version == NULL || strncmp(version, "3.", 2) != 0)
        fail_msg("`openapi` is %s, expected a 3.x version", version ? version : "missing");
    assert_true(json_is_object(json_object_get(*state, "info")));
    document_paths(state);
}

static void test_table_has_no_duplicates(void **state)
{
    assert_true(routes_count > 0);
    for (size_t i = 0; i < routes_count; i++)
        for (size_t j = i + 1; j < routes_count; j++)
            if (strcmp(routes_table[i].method, routes_table[j].method) == 0 &&
                strcmp(routes_table[i].path, routes_table[j].path) == 0)
                fail_msg("routes_table lists %s %s twice", routes_table[i].method,
                         routes_table[i].path);
}

static void test_table_routes_documented(void **state)
{
    json_t *paths = document_paths(state);
    size_t missing = 0;
    for (size_t i = 0; i < routes_count; i++) {
        char method[16];
        size_t n = 0;
        for (const char *p = routes_table[i].method; *p && n < sizeof(method) - 1; p++)
            method[n++] = (char)tolower((unsigned char)*p);
        method[n] = '\0';
        json_t *op = json_object_get(json_object_get(paths, routes_table[i].path), method);
        if (!json_is_object(op)) {
            print_error("undocumented route: %s %s (no paths[\"%s\"].%s)\n", routes_table[i].method,
                        routes_table[i].path, routes_table[i].path, method);
            missing++;
        }
    }
    if (missing > 0)
        fail_msg("%zu of %zu table routes are missing from openapi/openapi.json", missing,
                 routes_count);
}

static void test_documented_operations_in_table(void **state)
{
    json_t *paths = document_paths(state);
    const char *path;
    json_t *item;
    size_t extra = 0;
    json_object_foreach(paths, path, item)
    {
        const char *key;
        json_t *op;
        if (!json_is_object(item)) {
            print_error("paths[\"%s\"] is not an object\n", path);
            extra++;
            continue;
        }
        json_object_foreach(item, key, op)
        {
            if (!is_operation_key(key))
                continue;
            if (table_route(key, path) == NULL) {
                print_error("documented but not in routes_table: %s %s\n", key, path);
                extra++;
            }
        }
    }
    if (extra > 0)
        fail_msg("%zu documented operations are not served", extra);
}

static void test_problem_codes_match(void **state)
{
    json_t *codes = json_object_get(
        json_object_get(json_object_get(json_object_get(*state, "components"), "schemas"),
                        "ProblemCode"),
        "enum");
    if (!json_is_array(codes))
        fail_msg("components.schemas.ProblemCode.enum is missing or not an array");
    size_t mismatches = 0;
    size_t i;
    json_t *v;
    json_array_foreach(codes, i, v)
    {
        const char *code = json_string_value(v);
        int known = 0;
        for (size_t p = 0; code != NULL && p < svc_problem_count(); p++)
            known |= strcmp(svc_problem_at(p)->code, code) == 0;
        if (!known) {
            print_error("ProblemCode.enum[%zu] %s is not in the problem table\n", i,
                        code ? code : "(not a string)");
            mismatches++;
        }
        for (size_t j = 0; code != NULL && j < i; j++)
            if (json_equal(json_array_get(codes, j), v)) {
                print_error("ProblemCode.enum lists %s twice\n", code);
                mismatches++;
            }
    }
    for (size_t p = 0; p < svc_problem_count(); p++) {
        const char *code = svc_problem_at(p)->code;
        int documented = 0;
        json_array_foreach(codes, i, v) documented |=
            json_is_string(v) && strcmp(json_string_value(v), code) == 0;
        if (!documented) {
            print_error("problem code %s is missing from ProblemCode.enum\n", code);
            mismatches++;
        }
    }
    if (mismatches > 0)
        fail_msg("ProblemCode.enum and the problem table differ (%zu mismatches)", mismatches);
}

static void test_operations_document_success(void **state)
{
    json_t *paths = document_paths(state);
    const char *path;
    json_t *item;
    size_t bad = 0;
    json_object_foreach(paths, path, item)
    {
        const char *method;
        json_t *op;
        json_object_foreach(item, method, op)
        {
            if (!is_operation_key(method))
                continue;
            json_t *responses = json_object_get(op, "responses");
            const char *status;
            json_t *resp;
            int success = 0;
            json_object_foreach(responses, status, resp)
            {
                /* a redirect (GET /ui/) succeeds with its 3xx */
                success |= strlen(status) == 3 && (status[0] == '2' || status[0] == '3');
            }
            if (!success) {
                print_error("%s %s documents no 2xx or 3xx response\n", method, path);
                bad++;
            }
        }
    }
    if (bad > 0)
        fail_msg("%zu operations document no 2xx or 3xx response", bad);
}

int main(void)
{
    /* what main serves: every family's routes in one table, and their problem codes */
    routes_table = svc_families_routes(svc_families, svc_families_count, &routes_count);
    if (routes_table == NULL || svc_families_register_problems(svc_families, svc_families_count))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document_basics),
        cmocka_unit_test(test_table_has_no_duplicates),
        cmocka_unit_test(test_table_routes_documented),
        cmocka_unit_test(test_documented_operations_in_table),
        cmocka_unit_test(test_problem_codes_match),
        cmocka_unit_test(test_operations_document_success),
    };
    return cmocka_run_group_tests(tests, setup_document, teardown_document);
}
