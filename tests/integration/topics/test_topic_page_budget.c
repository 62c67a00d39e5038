/* Topic reads stop at the response budget (ROWLOCK_RESPONSE_BUDGET, 2048 bytes here): a page of
 * GET /topics/{t}/messages or GET /topics/{t}/keys carries values of at most 2048 bytes in all
 * (as JSON text), unless it is one value larger than that, served alone; a page is never cut
 * before the budget is reached (the next value would not have fitted) and never empty while
 * values remain; paging with `next` sees every message and every key exactly once, in order, with
 * its value intact, whatever the limit asked for. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define BUDGET 2048
#define N      48

/* Bytes of message i's value as JSON text: a string of i's length, quotes included. */
static size_t value_len(int i)
{
    static const size_t sizes[] = {10, 300, 900, 1500, 2500, 50, 700, 2046, 2049, 2, 1000, 5000};
    return sizes[i % (int)(sizeof(sizes) / sizeof(sizes[0]))];
}

static json_t *value_of(int i)
{
    size_t n = value_len(i) - 2;
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, 'a' + i % 26, n);
    s[n] = '\0';
    json_t *v = json_string(s);
    free(s);
    return v;
}

static void produce_all(void)
{
    json_t *msgs = json_array();
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%02d", i);
        json_array_append_new(msgs, json_pack("{s:s, s:o}", "key", key, "value", value_of(i)));
    }
    json_t *body = json_pack("{s:o}", "messages", msgs);
    struct th_response r;
    assert_int_equal(th_http_json(th_svc.port, "POST", "/topics/t/messages", body, &r), 0);
    json_decref(body);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
}

/* Checks a page of items (each with "value"), given the index of its first item: the values are
 * the ones produced, within the budget or alone, and the page stopped only where the next value
 * would not fit (or at the end). Returns the number of items. */
static int check_page(json_t *items, int first, int limit)
{
    size_t n = json_array_size(items), bytes = 0;
    assert_true(n > 0);
    for (size_t j = 0; j < n; j++) {
        json_t *want = value_of(first + (int)j);
        assert_true(json_equal(json_object_get(json_array_get(items, j), "value"), want));
        json_decref(want);
        bytes += value_len(first + (int)j);
    }
    if (n > 1)
        assert_true(bytes <= BUDGET);
    int last = first + (int)n;
    if (last < N && (int)n < limit) /* cut by the budget: the next one did not fit */
        assert_true(bytes + value_len(last) > BUDGET);
    return (int)n;
}

static void read_log(int limit)
{
    int64_t after = 0;
    int seen = 0, pages = 0;
    while (seen < N) {
        char path[128];
        snprintf(path, sizeof(path), "/topics/t/messages?after=%" PRId64 "&limit=%d", after, limit);
        json_t *page = th_svc_get(path);
        json_t *msgs = json_object_get(page, "messages");
        for (size_t j = 0; j < json_array_size(msgs); j++) {
            json_t *m = json_array_get(msgs, j);
            char key[16];
            snprintf(key, sizeof(key), "k%02d", seen + (int)j);
            assert_string_equal(json_string_value(json_object_get(m, "key")), key);
            assert_int_equal(json_integer_value(json_object_get(m, "offset")), seen + (int)j + 1);
            if (value_len(seen + (int)j) > BUDGET)
                assert_int_equal(json_array_size(msgs), 1); /* served alone */
        }
        seen += check_page(msgs, seen, limit);
        after = json_integer_value(json_object_get(page, "next"));
        assert_int_equal(after, seen);
        json_decref(page);
        pages++;
    }
    assert_int_equal(seen, N);
    assert_true(pages > 1);
    json_t *page = th_svc_get("/topics/t/messages?after=48");
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 0);
    json_decref(page);
}

static void the_log_is_paged_by_the_budget(void **state)
{
    (void)state;
    read_log(1000);
    read_log(3);
}

static void read_keys(int limit)
{
    char after[32] = "";
    int seen = 0;
    for (;;) {
        char path[128];
        snprintf(path, sizeof(path), "/topics/t/keys?limit=%d%s%s", limit,
                 after[0] ? "&after=" : "", after);
        json_t *page = th_svc_get(path);
        json_t *keys = json_object_get(page, "keys");
        for (size_t j = 0; j < json_array_size(keys); j++) {
            char key[16];
            snprintf(key, sizeof(key), "k%02d", seen + (int)j);
            assert_string_equal(json_string_value(json_object_get(json_array_get(keys, j), "key")),
                                key);
        }
        seen += check_page(keys, seen, limit);
        json_t *next = json_object_get(page, "next");
        if (seen == N && json_is_null(next)) {
            json_decref(page);
            break;
        }
        if (json_is_null(next)) /* a cut page must say where to go on */
            fail_msg("keys: next is null after %d of %d keys", seen, N);
        snprintf(after, sizeof(after), "%s", json_string_value(next));
        json_decref(page);
    }
    assert_int_equal(seen, N);
}

static void the_keys_are_paged_by_the_budget(void **state)
{
    (void)state;
    read_keys(1000);
    read_keys(5);
}

static int setup(void **state)
{
    (void)state;
    char budget[64];
    snprintf(budget, sizeof(budget), "ROWLOCK_RESPONSE_BUDGET=%d", BUDGET);
    const char *env[] = {budget, NULL};
    if (th_svc_start("topic_page_budget", env) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/topics/t", "{}", 201));
    produce_all();
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_log_is_paged_by_the_budget),
        cmocka_unit_test(the_keys_are_paged_by_the_budget),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
