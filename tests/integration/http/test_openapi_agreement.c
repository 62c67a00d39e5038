/* The running service and its OpenAPI document agree: every operation the served document lists
 * is routed by the service (never 404 route_not_found or 405), answers with a status the
 * operation documents, problem statuses come as application/problem+json, and 2xx bodies come
 * in a documented media type. (The route table versus the document is checked statically by
 * tests/unit/routes/test_route_table_openapi.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    return th_svc_start("openapi", NULL);
}

/* Replaces every {param} of tpl with "sample-1". */
static void concrete_path(const char *tpl, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = tpl; *p && o + 16 < size; p++) {
        if (*p == '{') {
            const char *end = strchr(p, '}');
            o += (size_t)snprintf(out + o, size - o, "sample-1");
            p = end;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static json_t *resolve(json_t *doc, json_t *node)
{
    const char *ref = json_string_value(json_object_get(node, "$ref"));
    if (ref == NULL || strncmp(ref, "#/", 2) != 0)
        return node;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", ref + 2);
    json_t *cur = doc;
    for (char *save = NULL, *tok = strtok_r(buf, "/", &save); tok && cur;
         tok = strtok_r(NULL, "/", &save))
        cur = json_object_get(cur, tok);
    return cur;
}

static void check_operation(json_t *doc, const char *tpl, const char *method, json_t *op)
{
    char path[1024], upper[16], ct_header[160] = "", status[8];
    concrete_path(tpl, path, sizeof(path));
    size_t i = 0;
    for (; method[i] && i < sizeof(upper) - 1; i++)
        upper[i] = (char)(method[i] - 'a' + 'A');
    upper[i] = '\0';
    const char *body = NULL;
    json_t *rb = resolve(doc, json_object_get(op, "requestBody"));
    if (rb != NULL) {
        const char *media = json_object_iter_key(json_object_iter(json_object_get(rb, "content")));
        snprintf(ct_header, sizeof(ct_header), "Content-Type: %s", media ? media : "");
        body = "{}";
    }
    const char *headers[] = {ct_header, NULL};
    struct th_response r;
    assert_int_equal(
        th_http(th_svc.port, upper, path, body ? headers : NULL, body, body ? strlen(body) : 0, &r),
        0);
    if (strcmp(th_problem_code(&r), "route_not_found") == 0 || r.status == 405)
        fail_msg("%s %s is documented but not routed (%ld)", upper, tpl, r.status);
    snprintf(status, sizeof(status), "%ld", r.status);
    json_t *responses = json_object_get(op, "responses");
    json_t *resp = json_object_get(responses, status);
    if (resp == NULL)
        resp = json_object_get(responses, "default");
    if (resp == NULL)
        fail_msg("%s %s answered %ld, which its operation does not document: %s", upper, tpl,
                 r.status, r.body);
    resp = resolve(doc, resp);
    char ct[160] = "";
    th_header(&r, "Content-Type", ct, sizeof(ct));
    if (r.status >= 400) {
        assert_string_equal(ct, "application/problem+json");
    } else if (json_object_get(resp, "content") != NULL &&
               json_object_get(json_object_get(resp, "content"), ct) == NULL) {
        fail_msg("%s %s answered Content-Type %s, not documented", upper, tpl, ct);
    }
    th_response_free(&r);
}

static void every_documented_operation_is_served(void **state)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/openapi.json", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *doc = json_incref(r.json);
    th_response_free(&r);
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    const char *tpl;
    json_t *item;
    size_t operations = 0;
    json_object_foreach(json_object_get(doc, "paths"), tpl, item)
    {
        const char *method;
        json_t *op;
        json_object_foreach(item, method, op)
        {
            if (strcmp(method, "parameters") == 0 || strcmp(method, "summary") == 0 ||
                strcmp(method, "description") == 0)
                continue;
            check_operation(doc, tpl, method, op);
            operations++;
        }
    }
    assert_true(operations >= 4);
    json_decref(doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_documented_operation_is_served),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
