/* Bearer-token authentication of a running rowlock: 401 without a token or with an unknown one,
 * 403 without the scope, 200 with it; ops routes open by default and closed with open-ops off;
 * and the loud warning when no tokens file makes the service run open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static char tokens_path[] = "/tmp/rowlock-test-tokens-XXXXXX";

static int setup(void **state)
{
    int fd = mkstemp(tokens_path);
    const char *text = "# test tokens\n"
                       "reader-token-0123456789 read\n"
                       "writer-token-0123456789 write,work\n"
                       "admin-token-01234567890 admin\n";
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    close(fd);
    return th_svc_db("auth");
}

static int teardown(void **state)
{
    unlink(tokens_path);
    return 0;
}

static long get_status(int port, const char *path, const char *auth, const char **code)
{
    static struct th_response r;
    char header[256];
    snprintf(header, sizeof(header), "Authorization: %s", auth ? auth : "");
    const char *headers[] = {header, NULL};
    th_response_free(&r);
    assert_int_equal(th_http(port, "GET", path, auth ? headers : NULL, NULL, 0, &r), 0);
    *code = th_problem_code(&r);
    return r.status;
}

static void tokens_gate_routes_by_scope(void **state)
{
    struct th_service svc;
    char env_tokens[256];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, "ROWLOCK_OPEN_OPS=false", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    assert_false(th_service_logged(&svc, "RUNNING OPEN"));
    const char *code;

    assert_int_equal(get_status(svc.port, "/metrics", NULL, &code), 401);
    assert_string_equal(code, "unauthorized");
    assert_int_equal(get_status(svc.port, "/metrics", "Bearer not-a-known-token-000", &code), 401);
    assert_string_equal(code, "unauthorized");
    assert_int_equal(get_status(svc.port, "/metrics", "Basic cmVhZGVyOng=", &code), 401);
    /* a token without the read scope is known but forbidden */
    assert_int_equal(get_status(svc.port, "/metrics", "Bearer writer-token-0123456789", &code),
                     403);
    assert_string_equal(code, "forbidden");
    assert_int_equal(get_status(svc.port, "/metrics", "Bearer reader-token-0123456789", &code),
                     200);
    assert_int_equal(get_status(svc.port, "/readyz", "Bearer admin-token-01234567890", &code), 200);
    /* a prefix of a valid token is not valid */
    assert_int_equal(get_status(svc.port, "/healthz", "Bearer reader-token-012345678", &code), 401);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void ops_routes_are_open_by_default(void **state)
{
    struct th_service svc;
    char env_tokens[256];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    const char *code;
    assert_int_equal(get_status(svc.port, "/healthz", NULL, &code), 200);
    assert_int_equal(get_status(svc.port, "/metrics", NULL, &code), 200);
    assert_int_equal(get_status(svc.port, "/openapi.json", NULL, &code), 200);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void no_tokens_file_runs_open_and_says_so(void **state)
{
    struct th_service svc;
    const char *env[] = {"ROWLOCK_OPEN_OPS=false", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    assert_true(th_service_logged(&svc, "\"level\":\"warn\",\"msg\":\"RUNNING OPEN"));
    const char *code;
    assert_int_equal(get_status(svc.port, "/metrics", NULL, &code), 200);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void bad_tokens_file_stops_startup_with_exit_2(void **state)
{
    char path[] = "/tmp/rowlock-test-badtokens-XXXXXX";
    int fd = mkstemp(path);
    const char *text = "short read\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char env_tokens[256];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", path);
    const char *env[] = {env_tokens, NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), -1);
    assert_int_equal(svc.exit_code, 2);
    assert_true(th_service_logged(&svc, "line 1: token shorter than 16 characters"));
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_gate_routes_by_scope),
        cmocka_unit_test(ops_routes_are_open_by_default),
        cmocka_unit_test(no_tokens_file_runs_open_and_says_so),
        cmocka_unit_test(bad_tokens_file_stops_startup_with_exit_2),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
