/* Header rules a running rowlock (with tokens) enforces before any handler, sent over raw TCP:
 * Host, Content-Type and Authorization given twice, and a header name with whitespace before its
 * colon or another character a name may not hold, are 400 bad_request naming the header, and the
 * request changes nothing; the same request with each header once, well named, succeeds. So is a
 * NUL or a CR inside a header value. And a bearer token followed by spaces or TABs is that
 * token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define ADMIN  "Authorization: Bearer admin-token-01234567890"
#define READER "Authorization: Bearer reader-token-0123456789"
#define JSON   "Content-Type: application/json"

static char tokens_path[] = "/tmp/rowlock-test-tokens-XXXXXX";

static int setup(void **state)
{
    int fd = mkstemp(tokens_path);
    const char *text = "reader-token-0123456789 read\n"
                       "admin-token-01234567890 admin\n";
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    close(fd);
    static char env_tokens[256];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, NULL};
    return th_svc_start("strict_headers", env);
}

static int teardown(void **state)
{
    unlink(tokens_path);
    return th_svc_teardown(state);
}

/* Sends len bytes of req on a connection of its own; the answer in buf, its status returned. */
static int raw_status(const char *req, size_t len, char *buf, size_t size)
{
    th_raw_exchange(th_svc.port, req, len, buf, size, 5000);
    int status = 0;
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return 0;
    return status;
}

/* PUT /topics/<topic> with {} and these header lines (each ending in CRLF) after Host; the
 * status, the answer in buf. */
static int put_topic(const char *topic, const char *headers, char *buf, size_t size)
{
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "PUT /topics/%s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 2\r\n"
                     "Connection: close\r\n\r\n{}",
                     topic, headers);
    return raw_status(req, (size_t)n, buf, size);
}

static int topic_status(const char *topic)
{
    char req[256], buf[8192];
    int n = snprintf(req, sizeof(req),
                     "GET /topics/%s HTTP/1.1\r\nHost: x\r\n" ADMIN "\r\nConnection: close\r\n\r\n",
                     topic);
    return raw_status(req, (size_t)n, buf, sizeof(buf));
}

/* The PUT with these headers is a bad_request problem whose detail holds detail_part, and the
 * topic does not exist afterwards. */
static void assert_refused(const char *topic, const char *headers, const char *detail_part)
{
    char buf[8192];
    int status = put_topic(topic, headers, buf, sizeof(buf));
    if (status != 400 || strstr(buf, "application/problem+json") == NULL ||
        strstr(buf, "\"code\":\"bad_request\"") == NULL || strstr(buf, detail_part) == NULL)
        fail_msg("headers\n%sexpected a bad_request problem about %s, got: %s", headers,
                 detail_part, buf);
    assert_int_equal(topic_status(topic), 404);
}

static void assert_created(const char *topic, const char *headers)
{
    char buf[8192];
    int status = put_topic(topic, headers, buf, sizeof(buf));
    if (status != 201)
        fail_msg("headers\n%sexpected 201, got: %s", headers, buf);
    assert_int_equal(topic_status(topic), 200);
}

/* Were the first Authorization to count, an admin token followed by a read token would create a
 * topic. */
static void two_authorization_headers_are_400(void **state)
{
    assert_refused("auth1", ADMIN "\r\n" READER "\r\n" JSON "\r\n",
                   "more than one Authorization header");
    assert_refused("auth2", READER "\r\n" ADMIN "\r\n" JSON "\r\n",
                   "more than one Authorization header");
    assert_refused("auth3",
                   ADMIN "\r\n" JSON "\r\nauthorization: Bearer admin-token-01234567890\r\n",
                   "more than one Authorization header");
    assert_created("auth1", ADMIN "\r\n" JSON "\r\n");
}

