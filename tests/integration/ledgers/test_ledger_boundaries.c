/* Every numeric input of every ledger route, nested ones included, gets the boundary values of
 * th_bounds_check (0, -1, the documented maximum, one more, 2^63, 1e400, 1.5, "1", true, null):
 * each answer is a 2xx or a 4xx problem (a 400 with the route's code), never a 5xx, and the
 * ledger still answers GET afterwards. The maxima are those of the OpenAPI document:
 * 2^53 - 1 for sequences, versions and offsets. Since th_bounds_check takes any 2xx, the values
 * just above each maximum and 2^63 - 1 are then sent again, and must be refused with the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"

#define BIG   9007199254740991LL /* 2^53 - 1 */
#define ALIVE "/ledgers/bnd"
#define TX    "/ledgers/bnd/transactions"
#define CP    "/ledgers/bnd/checkpoints"
#define W(v)  "{\"object_id\":\"w\",\"version\":" v ",\"type\":\"t\",\"data\":1}"
#define D(v)  "{\"object_id\":\"d\",\"version\":" v "}"
#define I(v)  "{\"object_id\":\"i\",\"version\":" v "}"
#define P(v)  "{\"type\":\"p\",\"version\":" v ",\"data\":2}"
/* a checkpoint of sequence s carrying one transaction with member m */
#define CPT(s, d, m) "{\"sequence\":" s ",\"transactions\":[{\"digest\":\"" d "\"," m "}]}"

static int setup(void **state)
{
    if (th_svc_start("ledger_boundaries", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", ALIVE, "{}", 201));
    return 0;
}

static const struct th_bound cases[] = {
    {"PUT", ALIVE, "{\"tombstone_retention_seconds\":@V@}", NULL, 2147483647, "invalid_config",
     ALIVE},
    /* optimistic transactions: the wait (ROWLOCK_MAX_WAIT_S, 30 by default) and versions */
    {"POST", TX, "{\"digest\":\"ws\",\"wait_seconds\":@V@}", NULL, 30, "invalid_transaction",
     ALIVE},
    {"POST", TX, "{\"digest\":\"tw\",\"writes\":[" W("@V@") "]}", NULL, BIG, "invalid_transaction",
     ALIVE},
    {"POST", TX, "{\"digest\":\"td\",\"deletes\":[" D("@V@") "]}", NULL, BIG, "invalid_transaction",
     ALIVE},
    {"POST", TX, "{\"digest\":\"ti\",\"inputs\":[" I("@V@") "]}", NULL, BIG, "invalid_transaction",
     ALIVE},
    {"POST", TX, "{\"digest\":\"tp\",\"displays\":[" P("@V@") "]}", NULL, BIG,
     "invalid_transaction", ALIVE},
    /* checkpoints: the sequence and the versions of the transactions they carry */
    {"POST", CP, "{\"sequence\":@V@,\"transactions\":[]}", NULL, BIG, "invalid_checkpoint", ALIVE},
    {"POST", CP, CPT("11", "cw", "\"writes\":[" W("@V@") "]"), NULL, BIG, "invalid_checkpoint",
     ALIVE},
    {"POST", CP, CPT("12", "cd", "\"deletes\":[" D("@V@") "]"), NULL, BIG, "invalid_checkpoint",
     ALIVE},
    {"POST", CP, CPT("13", "ci", "\"inputs\":[" I("@V@") "]"), NULL, BIG, "invalid_checkpoint",
     ALIVE},
    {"POST", CP, CPT("14", "cp", "\"displays\":[" P("@V@") "]"), NULL, BIG, "invalid_checkpoint",
     ALIVE},
    /* the event log */
    {"GET", "/ledgers/bnd/events?after={V}", NULL, NULL, BIG, "invalid_parameter", ALIVE},
    {"GET", "/ledgers/bnd/events?limit={V}", NULL, NULL, 1000, "invalid_parameter", ALIVE},
};

static void every_ledger_number_is_bounded(void **state)
{
    assert_int_equal(th_bounds_check(th_svc.port, cases, sizeof(cases) / sizeof(cases[0])), 0);
}

/* Replaces the first occurrence of token in tmpl by value, into out. */
static void fill(char *out, size_t size, const char *tmpl, const char *token, const char *value)
{
    const char *at = strstr(tmpl, token);
    assert_non_null(at);
    snprintf(out, size, "%.*s%s%s", (int)(at - tmpl), tmpl, value, at + strlen(token));
}

/* th_bounds_check accepts any 2xx: here the values just above each maximum, and 2^63 - 1 (the
 * checkpoint that broke a ledger for good), must be refused with the input's code. */
static void values_above_the_maxima_are_refused(void **state)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct th_bound *b = &cases[i];
        char over[2][32];
        snprintf(over[0], sizeof(over[0]), "%lld", b->max + 1);
        snprintf(over[1], sizeof(over[1]), "%lld", (long long)INT64_MAX);
        for (int v = 0; v < 2; v++) {
            char path[256], body[512];
            const char *const ct[] = {"Content-Type: application/json", NULL};
            if (b->body != NULL) {
                snprintf(path, sizeof(path), "%s", b->path);
                fill(body, sizeof(body), b->body, "@V@", over[v]);
            } else {
                fill(path, sizeof(path), b->path, "{V}", over[v]);
            }
            struct th_response r;
            assert_int_equal(th_http(th_svc.port, b->method, path, b->body ? ct : NULL,
                                     b->body ? body : NULL, b->body ? strlen(body) : 0, &r),
                             0);
            if (r.status != 400 || strcmp(th_problem_code(&r), b->code) != 0)
                fail_msg("%s %s %s: expected 400 %s, got %ld %s", b->method, path,
                         b->body ? body : "", b->code, r.status, r.body);
            th_response_free(&r);
            json_decref(th_svc_get(b->alive));
        }
    }
}

/* The right effect: the values at the maxima were applied, and the ledger reads them back. */
static void the_maxima_were_applied(void **state)
{
    json_t *l = th_svc_get(ALIVE);
    assert_int_equal(json_integer_value(json_object_get(l, "tombstone_retention_seconds")),
                     2147483647);
    /* checkpoints 0 and -1 refused; BIG recorded, as were 11 to 14 */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(l, "counts"), "checkpoints")), 5);
    json_decref(l);
    json_t *e = th_svc_get("/ledgers/bnd/events?after=9007199254740991&limit=1000");
    assert_int_equal(json_array_size(json_object_get(e, "events")), 0);
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_ledger_number_is_bounded),
        cmocka_unit_test(values_above_the_maxima_are_refused),
        cmocka_unit_test(the_maxima_were_applied),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
