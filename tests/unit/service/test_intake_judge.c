/* Unit tests of service/intake_judge.c: what the intake makes of a connection's first bytes
 * (wait, hand over, answer, close), and of a pipeline that came with them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "service/http_internal.h"

#define URL_LIMIT 64

static enum svc_intake_outcome judge(const char *text, int full, int ended,
                                     struct svc_intake_verdict *v)
{
    return svc_intake_judge(text, strlen(text), full, ended, URL_LIMIT, v);
}

static void assert_refused(const char *text, int status, const char *code)
{
    struct svc_intake_verdict v;
    if (judge(text, 0, 0, &v) != SVC_INTAKE_REFUSE)
        fail_msg("not refused: \"%s\"", text);
    assert_int_equal(v.problem->status, status);
    assert_string_equal(v.problem->code, code);
    assert_true(v.detail[0] != '\0');
}

static void test_lines_libmicrohttpd_takes_pass(void **state)
{
    static const char *const lines[] = {
        "GET /healthz HTTP/1.1\r\n",  "GET /healthz HTTP/1.0\r\n", "GET /healthz HTTP/1.9\r\n",
        "GET /healthz HTTP/1.1\n",    "GET  /a  HTTP/1.1  \r\n",   "PATCH /a%20b?x=1 HTTP/1.1\r\n",
        "GET /a b HTTP/1.1\r\n",      "M-SEARCH * HTTP/1.1\r\n",   "GET /\xc3\xa9 HTTP/1.1\r\n",
        "\r\n\r\nGET / HTTP/1.1\r\n", "\n\nGET / HTTP/1.1\r\n",    "G\xffT / HTTP/1.1\r\n",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        struct svc_intake_verdict v;
        if (judge(lines[i], 0, 0, &v) != SVC_INTAKE_PASS)
            fail_msg("refused: \"%s\" (%s)", lines[i], v.detail);
    }
    struct svc_intake_verdict v;
    assert_int_equal(judge("\r\n\nGET /x?y HTTP/1.1\r\n", 0, 0, &v), SVC_INTAKE_PASS);
    assert_int_equal(v.blank, 3); /* to read away */
    assert_int_equal(v.target_len, 4);
    assert_memory_equal(v.target, "/x?y", 4);
}

static void test_malformed_lines_are_refused(void **state)
{
    assert_refused("GET /healthz HTTP/2.0\r\n", 505, "http_version_not_supported");
    assert_refused("GET /healthz HTTP/9.9\r\n", 505, "http_version_not_supported");
    assert_refused("GET / HTTP/0.9\r\n", 505, "http_version_not_supported");
    assert_refused("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "http_version_not_supported");
    assert_refused("GET /healthz HTTP/1\r\n", 400, "bad_request");
    assert_refused("GET /healthz http/1.1\r\n", 400, "bad_request");
    assert_refused("GET /healthz\r\n", 400, "bad_request");
    assert_refused("GET\r\n", 400, "bad_request");
    assert_refused("GET \r\n", 400, "bad_request");
    assert_refused(" GET / HTTP/1.1\r\n", 400, "bad_request");
    assert_refused("GET /a\001b HTTP/1.1\r\n", 400, "bad_request");
    assert_refused("GET /a\rb HTTP/1.1\r\n", 400, "bad_request");
    /* refused before the line ends: what is there cannot begin one */
    assert_refused("GARBAGE\r", 400, "bad_request");
    assert_refused("G\tT", 400, "bad_request");
    assert_refused("\x16\x03\x01\x00\x31\x01", 400, "bad_request");
}

static void test_waits_closes_and_limits(void **state)
{
    struct svc_intake_verdict v;
    assert_int_equal(judge("", 0, 0, &v), SVC_INTAKE_WAIT);
    assert_int_equal(judge("GET /healthz HTT", 0, 0, &v), SVC_INTAKE_WAIT);
    assert_int_equal(judge("GE", 0, 0, &v), SVC_INTAKE_WAIT);
    assert_int_equal(judge("\r\n\r", 0, 0, &v), SVC_INTAKE_WAIT); /* its LF may follow */
    assert_int_equal(v.blank, 3);
    assert_int_equal(judge("\r\n\r\n", 0, 1, &v), SVC_INTAKE_CLOSE); /* nothing asked */
    assert_int_equal(judge("GET /healthz HTT", 0, 1, &v), SVC_INTAKE_REFUSE);
    assert_int_equal(v.problem->status, 400);
    /* a full buffer without a line end: the target is too long, unless empty lines filled it */
    assert_int_equal(judge("GET /aaaaaaaaaaaaaaaaaaaaaaa", 1, 0, &v), SVC_INTAKE_REFUSE);
    assert_int_equal(v.problem->status, 414);
    assert_int_equal(judge("\r\n\r\nGET /aaaaaaaaaaaaa", 1, 0, &v), SVC_INTAKE_WAIT);
    assert_int_equal(v.blank, 4);
    svc_intake_late(&v, 5);
    assert_int_equal(v.problem->status, 408);
    assert_string_equal(v.problem->code, "request_timeout");
}

static int pipeline(const char *text, struct svc_intake_verdict *v)
{
    return svc_intake_judge_pipeline(text, strlen(text), 0, URL_LIMIT, v);
}

#define GET "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"

static void test_pipelines(void **state)
{
    struct svc_intake_verdict v;
    assert_int_equal(pipeline(GET "GARBAGE\r\n" GET, &v), 1);
    assert_int_equal(v.problem->status, 400);
    assert_int_equal(pipeline(GET GET "\r\nGET / HTTP/2.0\r\n\r\n", &v), 2);
    assert_int_equal(v.problem->status, 505);
    assert_int_equal(pipeline("GET / HTTP/1.1\nHost: x\n\nGARBAGE\n", &v), 1);
    /* nothing refused, or a request whose end (or whose effect) is not worked out ahead */
    assert_int_equal(pipeline(GET GET GET, &v), 0);
    assert_int_equal(pipeline(GET "GET / HTTP/1.1\r\nHo", &v), 0);
    assert_int_equal(pipeline("GET / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GARBAGE\r\n", &v), 0);
    assert_int_equal(pipeline("GET / HTTP/1.1\r\nconnection: close\r\n\r\nGARBAGE\r\n", &v), 0);
    assert_int_equal(pipeline("GET / HTTP/1.1\r\nTransfer-Encoding: x\r\n\r\nGARBAGE\r\n", &v), 0);
    assert_int_equal(pipeline("GET / HTTP/1.0\r\n\r\nGARBAGE\r\n", &v), 0);
    assert_int_equal(pipeline(GET "GARB", &v), 0); /* a method so far */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lines_libmicrohttpd_takes_pass),
        cmocka_unit_test(test_malformed_lines_are_refused),
        cmocka_unit_test(test_waits_closes_and_limits),
        cmocka_unit_test(test_pipelines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