static void two_host_headers_are_400(void **state)
{
    assert_refused("host1", "Host: y\r\n" ADMIN "\r\n" JSON "\r\n", "more than one Host header");
    assert_refused("host2", ADMIN "\r\n" JSON "\r\nhost: x\r\n", "more than one Host header");
    assert_created("host1", ADMIN "\r\n" JSON "\r\n");
}

static void two_content_type_headers_are_400(void **state)
{
    assert_refused("ct1", ADMIN "\r\n" JSON "\r\nContent-Type: text/plain\r\n",
                   "more than one Content-Type header");
    assert_refused("ct2", ADMIN "\r\n" JSON "\r\n" JSON "\r\n",
                   "more than one Content-Type header");
    assert_created("ct1", ADMIN "\r\n" JSON "\r\n");
}

/* libmicrohttpd 0.9.75 hands the name over with the whitespace it found before the colon ("X-A "),
 * so a header the service reads would otherwise go unrecognised: "Content-Type :" is not
 * Content-Type to it, while a proxy in front may have taken it for one. */
static void header_name_with_whitespace_or_a_non_token_character_is_400(void **state)
{
    assert_refused("name1", ADMIN "\r\n" JSON "\r\nX-A : 1\r\n", "X-A \\\" holds whitespace");
    assert_refused("name2", ADMIN "\r\n" JSON "\r\nX-A\t: 1\r\n", "holds whitespace");
    assert_refused("name3", ADMIN "\r\nContent-Type : application/json\r\n" JSON "\r\n",
                   "Content-Type \\\" holds whitespace");
    assert_refused("name4", ADMIN "\r\n" JSON "\r\nX(A): 1\r\n", "X(A)\\\" holds a character");
    assert_created("name1", ADMIN "\r\n" JSON "\r\nX-A: 1\r\n");
}

/* GET path with these header lines after Host; the status. */
static int get_status(const char *path, const char *headers)
{
    char req[1024], buf[8192];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n",
                     path, headers);
    return raw_status(req, (size_t)n, buf, sizeof(buf));
}

/* Whitespace (SP or HTAB) around a field value is not part of it (RFC 9110 section 5.5):
 * libmicrohttpd drops it before the value but keeps it after, so the token check drops it. */
static void bearer_token_followed_by_whitespace_is_the_token(void **state)
{
    assert_int_equal(get_status("/topics", READER "\t\r\n"), 200);
    assert_int_equal(get_status("/topics", READER " \r\n"), 200);
    assert_int_equal(get_status("/topics", READER " \t \t\r\n"), 200);
    assert_created("ows1", ADMIN "\t\r\n" JSON "\r\n");
    /* whitespace inside is not trimmed: that is another token */
    assert_int_equal(get_status("/topics", READER "\tx\r\n"), 401);
    assert_int_equal(get_status("/topics", "Authorization: Bearer \t\r\n"), 401);
}

#define RAW(literal) literal, sizeof(literal) - 1

/* The len bytes of req (NULs and all) are answered with a bad_request problem holding
 * detail_part. */
static void assert_raw_refused(const char *req, size_t len, const char *detail_part)
{
    char buf[8192];
    int status = raw_status(req, len, buf, sizeof(buf));
    if (status != 400 || strstr(buf, "application/problem+json") == NULL ||
        strstr(buf, "\"code\":\"bad_request\"") == NULL || strstr(buf, detail_part) == NULL)
        fail_msg("expected a bad_request problem about %s, got: %s", detail_part, buf);
}

/* libmicrohttpd 0.9.75 ends a value at its first NUL and drops the rest of the line unseen: a
 * token followed by a NUL and anything would pass as that token. A NUL in the first, a middle or
 * the last header, with CRLF or bare LF line ends, right before the line's end, and a CR inside a
 * value, are each refused; the same requests without them are not. */
