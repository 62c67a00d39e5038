/* GET /ledgers: every ledger in name order, a page at a time (limit, after, next), each as GET
 * /ledgers/{ledger} shows it; and counts.pending_transactions, the transactions executed by the
 * optimistic path that no checkpoint has carried yet (the dashboard's "pending transactions"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    return th_svc_start("ledger_list", NULL);
}

static long long pending(const char *ledger)
{
    char path[128];
    snprintf(path, sizeof(path), "/ledgers/%s", ledger);
    json_t *l = th_svc_get(path);
    json_t *n = json_object_get(json_object_get(l, "counts"), "pending_transactions");
    assert_true(json_is_integer(n));
    long long v = json_integer_value(n);
    json_decref(l);
    return v;
}

/* Five ledgers listed two at a time: names in order, next the last name, then null; each entry
 * equal to GET /ledgers/{ledger}. */
static void ledgers_page_in_name_order(void **state)
{
    const char *names[] = {"l-a", "l-b", "l-c", "l-d", "l-e"};
    for (int i = 4; i >= 0; i--) {
        char path[64];
        snprintf(path, sizeof(path), "/ledgers/%s", names[i]);
        json_decref(th_svc_call("PUT", path, "{}", 201));
    }
    json_decref(
        th_svc_call("POST", "/ledgers/l-c/transactions",
                    "{\"digest\":\"t1\",\"writes\":[{\"object_id\":\"o1\",\"version\":1,"
                    "\"type\":\"T\",\"data\":{}}],\"events\":[{\"type\":\"E\",\"data\":{}}]}",
                    201));
    char path[128] = "/ledgers?limit=2";
    int seen = 0;
    for (int page = 0; page < 4; page++) {
        json_t *r = th_svc_get(path);
        json_t *list = json_object_get(r, "ledgers"), *next = json_object_get(r, "next");
        size_t i;
        json_t *l;
        json_array_foreach(list, i, l)
        {
            const char *name = json_string_value(json_object_get(l, "name"));
            assert_string_equal(name, names[seen]);
            char one[64];
            snprintf(one, sizeof(one), "/ledgers/%s", name);
            json_t *alone = th_svc_get(one);
            assert_true(json_equal(l, alone));
            json_decref(alone);
            seen++;
        }
        if (json_is_null(next)) {
            json_decref(r);
            break;
        }
        assert_int_equal(json_array_size(list), 2);
        assert_string_equal(json_string_value(next), names[seen - 1]);
        snprintf(path, sizeof(path), "/ledgers?limit=2&after=%s", json_string_value(next));
        json_decref(r);
    }
    assert_int_equal(seen, 5);
    json_t *all = th_svc_get("/ledgers");
    assert_int_equal(json_array_size(json_object_get(all, "ledgers")), 5);
    assert_true(json_is_null(json_object_get(all, "next")));
    json_t *c = json_object_get(json_array_get(json_object_get(all, "ledgers"), 2), "counts");
    assert_int_equal(json_integer_value(json_object_get(c, "transactions")), 1);
    assert_int_equal(json_integer_value(json_object_get(c, "events")), 1);
    json_decref(all);
    json_t *after = th_svc_get("/ledgers?after=l-e");
    assert_int_equal(json_array_size(json_object_get(after, "ledgers")), 0);
    json_decref(after);
}

static void bad_paging_is_refused(void **state)
{
    th_svc_get_problem("/ledgers?limit=0", 400, "invalid_parameter");
    th_svc_get_problem("/ledgers?limit=1001", 400, "invalid_parameter");
    th_svc_get_problem("/ledgers?limit=x", 400, "invalid_parameter");
}

/* Two optimistic transactions are pending until a checkpoint carries them; a transaction that
 * came only through a checkpoint never is. */
static void pending_transactions_until_a_checkpoint_carries_them(void **state)
{
    json_decref(th_svc_call("PUT", "/ledgers/pend", "{}", 201));
    assert_int_equal(pending("pend"), 0);
    json_decref(th_svc_call("POST", "/ledgers/pend/transactions",
                            "{\"digest\":\"p1\",\"events\":[{\"type\":\"E\",\"data\":{}}]}", 201));
    json_decref(th_svc_call("POST", "/ledgers/pend/transactions",
                            "{\"digest\":\"p2\",\"events\":[{\"type\":\"E\",\"data\":{}}]}", 201));
    assert_int_equal(pending("pend"), 2);
    json_decref(th_svc_call(
        "POST", "/ledgers/pend/checkpoints",
        "{\"sequence\":1,\"transactions\":[{\"digest\":\"p1\"},{\"digest\":\"c1\"}]}", 201));
    assert_int_equal(pending("pend"), 1);
    json_t *list = th_svc_get("/ledgers?after=pemd&limit=1");
    json_t *c = json_object_get(json_array_get(json_object_get(list, "ledgers"), 0), "counts");
    assert_int_equal(json_integer_value(json_object_get(c, "pending_transactions")), 1);
    assert_int_equal(json_integer_value(json_object_get(c, "transactions")), 3);
    json_decref(list);
    json_decref(th_svc_call("POST", "/ledgers/pend/checkpoints",
                            "{\"sequence\":2,\"transactions\":[{\"digest\":\"p2\"}]}", 201));
    assert_int_equal(pending("pend"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ledgers_page_in_name_order),
        cmocka_unit_test(bad_paging_is_refused),
        cmocka_unit_test(pending_transactions_until_a_checkpoint_carries_them),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
