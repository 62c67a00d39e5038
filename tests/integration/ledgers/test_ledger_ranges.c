/* Every integer a ledger accepts has a range that no arithmetic on it can overflow:
 * a checkpoint at sequence 2^63 - 1 used to be recorded (201), after which the
 * ledger's watermark (sequence + 1) failed, GET /ledgers/L answered 500 for good. Now sequences,
 * versions and event offsets stop at 2^53 - 1: above it 400 with the route's code and nothing
 * written; at it the request applies and the ledger still answers, with the value intact. */
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

#define MAX      "9007199254740991" /* 2^53 - 1 */
#define OVER     "9007199254740992"
#define INT64MAX "9223372036854775807"

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

/* Sends body (JSON text, NULL: none) and asserts the status, and with code a problem+json answer
 * with that code. */
static void expect(const char *method, const char *path, const char *body, long status,
                   const char *code)
{
    if (code == NULL) {
        json_decref(th_svc_call(method, path, body, status));
        return;
    }
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, method, path, body ? json_ct : NULL, body,
                             body ? strlen(body) : 0, &r),
                     0);
    th_assert_problem(&r, status, code);
    th_response_free(&r);
}

static int setup(void **state)
{
    return th_svc_start("ledger_ranges", NULL);
}

/* The reproduction: the checkpoint is refused and the ledger keeps answering. */
static void checkpoint_at_int64_max_is_refused_and_the_ledger_answers(void **state)
{
    expect("PUT", "/ledgers/repro", "{}", 201, NULL);
    expect("POST", "/ledgers/repro/checkpoints", "{\"sequence\":" INT64MAX ",\"transactions\":[]}",
           400, "invalid_checkpoint");
    expect("POST", "/ledgers/repro/checkpoints", "{\"sequence\":" OVER ",\"transactions\":[]}", 400,
           "invalid_checkpoint");
    assert_int_equal(th_svc_sql_int("SELECT count(*) FROM rowlock.checkpoints_1"), 0);
    json_t *l = th_svc_get("/ledgers/repro");
    assert_int_equal(json_integer_value(json_object_get(l, "watermark")), 0);
    json_decref(l);
}

/* The largest sequence is recorded, and the watermark arithmetic still works over it. */
static void checkpoint_at_the_maximum_applies(void **state)
{
    expect("PUT", "/ledgers/top", "{}", 201, NULL);
    expect("POST", "/ledgers/top/checkpoints", "{\"sequence\":1,\"transactions\":[]}", 201, NULL);
    expect("POST", "/ledgers/top/checkpoints", "{\"sequence\":" MAX ",\"transactions\":[]}", 201,
           NULL);
    expect("POST", "/ledgers/top/checkpoints", "{\"sequence\":" MAX ",\"transactions\":[]}", 200,
           NULL);
    json_t *l = th_svc_get("/ledgers/top");
    assert_int_equal(json_integer_value(json_object_get(l, "watermark")), 1);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(l, "counts"), "checkpoints")), 2);
    json_decref(l);
    assert_true(th_metric(th_svc.port, "rowlock_ledger_watermark{ledger=\"top\"}") == 1);
}

/* Versions above the maximum are refused wherever they appear; at it they apply. */
static void versions_stop_at_the_maximum(void **state)
{
    expect("PUT", "/ledgers/ver", "{}", 201, NULL);
    static const char *const over[] = {
        "{\"digest\":\"a\",\"writes\":[{\"object_id\":\"x\",\"version\":" OVER ",\"type\":\"c\"}]}",
        "{\"digest\":\"a\",\"deletes\":[{\"object_id\":\"x\",\"version\":" OVER "}]}",
        "{\"digest\":\"a\",\"inputs\":[{\"object_id\":\"x\",\"version\":" OVER "}]}",
        "{\"digest\":\"a\",\"displays\":[{\"type\":\"p\",\"version\":" OVER ",\"data\":1}]}",
        "{\"digest\":\"a\",\"writes\":[{\"object_id\":\"x\",\"version\":" INT64MAX
        ",\"type\":\"c\"}]}",
    };
    for (size_t i = 0; i < sizeof(over) / sizeof(over[0]); i++) {
        expect("POST", "/ledgers/ver/transactions", over[i], 400, "invalid_transaction");
        char cp[512];
        snprintf(cp, sizeof(cp), "{\"sequence\":1,\"transactions\":[%s]}", over[i]);
        expect("POST", "/ledgers/ver/checkpoints", cp, 400, "invalid_checkpoint");
    }
    expect("POST", "/ledgers/ver/transactions",
           "{\"digest\":\"b\",\"writes\":[{\"object_id\":\"x\",\"version\":" MAX
           ",\"type\":\"c\",\"data\":1}],\"displays\":[{\"type\":\"p\",\"version\":" MAX
           ",\"data\":2}]}",
           201, NULL);
    json_t *o = th_svc_get("/ledgers/ver/objects/x");
    assert_int_equal(json_integer_value(json_object_get(o, "version")), INT64_C(9007199254740991));
    json_decref(o);
    o = th_svc_get("/ledgers/ver/displays/p");
    assert_int_equal(json_integer_value(json_object_get(o, "version")), INT64_C(9007199254740991));
    json_decref(o);
    /* an input at the maximum is satisfied; a delete at it leaves the tombstone there */
    expect("POST", "/ledgers/ver/transactions",
           "{\"digest\":\"c\",\"inputs\":[{\"object_id\":\"x\",\"version\":" MAX
           "}],\"deletes\":[{\"object_id\":\"x\",\"version\":" MAX "}]}",
           201, NULL);
    expect("GET", "/ledgers/ver", NULL, 200, NULL);
}

static void event_offsets_stop_at_the_maximum(void **state)
{
    expect("PUT", "/ledgers/ev", "{}", 201, NULL);
    expect("GET", "/ledgers/ev/events?after=" MAX, NULL, 200, NULL);
    expect("GET", "/ledgers/ev/events?after=" OVER, NULL, 400, "invalid_parameter");
    expect("GET", "/ledgers/ev/events?after=" INT64MAX, NULL, 400, "invalid_parameter");
    expect("PUT", "/ledgers/ev", "{\"tombstone_retention_seconds\":2147483648}", 400,
           "invalid_config");
    expect("PUT", "/ledgers/ev", "{\"tombstone_retention_seconds\":2147483647}", 200, NULL);
    expect("GET", "/ledgers/ev", NULL, 200, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(checkpoint_at_int64_max_is_refused_and_the_ledger_answers),
        cmocka_unit_test(checkpoint_at_the_maximum_applies),
        cmocka_unit_test(versions_stop_at_the_maximum),
        cmocka_unit_test(event_offsets_stop_at_the_maximum),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
