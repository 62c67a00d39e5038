/* Unit tests of service/router.c: svc_router_match (literal and {param} segments, percent-decoding,
 * %2F kept inside a segment, query parsing, 404 versus 405 and its Allow list, bad encodings,
 * too many query parameters, trailing slashes, the more-literal template winning) and the edge
 * cases of svc_percent_decode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "service/router.h"

/* The handler is never called by the matcher; NULL keeps the table free of fake functions. */
static const struct svc_route table[] = {
    {"GET", "/healthz", NULL, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 0 */
    {"GET", "/topics/{topic}/keys/{key}", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 1 */
    {"PUT", "/topics/{topic}/keys/{key}", NULL, SVC_SCOPE_WRITE, SVC_BODY_JSON, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"DELETE", "/topics/{topic}/keys/{key}", NULL, SVC_SCOPE_WRITE, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/keys/{key}/head", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 4 */
    {"GET", "/topics/{topic}/keys/latest", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 5 */
    {"GET", "/topics/{topic}", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 6 */
    {"PATCH", "/topics/{topic}", NULL, SVC_SCOPE_WRITE, SVC_BODY_MERGE_PATCH, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE}, /* 7 */
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

/* Same routes as table[1] and table[5] with the literal one first: order must not matter. */
static const struct svc_route literal_first[] = {
    {"GET", "/topics/{topic}/keys/latest", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/topics/{topic}/keys/{key}", NULL, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
};

static enum svc_match_result match(const char *method, const char *target, struct svc_match *m)
{
    return svc_router_match(table, NTABLE, method, target, m);
}

/* Asserts that m->allow lists exactly the comma-separated methods of want, each once. */
static void assert_allow(const struct svc_match *m, const char *const *want, size_t nwant)
{
    char copy[sizeof(m->allow)];
    size_t seen = 0;
    memcpy(copy, m->allow, sizeof(copy));
    for (char *save = NULL, *w = strtok_r(copy, ", ", &save); w != NULL;
         w = strtok_r(NULL, ", ", &save)) {
        int known = 0;
        for (size_t i = 0; i < nwant; i++)
            known |= strcmp(w, want[i]) == 0;
        if (!known)
            fail_msg("Allow \"%s\" holds unexpected method %s", m->allow, w);
        seen++;
    }
    if (seen != nwant)
        fail_msg("Allow \"%s\" holds %zu methods, expected %zu", m->allow, seen, nwant);
    for (size_t i = 0; i < nwant; i++)
        assert_non_null(strstr(m->allow, want[i]));
}

static void test_literal_route(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/healthz", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 0);
    assert_int_equal(m.nparams, 0);
    assert_int_equal(m.nquery, 0);
    svc_match_free(&m);
}

static void test_params_extracted(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/topics/orders/keys/k1", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_int_equal(m.nparams, 2);
    assert_string_equal(svc_match_param(&m, "topic"), "orders");
    assert_string_equal(svc_match_param(&m, "key"), "k1");
    assert_int_equal(m.params[0].name_len, strlen("topic"));
    assert_memory_equal(m.params[0].name, "topic", 5);
    assert_int_equal(m.params[1].value_len, 2);
    assert_null(svc_match_param(&m, "nope"));
    assert_null(svc_match_param(&m, "top"));
    svc_match_free(&m);

    assert_int_equal(match("PUT", "/topics/orders/keys/k1", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 2);
    svc_match_free(&m);
    assert_int_equal(match("GET", "/topics/orders/keys/k1/head", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 4);
    assert_string_equal(svc_match_param(&m, "key"), "k1");
    svc_match_free(&m);
    assert_int_equal(match("PATCH", "/topics/orders", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 7);
    assert_string_equal(svc_match_param(&m, "topic"), "orders");
    svc_match_free(&m);
}

static void test_params_percent_decoded(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/topics/my%20topic/keys/caf%C3%a9", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "topic"), "my topic");
    assert_string_equal(svc_match_param(&m, "key"), "caf\xc3\xa9");
    assert_int_equal(m.params[1].value_len, 5);
    svc_match_free(&m);

    /* '+' is a literal plus in a path segment, not a space. */
    assert_int_equal(match("GET", "/topics/t/keys/a+b", &m), SVC_MATCH_OK);
    assert_string_equal(svc_match_param(&m, "key"), "a+b");
    svc_match_free(&m);
}

static void test_encoded_slash_stays_in_param(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/topics/t/keys/a%2Fb", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "key"), "a/b");
    svc_match_free(&m);

    /* An encoded slash followed by "head" is still one key, not the /head route. */
    assert_int_equal(match("GET", "/topics/t/keys/a%2fhead", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "key"), "a/head");
    svc_match_free(&m);

    /* An encoded '?' is part of the key, not the start of the query. */
    assert_int_equal(match("GET", "/topics/t/keys/a%3Fb=c?d=e", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "key"), "a?b=c");
    assert_string_equal(svc_match_query(&m, "d"), "e");
    assert_int_equal(m.nquery, 1);
    svc_match_free(&m);

    assert_int_equal(match("GET", "/topics/a%2Fb", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 6);
    assert_string_equal(svc_match_param(&m, "topic"), "a/b");
    svc_match_free(&m);
}

static void test_query_parsed(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/healthz?verbose=1&name=a+b%21&flag&empty=&x%20y=%2B", &m),
                     SVC_MATCH_OK);
    assert_int_equal(m.route, 0);
    assert_int_equal(m.nquery, 5);
    assert_string_equal(svc_match_query(&m, "verbose"), "1");
    assert_string_equal(svc_match_query(&m, "name"), "a b!");
    assert_string_equal(svc_match_query(&m, "flag"), "");
    assert_string_equal(svc_match_query(&m, "empty"), "");
    assert_string_equal(svc_match_query(&m, "x y"), "+");
    assert_null(svc_match_query(&m, "missing"));
    svc_match_free(&m);

    /* Empty pairs are skipped; params and query together. */
    assert_int_equal(match("GET", "/topics/t/keys/k?&&wait=5&&", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_int_equal(m.nquery, 1);
    assert_string_equal(svc_match_query(&m, "wait"), "5");
    assert_string_equal(svc_match_param(&m, "key"), "k");
    svc_match_free(&m);

    /* An empty query string holds nothing; '=' inside a value stays. */
    assert_int_equal(match("GET", "/healthz?", &m), SVC_MATCH_OK);
    assert_int_equal(m.nquery, 0);
    svc_match_free(&m);
    assert_int_equal(match("GET", "/healthz?a=b=c", &m), SVC_MATCH_OK);
    assert_string_equal(svc_match_query(&m, "a"), "b=c");
    svc_match_free(&m);
}

static void test_not_found(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/nope", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(m.route, -1);
    assert_string_equal(m.allow, "");
    assert_int_equal(match("GET", "/topics/t/keys", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics/t/keys/k/head/more", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/HEALTHZ", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/nope?x=%zz", &m), SVC_MATCH_NOT_FOUND);
}

static void test_trailing_slash_and_empty_segment(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/healthz/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "//healthz", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics/t/keys/k/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics//keys/k", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics/t/keys/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("GET", "/topics/t/keys//head", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(match("PUT", "/topics/t/keys/k/", &m), SVC_MATCH_NOT_FOUND);
    assert_int_equal(m.route, -1);
}

static void test_method_not_allowed(void **state)
{
    struct svc_match m;
    static const char *const key_methods[] = {"GET", "PUT", "DELETE"};
    assert_int_equal(match("POST", "/topics/t/keys/k", &m), SVC_MATCH_METHOD_NOT_ALLOWED);
    assert_int_equal(m.route, -1);
    assert_int_equal(m.nparams, 0);
    assert_allow(&m, key_methods, 3);

    /* /keys/latest fits both the literal GET route and every {key} route; GET appears once. */
    assert_int_equal(match("PATCH", "/topics/t/keys/latest", &m), SVC_MATCH_METHOD_NOT_ALLOWED);
    assert_allow(&m, key_methods, 3);

    static const char *const head_methods[] = {"GET"};
    assert_int_equal(match("DELETE", "/topics/t/keys/k/head", &m), SVC_MATCH_METHOD_NOT_ALLOWED);
    assert_allow(&m, head_methods, 1);

    static const char *const topic_methods[] = {"GET", "PATCH"};
    assert_int_equal(match("PUT", "/topics/t?x=1", &m), SVC_MATCH_METHOD_NOT_ALLOWED);
    assert_allow(&m, topic_methods, 2);
    assert_int_equal(m.nquery, 0);

    /* Methods are case-sensitive. */
    assert_int_equal(match("get", "/healthz", &m), SVC_MATCH_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET");
}

static void assert_bad_encoding(const char *target)
{
    struct svc_match m;
    enum svc_match_result r = match("GET", target, &m);
    if (r != SVC_MATCH_BAD_ENCODING)
        fail_msg("%s: got result %d, expected SVC_MATCH_BAD_ENCODING", target, (int)r);
    /* Nothing is left to free. */
    assert_int_equal(m.route, -1);
    assert_int_equal(m.nparams, 0);
    assert_int_equal(m.nquery, 0);
}

static void test_bad_encoding(void **state)
{
    assert_bad_encoding("/topics/t/keys/%zz");
    assert_bad_encoding("/topics/t/keys/a%4");
    assert_bad_encoding("/topics/t/keys/a%");
    assert_bad_encoding("/topics/t/keys/a%4/head");
    assert_bad_encoding("/topics/%g1/keys/k");
    assert_bad_encoding("/topics/t/keys/a%00b");
    assert_bad_encoding("/healthz?a=%zz");
    assert_bad_encoding("/healthz?a=1%");
    assert_bad_encoding("/healthz?a=%00");
    assert_bad_encoding("/healthz?%00=1");
    assert_bad_encoding("/healthz?ok=1&k%2=1");
    assert_bad_encoding("/topics/t/keys/k?a=%4");
}

static void test_too_many_query(void **state)
{
    char target[512];
    struct svc_match m;
    size_t used = (size_t)snprintf(target, sizeof(target), "/healthz?");
    for (int i = 0; i < SVC_MAX_QUERY; i++)
        used +=
            (size_t)snprintf(target + used, sizeof(target) - used, "%sq%d=%d", i ? "&" : "", i, i);
    assert_int_equal(match("GET", target, &m), SVC_MATCH_OK);
    assert_int_equal(m.nquery, SVC_MAX_QUERY);
    assert_string_equal(svc_match_query(&m, "q15"), "15");
    svc_match_free(&m);

    snprintf(target + used, sizeof(target) - used, "&one=more");
    assert_int_equal(match("GET", target, &m), SVC_MATCH_TOO_MANY_QUERY);
    assert_int_equal(m.route, -1);
    assert_int_equal(m.nquery, 0);
}

/* A repeated name is refused, however it is spelt (encoded, '+' for space), with its name. */
static void test_duplicate_query(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/healthz?limit=1&limit=2", &m), SVC_MATCH_DUPLICATE_QUERY);
    assert_string_equal(m.bad_query, "limit");
    assert_int_equal(m.route, -1);
    assert_int_equal(m.nquery, 0);
    assert_int_equal(match("GET", "/healthz?a=1&l%69mit=1&b&limit", &m), SVC_MATCH_DUPLICATE_QUERY);
    assert_string_equal(m.bad_query, "limit");
    assert_int_equal(match("GET", "/healthz?a+b=1&a%20b=2", &m), SVC_MATCH_DUPLICATE_QUERY);
    assert_string_equal(m.bad_query, "a b");
    /* different names, and a name repeated only as a value, are fine */
    assert_int_equal(match("GET", "/healthz?limit=1&after=limit&Limit=3", &m), SVC_MATCH_OK);
    assert_string_equal(svc_match_query(&m, "limit"), "1");
    svc_match_free(&m);
}

static void test_more_literal_wins(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/topics/t/keys/latest", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 5);
    assert_string_equal(svc_match_param(&m, "topic"), "t");
    assert_null(svc_match_param(&m, "key"));
    svc_match_free(&m);

    assert_int_equal(svc_router_match(literal_first, 2, "GET", "/topics/t/keys/latest", &m),
                     SVC_MATCH_OK);
    assert_int_equal(m.route, 0);
    svc_match_free(&m);
    assert_int_equal(svc_router_match(literal_first, 2, "GET", "/topics/t/keys/other", &m),
                     SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "key"), "other");
    svc_match_free(&m);

    /* An encoded "latest" is not the literal segment; it is a key. */
    assert_int_equal(match("GET", "/topics/t/keys/lat%65st", &m), SVC_MATCH_OK);
    assert_int_equal(m.route, 1);
    assert_string_equal(svc_match_param(&m, "key"), "latest");
    svc_match_free(&m);
}

static void test_match_free_twice(void **state)
{
    struct svc_match m;
    assert_int_equal(match("GET", "/topics/t/keys/k?a=1", &m), SVC_MATCH_OK);
    svc_match_free(&m);
    assert_int_equal(m.nparams, 0);
    assert_int_equal(m.nquery, 0);
    svc_match_free(&m);
}

static void assert_decode(const char *in, int plus, long want_len, const char *want)
{
    char out[64];
    long n = svc_percent_decode(in, strlen(in), out, plus);
    if (n != want_len)
        fail_msg("svc_percent_decode(\"%s\", plus=%d) returned %ld, expected %ld", in, plus, n,
                 want_len);
    if (want != NULL)
        assert_memory_equal(out, want, (size_t)want_len + 1);
}

static void test_percent_decode(void **state)
{
    assert_decode("", 0, 0, "");
    assert_decode("plain", 0, 5, "plain");
    assert_decode("%41%62c", 0, 3, "Abc");
    assert_decode("%4a%4A", 0, 2, "JJ");
    assert_decode("%25", 0, 1, "%");
    assert_decode("%2F", 0, 1, "/");
    assert_decode("a+b", 0, 3, "a+b");
    assert_decode("a+b", 1, 3, "a b");
    assert_decode("%2B", 1, 1, "+");
    assert_decode("%ff", 0, 1, "\xff");
    /* Truncated escapes. */
    assert_decode("%4", 0, -1, NULL);
    assert_decode("%", 0, -1, NULL);
    assert_decode("abc%", 0, -1, NULL);
    assert_decode("abc%4", 1, -1, NULL);
    /* Non-hex digits. */
    assert_decode("%zz", 0, -1, NULL);
    assert_decode("%4z", 0, -1, NULL);
    assert_decode("%z4", 0, -1, NULL);
    assert_decode("%%41", 0, -1, NULL);
    assert_decode("% 41", 0, -1, NULL);
    /* Encoded NUL. */
    assert_decode("%00", 0, -1, NULL);
    assert_decode("a%00", 1, -1, NULL);
}

static void test_percent_decode_respects_len(void **state)
{
    char out[16];
    /* Only the first len bytes count: an escape cut by len is truncated. */
    assert_int_equal(svc_percent_decode("%41", 2, out, 0), -1);
    assert_int_equal(svc_percent_decode("%41xyz", 3, out, 0), 1);
    assert_string_equal(out, "A");
    assert_int_equal(svc_percent_decode("abc", 0, out, 0), 0);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal_route),
        cmocka_unit_test(test_params_extracted),
        cmocka_unit_test(test_params_percent_decoded),
        cmocka_unit_test(test_encoded_slash_stays_in_param),
        cmocka_unit_test(test_query_parsed),
        cmocka_unit_test(test_not_found),
        cmocka_unit_test(test_trailing_slash_and_empty_segment),
        cmocka_unit_test(test_method_not_allowed),
        cmocka_unit_test(test_bad_encoding),
        cmocka_unit_test(test_too_many_query),
        cmocka_unit_test(test_more_literal_wins),
        cmocka_unit_test(test_match_free_twice),
        cmocka_unit_test(test_duplicate_query),
        cmocka_unit_test(test_percent_decode),
        cmocka_unit_test(test_percent_decode_respects_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