static void nul_or_cr_in_a_header_value_is_400(void **state)
{
    assert_raw_refused(RAW("PUT /topics/nul1 HTTP/1.1\r\nHost: x\r\n" ADMIN "\r\n" JSON
                           "\r\nX-A: a\0bc\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"),
                       "the X-A header holds a NUL byte");
    assert_raw_refused(RAW("PUT /topics/nul1 HTTP/1.1\r\nHost: x\0y\r\n" ADMIN "\r\n" JSON
                           "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"),
                       "the Host header holds a NUL byte");
    assert_raw_refused(RAW("PUT /topics/nul1 HTTP/1.1\r\nHost: x\r\n" ADMIN "\r\n" JSON
                           "\r\nContent-Length: 2\r\nX-A: a\0b\r\n\r\n{}"),
                       "the X-A header holds a NUL byte");
    assert_raw_refused(RAW("PUT /topics/nul1 HTTP/1.1\r\nHost: x\r\n" ADMIN "\0\r\n" JSON
                           "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"),
                       "the Authorization header holds a NUL byte");
    assert_raw_refused(RAW("PUT /topics/nul1 HTTP/1.1\r\nHost: x\r\n" ADMIN "\r\n" JSON
                           "\r\nX-A: a\rb\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"),
                       "the X-A header holds a CR");
    assert_int_equal(topic_status("nul1"), 404);
    assert_raw_refused(
        RAW("GET /topics HTTP/1.1\r\nHost: x\r\n" READER "\0junk\r\nConnection: close\r\n\r\n"),
        "the Authorization header holds a NUL byte");
    assert_raw_refused(
        RAW("GET /topics HTTP/1.1\nHost: x\n" READER "\0junk\nConnection: close\n\n"),
        "the Authorization header holds a NUL byte");
    assert_raw_refused(
        RAW("GET /topics HTTP/1.1\nHost: x\nConnection: close\n" READER "\0junk\n\n"),
        "the Authorization header holds a NUL byte");
    /* no false alarm: bare LF line ends, empty values, trailing whitespace, two requests on one
     * connection */
    char buf[8192];
    assert_int_equal(raw_status(RAW("GET /topics HTTP/1.1\nHost: x\n" READER
                                    "\nX-E:\nX-S:   \nConnection: close\n\n"),
                                buf, sizeof(buf)),
                     200);
    assert_int_equal(raw_status(RAW("GET /topics HTTP/1.1\r\nHost: x\r\nX-E:\r\n" READER
                                    "\r\nX-S: a  \t\r\nConnection: close\n\r\n"),
                                buf, sizeof(buf)),
                     200);
    int fd = th_tcp_connect(th_svc.port);
    const char two[] = "GET /topics HTTP/1.1\r\nHost: x\r\n" READER "\r\nX-A: 1\r\n\r\n"
                       "GET /topics HTTP/1.1\r\nHost: x\r\nX-B: 2\r\n" READER "\r\n\r\n";
    assert_int_equal(write(fd, two, sizeof(two) - 1), (ssize_t)(sizeof(two) - 1));
    /* the two answers may come in one read or in two */
    size_t got = 0;
    int answered = 0;
    while (answered < 2 && got + 1 < sizeof(buf)) {
        size_t n = th_raw_read(fd, buf + got, sizeof(buf) - got, 5000);
        if (n == 0)
            break;
        got += n;
        answered = 0;
        for (const char *p = buf; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++)
            if (strncmp(p, "HTTP/1.1 200", 12) != 0)
                fail_msg("pipelined requests: %s", buf);
            else
                answered++;
    }
    if (answered != 2)
        fail_msg("pipelined requests: %d of 2 answered: %s", answered, buf);
    close(fd);
    assert_created("nul1", ADMIN "\r\n" JSON "\r\nX-A: abc\r\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_authorization_headers_are_400),
        cmocka_unit_test(two_host_headers_are_400),
        cmocka_unit_test(two_content_type_headers_are_400),
        cmocka_unit_test(header_name_with_whitespace_or_a_non_token_character_is_400),
        cmocka_unit_test(bearer_token_followed_by_whitespace_is_the_token),
        cmocka_unit_test(nul_or_cr_in_a_header_value_is_400),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
