/* SIGHUP reloads without a restart: the tokens file read again (a new token works, a removed one
 * answers 401; a file that fails to parse keeps the tokens in force and the log says why) and
 * the log level file applied (the access lines stop at warn). A keep-alive connection opened
 * before the reloads still answers after them: nothing is dropped. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define OLD_TOKEN "old-admin-token-0123456789"
#define NEW_TOKEN "new-admin-token-0123456789"

static char tokens[] = "/tmp/rowlock-test-reload-tokens-XXXXXX";
static char level[] = "/tmp/rowlock-test-reload-level-XXXXXX";

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    int a = mkstemp(tokens), b = mkstemp(level);
    if (a < 0 || b < 0)
        return -1;
    close(a);
    close(b);
    return th_svc_db("sighup");
}

static int teardown(void **state)
{
    unlink(tokens);
    unlink(level);
    return 0;
}

static long status_with(int port, const char *token)
{
    char header[128];
    snprintf(header, sizeof(header), "Authorization: Bearer %s", token);
    const char *headers[] = {header, NULL};
    struct th_response r;
    assert_int_equal(th_http(port, "GET", "/topics", headers, NULL, 0, &r), 0);
    long status = r.status;
    th_response_free(&r);
    return status;
}

/* One GET /topics on the kept-alive connection fd; returns the status. */
static int kept_alive(int fd, const char *token)
{
    char req[256], buf[8192];
    int n = snprintf(req, sizeof(req),
                     "GET /topics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token);
    assert_int_equal(write(fd, req, (size_t)n), n);
    assert_true(th_raw_read(fd, buf, sizeof(buf), 5000) > 12);
    return atoi(buf + 9);
}

/* Sends SIGHUP and waits for the needle-th line of the reload to be logged. */
static void hup_and_await(struct th_service *svc, const char *needle)
{
    th_service_signal(svc, SIGHUP);
    for (int i = 0; i < 500 && !th_service_logged(svc, needle); i++) {
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    assert_true(th_service_logged(svc, needle));
}

static void reload_swaps_tokens_and_keeps_them_when_broken(void **state)
{
    put(tokens, OLD_TOKEN " admin\n");
    char env_tokens[128];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens);
    const char *env[] = {env_tokens, NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    int fd = th_tcp_connect(svc.port);
    assert_int_equal(kept_alive(fd, OLD_TOKEN), 200);
    assert_int_equal(status_with(svc.port, NEW_TOKEN), 401);

    put(tokens, "# rotated\n" NEW_TOKEN " admin\n");
    hup_and_await(&svc, "\"msg\":\"bearer tokens reloaded\",\"tokens\":1");
    assert_int_equal(status_with(svc.port, NEW_TOKEN), 200);
    assert_int_equal(status_with(svc.port, OLD_TOKEN), 401);
    assert_int_equal(kept_alive(fd, NEW_TOKEN), 200); /* the same connection */

    put(tokens, OLD_TOKEN " admin\nshort admin\n");
    hup_and_await(&svc, "tokens file not reloaded");
    assert_true(th_service_logged(&svc, "line 2: token shorter than 16 characters"));
    assert_int_equal(status_with(svc.port, NEW_TOKEN), 200);
    assert_int_equal(status_with(svc.port, OLD_TOKEN), 401);
    assert_int_equal(kept_alive(fd, NEW_TOKEN), 200);
    close(fd);
    assert_int_equal(th_service_stop(&svc), 0);
}

static int access_logged(struct th_service *svc, const char *rid)
{
    char header[128], needle[128];
    snprintf(header, sizeof(header), "X-Request-Id: %s", rid);
    const char *headers[] = {header, NULL};
    struct th_response r;
    assert_int_equal(th_http(svc->port, "GET", "/healthz", headers, NULL, 0, &r), 0);
    th_response_free(&r);
    snprintf(needle, sizeof(needle), "\"request_id\":\"%s\"", rid);
    for (int i = 0; i < 50 && !th_service_logged(svc, needle); i++) {
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    return th_service_logged(svc, needle);
}

static void reload_applies_the_log_level_file(void **state)
{
    put(level, "# the level of the running process\ninfo\n");
    char env_level[128];
    snprintf(env_level, sizeof(env_level), "ROWLOCK_LOG_LEVEL_FILE=%s", level);
    const char *env[] = {env_level, "ROWLOCK_LOG_LEVEL=error", NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env),
                     0); /* "listening" is info: the file won */
    assert_true(access_logged(&svc, "before-reload"));
    put(level, "warn\n");
    hup_and_await(&svc, "\"msg\":\"log level set\",\"level\":\"warn\"");
    assert_false(access_logged(&svc, "after-reload"));
    put(level, "loud\n");
    hup_and_await(&svc, "log level not reloaded");
    assert_true(th_service_logged(&svc, "\"level\":\"warn\""));
    assert_false(access_logged(&svc, "after-broken-file"));
    assert_int_equal(th_service_stop(&svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reload_swaps_tokens_and_keeps_them_when_broken),
        cmocka_unit_test(reload_applies_the_log_level_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
