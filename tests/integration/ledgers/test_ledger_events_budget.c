/* A page of a ledger's event log stops at the response budget: with
 * ROWLOCK_RESPONSE_BUDGET=2048 and events of 50 to 900 bytes of data (one of 5000), paging
 * through GET /ledgers/L/events serves every event exactly once and in order, every page of
 * more than one event carries at most 2048 bytes of data and could not have taken the next one,
 * the oversized event comes alone, and no page is empty while events remain. The bound holds in
 * PostgreSQL too: db_ledgers_events, asked to take every row it is given, is given no more than
 * the budget (or one event alone). */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/ledgers.h"
#include "harness.h"
#include "harness_db.h"
#include "harness_svc.h"

#define BUDGET 2048
#define NTX    40
#define HUGE   5000

static struct db_pool *pool;
static PGconn *pg;

struct expected {
    char digest[16];
    int index;
    size_t size; /* bytes of the data's JSON text */
};
static struct expected want[NTX * 3 + 1];
static size_t nwant;

/* Sizes of the data strings: deterministic, 50 to 900 bytes. */
static size_t size_of(int i, int k)
{
    return 50 + (size_t)((i * 37 + k * 101) % 851);
}

static void post_transaction(int i)
{
    json_t *events = json_array();
    int n = i == NTX / 2 ? 1 : 1 + i % 3;
    for (int k = 0; k < n; k++) {
        size_t len = i == NTX / 2 ? HUGE : size_of(i, k);
        char *text = malloc(len + 1);
        memset(text, 'a' + (i + k) % 26, len);
        text[len] = '\0';
        json_array_append_new(events, json_pack("{s:s, s:s}", "type", "e", "data", text));
        free(text);
        struct expected *w = &want[nwant++];
        snprintf(w->digest, sizeof(w->digest), "tx-%d", i);
        w->index = k;
        w->size = len + 2; /* the quotes */
    }
    json_t *tx = json_pack("{s:s%, s:o}", "digest", want[nwant - 1].digest,
                           strlen(want[nwant - 1].digest), "events", events);
    struct th_response r;
    assert_int_equal(th_http_json(th_svc.port, "POST", "/ledgers/b/transactions", tx, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    json_decref(tx);
}

static int setup(void **state)
{
    static const char *const env[] = {"ROWLOCK_RESPONSE_BUDGET=2048", NULL};
    if (th_db_open("ledger_events_budget", 2, &pool, &pg) != 0 || th_svc_run(env) != 0)
        return -1;
    json_decref(th_call(th_svc.port, "PUT", "/ledgers/b", "{}", 201));
    for (int i = 0; i < NTX; i++)
        post_transaction(i);
    return 0;
}

static int teardown(void **state)
{
    int rc = th_svc_teardown(state);
    th_db_close(pool, pg);
    return rc;
}

static size_t data_size(json_t *data)
{
    char *text = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t n = strlen(text);
    free(text);
    return n;
}

/* Pages through the log with limit; checks each page against the budget and the events
 * against want. Returns the number of pages. */
static int walk(int limit)
{
    size_t seen = 0, prev_sum = 0;
    int64_t after = 0, prev_offset = 0;
    int pages = 0;
    for (;;) {
        char path[96];
        snprintf(path, sizeof(path), "/ledgers/b/events?after=%" PRId64 "&limit=%d", after, limit);
        json_t *page = th_get_json(th_svc.port, path);
        json_t *events = json_object_get(page, "events");
        size_t n = json_array_size(events), sum = 0;
        int64_t next = json_integer_value(json_object_get(page, "next"));
        if (n == 0) {
            assert_int_equal(seen, nwant); /* empty only at the end */
            assert_int_equal(next, after);
            json_decref(page);
            return pages;
        }
        /* the previous page stopped because this page's first event did not fit */
        if (pages > 0 && limit >= 1000) {
            size_t first = data_size(json_object_get(json_array_get(events, 0), "data"));
            if (prev_sum + first <= BUDGET)
                fail_msg("page %d stopped at %zu bytes though the next event (%zu) fit", pages,
                         prev_sum, first);
        }
        for (size_t i = 0; i < n; i++) {
            json_t *e = json_array_get(events, i);
            int64_t offset = json_integer_value(json_object_get(e, "offset"));
            size_t size = data_size(json_object_get(e, "data"));
            assert_true(offset > prev_offset);
            assert_true(seen < nwant);
            assert_string_equal(json_string_value(json_object_get(e, "digest")), want[seen].digest);
            assert_int_equal(json_integer_value(json_object_get(e, "index")), want[seen].index);
            assert_int_equal(size, want[seen].size);
            if (size > BUDGET)
                assert_int_equal(n, 1); /* an oversized event comes alone */
            prev_offset = offset;
            sum += size;
            seen++;
        }
        if (n > 1 && sum > BUDGET)
            fail_msg("a page of %zu events carries %zu bytes of data", n, sum);
        assert_true((int)n <= limit);
        assert_int_equal(next, prev_offset);
        after = next;
        prev_sum = sum;
        pages++;
        json_decref(page);
    }
}

static void pages_stop_at_the_budget_and_serve_every_event_once(void **state)
{
    int pages = walk(1000);
    /* about 40 KB of data in 2 KB pages */
    assert_true(pages >= 15);
    /* the count still bounds a page below the budget */
    assert_true(walk(2) >= (int)(nwant + 1) / 2);
}

struct taken {
    size_t rows, bytes;
};

static int take_all(const struct db_ledger_event_row *e, size_t data_len, void *ctx)
{
    struct taken *t = ctx;
    t->rows++;
    t->bytes += data_len;
    return 0;
}

/* What PostgreSQL sends for one page is bounded by the budget too, not only what is served. */
static void postgresql_sends_no_more_than_the_budget_and_one_event(void **state)
{
    int64_t after = 0;
    size_t total = 0;
    while (total < nwant) {
        struct taken t = {0, 0};
        int64_t next = 0;
        enum db_ledger_verdict v;
        struct db_error err;
        assert_int_equal(
            db_ledgers_events(pool, "b", after, 1000, BUDGET, take_all, &t, &next, &v, &err),
            DB_OK);
        assert_int_equal(v, DB_L_OK);
        assert_true(t.rows >= 1);
        if (t.rows > 1 && t.bytes > BUDGET)
            fail_msg("PostgreSQL sent %zu rows with %zu bytes of data", t.rows, t.bytes);
        total += t.rows;
        after = next;
    }
    assert_int_equal(total, nwant);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pages_stop_at_the_budget_and_serve_every_event_once),
        cmocka_unit_test(postgresql_sends_no_more_than_the_budget_and_one_event),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
