/* service/healthcheck.c, the parts without a socket: the http:// and https:// URLs `rowlock
 * --check-health` accepts (host, IPv6 in brackets, port, path with its query; 80 or 443 by
 * default) and refuses (another scheme, user information, a bad port, white space), the status
 * lines it reads, and the exit status 2 of a malformed command line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "service/healthcheck.h"

static void parse_ok(const char *url, const char *host, const char *port, const char *path)
{
    struct svc_health_url u;
    char why[256] = "";
    if (svc_health_url_parse(url, &u, why, sizeof(why)) != 0)
        fail_msg("%s refused: %s", url, why);
    assert_int_equal(u.tls, strncmp(url, "https:", 6) == 0);
    assert_string_equal(u.host, host);
    assert_string_equal(u.port, port);
    assert_string_equal(u.path, path);
}

static void parse_refused(const char *url)
{
    struct svc_health_url u;
    char why[256] = "";
    if (svc_health_url_parse(url, &u, why, sizeof(why)) == 0)
        fail_msg("%s accepted", url);
    assert_true(why[0] != '\0');
}

static void urls_taken_apart(void **state)
{
    parse_ok("http://127.0.0.1:8080/readyz", "127.0.0.1", "8080", "/readyz");
    parse_ok("http://localhost/healthz", "localhost", "80", "/healthz");
    parse_ok("http://db-host:9", "db-host", "9", "/");
    parse_ok("http://[::1]:8080/healthz", "::1", "8080", "/healthz");
    parse_ok("http://[::1]/", "::1", "80", "/");
    parse_ok("http://h:08080/x?y=1", "h", "8080", "/x?y=1");
    parse_ok("http://h:65535?q", "h", "65535", "/?q");
    parse_ok("https://127.0.0.1:8443/healthz", "127.0.0.1", "8443", "/healthz");
    parse_ok("https://rowlock.example", "rowlock.example", "443", "/");
    parse_ok("https://[::1]/readyz", "::1", "443", "/readyz");
}

static void bad_urls_refused(void **state)
{
    const char *bad[] = {"ftp://h/",         "h:8080/healthz", "http://",           "http://:80/",
                         "http://u:p@h/",    "http://h:0/",    "http://h:65536",    "http://h:80x/",
                         "http://h:/",       "http://[::1/",   "http://[::1]x:80/", "http://h/a b",
                         "http://h/a\r\n",   "http://h:-1/",   "HTTP://h/",         "http://[]:80/",
                         "http://h:123456/", "https://",       "https:/h/",         "HTTPS://h/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_refused(bad[i]);
}

static void status_lines(void **state)
{
    assert_int_equal(svc_health_status_line("HTTP/1.1 200 OK", 15), 200);
    assert_int_equal(svc_health_status_line("HTTP/1.0 503 Service Unavailable\r", 33), 503);
    assert_int_equal(svc_health_status_line("HTTP/1.1 204", 12), 204);
    assert_int_equal(svc_health_status_line("HTTP/1.1 200\r", 13), 200);
    assert_int_equal(svc_health_status_line("HTTP/2 200 OK", 13), -1);
    assert_int_equal(svc_health_status_line("HTTP/1.1 20 OK", 14), -1);
    assert_int_equal(svc_health_status_line("HTTP/1.1 2000 OK", 16), -1);
    assert_int_equal(svc_health_status_line("HTTP/1.1 099 x", 14), -1);
    assert_int_equal(svc_health_status_line("SSH-2.0-OpenSSH", 15), -1);
    assert_int_equal(svc_health_status_line("", 0), -1);
}

static int run(int argc, const char **args)
{
    char *argv[8];
    for (int i = 0; i < argc; i++)
        argv[i] = (char *)args[i];
    FILE *out = tmpfile(), *err = tmpfile();
    int rc = svc_healthcheck_main(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return rc;
}

static void command_line(void **state)
{
    const char *want[] = {"rowlock", "--check-health", "http://h/"};
    const char *eq[] = {"rowlock", "--check-health=http://h/"};
    const char *other[] = {"rowlock", "--port=1"};
    assert_true(svc_healthcheck_wanted(3, (char **)want));
    assert_true(svc_healthcheck_wanted(2, (char **)eq));
    assert_false(svc_healthcheck_wanted(2, (char **)other));
    assert_false(svc_healthcheck_wanted(1, (char **)want));

    const char *no_url[] = {"rowlock", "--check-health"};
    const char *empty[] = {"rowlock", "--check-health="};
    const char *scheme[] = {"rowlock", "--check-health", "tls://h/"};
    const char *extra[] = {"rowlock", "--check-health", "http://h/", "--verbose"};
    const char *zero[] = {"rowlock", "--check-health", "http://h/", "--timeout-ms=0"};
    const char *junk[] = {"rowlock", "--check-health", "http://h/", "--timeout-ms=5s"};
    assert_int_equal(run(2, no_url), 2);
    assert_int_equal(run(2, empty), 2);
    assert_int_equal(run(3, scheme), 2);
    assert_int_equal(run(4, extra), 2);
    assert_int_equal(run(4, zero), 2);
    assert_int_equal(run(4, junk), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(urls_taken_apart),
        cmocka_unit_test(bad_urls_refused),
        cmocka_unit_test(status_lines),
        cmocka_unit_test(command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
