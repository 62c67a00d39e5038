/* Where rowlock listens, and what it says about its configuration: "::" serves IPv6 and IPv4
 * clients (dual stack); the "listening" line says whether loopback only or all interfaces reach
 * it, after a warning when more than loopback reaches it without tokens; a port already taken
 * fails with a line naming the address, the port and "address already in use"; a listen address
 * that is no address exits 2 before the database is touched; a ROWLOCK_* variable no setting reads
 * (a typo) and a pool smaller than the worker count are warned about, the tests' own ROWLOCK_TEST_*
 * variables are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    return th_svc_db("listen");
}

/* GET /healthz over IPv6 loopback; returns the status line's code. */
static int healthz_v6(int port)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    inet_pton(AF_INET6, "::1", &a.sin6_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    assert_int_equal(write(fd, req, sizeof(req) - 1), (ssize_t)sizeof(req) - 1);
    char buf[4096];
    assert_true(th_raw_read(fd, buf, sizeof(buf), 5000) > 12);
    close(fd);
    return atoi(buf + 9);
}

static void dual_stack_and_address_in_use(void **state)
{
    const char *env[] = {"ROWLOCK_LISTEN_ADDRESS=::", NULL};
    struct th_service svc, second;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    assert_true(th_service_logged(&svc, "\"address\":\"::\",\"reach\":\"all interfaces\""));
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/healthz", NULL, NULL, 0, &r), 0); /* IPv4 */
    assert_int_equal(r.status, 200);
    th_response_free(&r);
    assert_int_equal(healthz_v6(svc.port), 200);

    char port[64], needle[128];
    snprintf(port, sizeof(port), "ROWLOCK_PORT=%d", svc.port);
    const char *env2[] = {"ROWLOCK_LISTEN_ADDRESS=0.0.0.0", port, NULL};
    assert_int_equal(th_service_start(&second, th_svc_dburl, env2), -1);
    snprintf(needle, sizeof(needle),
             "\"msg\":\"cannot listen\",\"address\":\"0.0.0.0\",\"port\":%d", svc.port);
    assert_true(th_service_logged(&second, needle));
    assert_true(th_service_logged(&second, "address already in use"));
    assert_int_equal(second.exit_code, 1); /* it exited on its own (the harness reaped it) */
    assert_int_equal(th_service_stop(&svc), 0);
}

/* 127.0.0.1 is loopback only, said in the "listening" line; 0.0.0.0 is every interface, and
 * without tokens a warning says so first; with a tokens file it does not. */
static void listening_line_says_who_reaches_it(void **state)
{
    char tokens[] = "/tmp/rowlock-listen-tokens-XXXXXX", env_tokens[256];
    int fd = mkstemp(tokens);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "listen-test-token-0123456789 read\n", 34), 34);
    close(fd);
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens);
    const struct {
        const char *address, *tokens, *line;
        int warned;
    } cases[] = {
        {"127.0.0.1", NULL, "\"address\":\"127.0.0.1\",\"reach\":\"loopback only\"", 0},
        {"0.0.0.0", NULL, "\"address\":\"0.0.0.0\",\"reach\":\"all interfaces\"", 1},
        {"0.0.0.0", env_tokens, "\"address\":\"0.0.0.0\",\"reach\":\"all interfaces\"", 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char address[64], line[160];
        struct th_service svc;
        snprintf(address, sizeof(address), "ROWLOCK_LISTEN_ADDRESS=%s", cases[i].address);
        snprintf(line, sizeof(line), "\"msg\":\"listening\",%s", cases[i].line);
        const char *env[] = {address, cases[i].tokens, NULL};
        assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
        assert_true(th_service_logged(&svc, line));
        assert_int_equal(
            th_service_logged(&svc, "\"level\":\"warn\",\"msg\":\"OPEN TO THE NETWORK: "),
            cases[i].warned);
        assert_int_equal(th_service_stop(&svc), 0);
    }
    unlink(tokens);
}

/* A database that cannot be reached and a whole minute to wait for it: the bad address must be
 * refused at once, without waiting. */
static void bad_listen_address_exits_2_before_the_database(void **state)
{
    char cmd[1024], out[1024];
    snprintf(
        cmd, sizeof(cmd),
        "env ROWLOCK_DATABASE_URL=postgresql://nobody@127.0.0.1:1/x ROWLOCK_DB_STARTUP_WAIT_S=60 "
        "'%s' --listen-address=localhost 2>&1",
        ROWLOCK_BINARY);
    double start = th_now();
    int status = th_run(cmd, out, sizeof(out));
    assert_true(th_now() - start < 5);
    assert_int_equal(status, 2);
    assert_non_null(strstr(out, "invalid listen-address \"localhost\""));
    assert_null(strstr(out, "database"));
}

static void doubtful_settings_are_warned(void **state)
{
    const char *env[] = {"ROWLOCK_PROT=9090", "ROWLOCK_TEST_ANYTHING=1", "ROWLOCK_POOL_SIZE=2",
                         "ROWLOCK_WORKERS=4", NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    assert_true(th_service_logged(
        &svc, "\"level\":\"warn\",\"msg\":\"ROWLOCK_PROT is set but no setting reads it"));
    assert_false(th_service_logged(&svc, "ROWLOCK_TEST_ANYTHING"));
    assert_true(th_service_logged(&svc, "ROWLOCK_POOL_SIZE=2 is below ROWLOCK_WORKERS=4"));
    assert_int_equal(th_service_stop(&svc), 0);
    const char *fine[] = {"ROWLOCK_POOL_SIZE=4", "ROWLOCK_WORKERS=4", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, fine), 0);
    assert_false(th_service_logged(&svc, "is below ROWLOCK_WORKERS"));
    assert_false(th_service_logged(&svc, "no setting reads it"));
    assert_int_equal(th_service_stop(&svc), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dual_stack_and_address_in_use),
        cmocka_unit_test(listening_line_says_who_reaches_it),
        cmocka_unit_test(bad_listen_address_exits_2_before_the_database),
        cmocka_unit_test(doubtful_settings_are_warned),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
