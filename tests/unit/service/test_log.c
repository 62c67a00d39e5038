/* Unit tests of service/log.c's access line (svc_log_access_format): whatever bytes the request
 * held in its method, target and request id, the line is one well-formed UTF-8 JSON object with
 * the same fields; a long path is cut at a character boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "service/json_util.h"
#include "service/log.h"

/* Formats a and returns the parsed line (json_decref it), after checking it is UTF-8 JSON. */
static json_t *format_ok(const struct svc_access *a)
{
    size_t len = 0;
    char *line = svc_log_access_format(a, &len);
    assert_non_null(line);
    assert_int_equal(len, strlen(line));
    assert_true(len > 0 && line[len - 1] == '\n');
    assert_true(svc_utf8_valid(line, len));
    json_error_t err;
    json_t *doc = json_loadb(line, len - 1, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    free(line);
    return doc;
}

static const char *field(json_t *doc, const char *name)
{
    const char *v = json_string_value(json_object_get(doc, name));
    assert_non_null(v);
    return v;
}

static void test_plain_line(void **state)
{
    const char *path = "/topics/t1?limit=1";
    struct svc_access a = {"rid", "GET", "/topics/{topic}", path, 10, 200, 1.5, NULL};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "msg"), "request");
    assert_string_equal(field(doc, "request_id"), "rid");
    assert_string_equal(field(doc, "method"), "GET");
    assert_string_equal(field(doc, "route"), "/topics/{topic}");
    assert_string_equal(field(doc, "path"), "/topics/t1");
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), 200);
    assert_null(json_object_get(doc, "code"));
    json_decref(doc);
}

static void test_bytes_that_are_not_utf8(void **state)
{
    const char *path = "/nope\xff\"\\\x01";
    struct svc_access a = {"r\xc3",      "G\xffT", "unmatched", path,
                           strlen(path), 404,      0.1,         "route_not_found"};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "method"), "G\xef\xbf\xbdT");
    assert_string_equal(field(doc, "path"), "/nope\xef\xbf\xbd\"\\\x01");
    assert_string_equal(field(doc, "request_id"), "r\xef\xbf\xbd");
    assert_string_equal(field(doc, "code"), "route_not_found");
    json_decref(doc);
}

/* "/nop/" then 600 é: cut at 512 bytes, which falls inside an é; the é is left out whole. */
static void test_long_path_cut_at_character(void **state)
{
    char path[2000] = "/nop/";
    size_t n = strlen(path);
    for (int i = 0; i < 600; i++, n += 2)
        memcpy(path + n, "\xc3\xa9", 2);
    struct svc_access a = {"r", "GET", "unmatched", path, n, 404, 0, NULL};
    json_t *doc = format_ok(&a);
    const char *p = field(doc, "path");
    assert_int_equal(strlen(p), 511);
    assert_memory_equal(p, path, 511);
    json_decref(doc);
    /* the worst escaping of every field still fits: 512 control bytes */
    memset(path, 1, 600);
    a.path_len = 600;
    a.method = "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01";
    doc = format_ok(&a);
    assert_int_equal(strlen(field(doc, "path")), 512);
    json_decref(doc);
}

static void test_absent_fields(void **state)
{
    struct svc_access a = {NULL, NULL, NULL, NULL, 0, -1, -5, NULL};
    json_t *doc = format_ok(&a);
    assert_string_equal(field(doc, "path"), "");
    assert_int_equal(json_integer_value(json_object_get(doc, "status")), 0);
    json_decref(doc);
}

/* SVC_NUM keys carry JSON numbers; a value that is no JSON number stays a string, so a caller's
 * mistake never breaks the line; plain keys stay strings even when they look numeric. */
static void test_numbers_are_json_numbers(void **state)
{
    char *line = svc_log_format(SVC_LOG_INFO, "listening", "address", "::", SVC_NUM("port"), "8080",
                                SVC_NUM("ratio"), "-1.5e3", SVC_NUM("bad"), "12abc",
                                SVC_NUM("lead"), "012", SVC_NUM("none"), NULL, "text", "42", NULL);
    assert_non_null(line);
    json_error_t err;
    json_t *doc = json_loads(line, 0, &err);
    if (doc == NULL)
        fail_msg("not JSON (%s): %s", err.text, line);
    assert_true(json_is_integer(json_object_get(doc, "port")));
    assert_int_equal(json_integer_value(json_object_get(doc, "port")), 8080);
    assert_true(json_is_real(json_object_get(doc, "ratio")));
    assert_string_equal(field(doc, "bad"), "12abc");
    assert_string_equal(field(doc, "lead"), "012");
    assert_string_equal(field(doc, "none"), "");
    assert_string_equal(field(doc, "text"), "42");
    assert_string_equal(field(doc, "address"), "::");
    assert_null(json_object_get(doc, "#port"));
    json_decref(doc);
    free(line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_line),
        cmocka_unit_test(test_bytes_that_are_not_utf8),
        cmocka_unit_test(test_long_path_cut_at_character),
        cmocka_unit_test(test_absent_fields),
        cmocka_unit_test(test_numbers_are_json_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
