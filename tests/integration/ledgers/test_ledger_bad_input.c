/* Malformed ledger requests are refused with their problem code and write nothing: every case is
 * sent to a ledger that already holds objects, a checkpoint and events, and the ledger's rows
 * (counted in SQL, every generated table, executed or not) and the list of ledgers are compared
 * before and after. Covers malformed transactions and checkpoints (duplicate digests, negative
 * versions, a write and a delete of one object at one version, missing digest, unknown members,
 * non-array lists, 1001 transactions, sequence 0), bad and unknown ledger names, the media type,
 * malformed JSON, reads of what does not exist, and the horizon: a checkpoint at or below it
 * (set in SQL, since a test cannot wait out a retention) is 409 below_horizon and writes nothing,
 * the next one above it applies. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_bad.h"

#define TX_PATH "/ledgers/bad/transactions"
#define CP_PATH "/ledgers/bad/checkpoints"
/* a well-formed transaction, for cases where something else is wrong */
#define GOOD_TX                                                                                    \
    "{\"digest\":\"fine\",\"writes\":[{\"object_id\":\"q\",\"version\":9,\"type\":\"c\"}]}"
#define W(id, v) "{\"object_id\":\"" id "\",\"version\":" #v ",\"type\":\"coin\",\"data\":{}}"

#define JSON "application/json"
#define N(a) (sizeof(a) / sizeof((a)[0]))

static long post(const char *path, const char *body, struct th_response *r)
{
    assert_int_equal(th_bad_send("POST", path, JSON, body, r), 0);
    return r->status;
}

/* ---- what "writes nothing" means ---- */

/* The reads of one ledger's snapshot: the list of ledgers, its horizon and every row of its
 * tables (executed or not), summed up. Its tables are named by its id, so the SQL is written
 * once the ledger exists. */
#define LEDGER_READS 7
struct ledger_state {
    char sql[LEDGER_READS][256];
    struct th_read reads[LEDGER_READS];
    struct th_state state;
};
static struct ledger_state bad_ledger, horizon_ledger;

static void ledger_state_init(struct ledger_state *ls, const char *l)
{
    static const char *const tables[][2] = {
        {"ledgers", "count(*)"},
        {"horizon", "horizon"},
        {"objects", "count(*) * 1000000 + coalesce(sum(version), 0) * 10 + count(*) FILTER (WHERE "
                    "deleted)"},
        {"displays", "count(*) * 1000000 + coalesce(sum(version), 0)"},
        {"transactions", "count(*) * 1000 + count(*) FILTER (WHERE executed)"},
        {"events", "count(*)"},
        {"checkpoints", "count(*)"},
    };
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.ledgers WHERE name = '%s'", l);
    int64_t id = th_svc_sql_int(sql);
    snprintf(ls->sql[0], sizeof(ls->sql[0]), "SELECT count(*) FROM rowlock.ledgers");
    snprintf(ls->sql[1], sizeof(ls->sql[1]),
             "SELECT horizon FROM rowlock.ledgers WHERE id = %" PRId64, id);
    for (size_t i = 2; i < LEDGER_READS; i++)
        snprintf(ls->sql[i], sizeof(ls->sql[i]), "SELECT %s FROM rowlock.%s_%" PRId64, tables[i][1],
                 tables[i][0], id);
    for (size_t i = 0; i < LEDGER_READS; i++)
        ls->reads[i] = (struct th_read){tables[i][0], NULL, ls->sql[i], NULL};
    ls->state = (struct th_state){ls->reads, LEDGER_READS, NULL};
}

static int setup(void **state)
{
    if (th_svc_start("ledger_bad_input", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/ledgers/bad", "{}", 201));
    json_decref(th_svc_call("PUT", "/ledgers/horizon", "{}", 201));
    /* something to leave untouched: a checkpoint, an optimistic transaction, a display, events */
    json_decref(
        th_svc_call("POST", CP_PATH,
                    "{\"sequence\":1,\"transactions\":[{\"digest\":\"b1\",\"writes\":[" W(
                        "x", 1) "],\"displays\":[{\"type\":\"p\",\"version\":1,\"data\":1}],"
                                "\"events\":[{\"type\":\"e\"}]}]}",
                    201));
    json_decref(th_svc_call(
        "POST", TX_PATH,
        "{\"digest\":\"b2\",\"inputs\":[{\"object_id\":\"x\",\"version\":1}],"
        "\"writes\":[" W("y", 2) "],\"deletes\":[{\"object_id\":\"x\",\"version\":2}],"
                                 "\"events\":[{\"type\":\"e\"},{\"type\":\"f\",\"data\":[1]}]}",
        201));
    ledger_state_init(&bad_ledger, "bad");
    ledger_state_init(&horizon_ledger, "horizon");
    return 0;
}

/* Sends the cases and asserts their problems, and that ledger "bad" (and the list of ledgers)
 * did not change. */
static void refused(const struct th_bad *cases, size_t n)
{
    th_bad_expect(&bad_ledger.state, cases, n);
}

/* The same for requests that all answer status and code. */
static void refused_all(const struct th_req *reqs, size_t n, long status, const char *code)
{
    th_bad_expect_all(&bad_ledger.state, reqs, n, status, code);
}

/* The same for JSON bodies POSTed to path. */
static void refused_bodies(const char *path, const char *const *bodies, size_t n, long status,
                           const char *code)
{
    th_bad_expect_bodies(&bad_ledger.state, "POST", path, JSON, bodies, n, status, code);
}

/* ---- transactions ---- */

static void malformed_transaction_is_400_and_writes_nothing(void **state)
{
    static const char *const bodies[] = {
        /* digest missing, empty, not a string */
        "{\"writes\":[" W("x", 5) "]}",
        "{\"digest\":\"\",\"writes\":[" W("x", 5) "]}",
        "{\"digest\":5}",
        /* unknown members */
        "{\"digest\":\"t\",\"write\":[" W("x", 5) "]}",
        "{\"digest\":\"t\",\"sequence\":3}",
        /* lists that are not arrays */
        "{\"digest\":\"t\",\"writes\":" W("x", 5) "}",
        "{\"digest\":\"t\",\"writes\":\"x\"}",
        "{\"digest\":\"t\",\"deletes\":{}}",
        "{\"digest\":\"t\",\"inputs\":{\"object_id\":\"x\",\"version\":1}}",
        "{\"digest\":\"t\",\"displays\":1}",
        "{\"digest\":\"t\",\"events\":null}",
        /* negative or non-integer versions, anywhere */
        "{\"digest\":\"t\",\"writes\":[" W("x", -1) "]}",
        "{\"digest\":\"t\",\"deletes\":[{\"object_id\":\"x\",\"version\":-3}]}",
        "{\"digest\":\"t\",\"inputs\":[{\"object_id\":\"x\",\"version\":-1}],\"writes\":[" W(
            "x", 5) "]}",
        "{\"digest\":\"t\",\"displays\":[{\"type\":\"p\",\"version\":-2,\"data\":1}]}",
        "{\"digest\":\"t\",\"writes\":[" W("x", 1.5) "]}",
        "{\"digest\":\"t\",\"writes\":[{\"object_id\":\"x\",\"version\":\"5\",\"type\":\"c\"}]}",
        "{\"digest\":\"t\",\"deletes\":[{\"object_id\":\"x\"}]}",
        /* one object written and deleted, or written twice, at one version */
        "{\"digest\":\"t\",\"writes\":[" W("x", 4) "],\"deletes\":[{\"object_id\":\"x\","
                                                   "\"version\":4}]}",
        "{\"digest\":\"t\",\"writes\":[" W("x", 4) "," W("x", 4) "]}",
        /* entries that are not objects or lack a member */
        "{\"digest\":\"t\",\"writes\":[5]}",
        "{\"digest\":\"t\",\"writes\":[{\"object_id\":\"x\",\"version\":1}]}",
        "{\"digest\":\"t\",\"writes\":[{\"object_id\":\"\",\"version\":1,\"type\":\"c\"}]}",
        "{\"digest\":\"t\",\"events\":[{\"data\":1}]}",
        "{\"digest\":\"t\",\"displays\":[{\"version\":1,\"data\":1}]}",
        /* wait_seconds out of range or not an integer */
        "{\"digest\":\"t\",\"wait_seconds\":-1}",
        "{\"digest\":\"t\",\"wait_seconds\":\"5\"}",
        "{\"digest\":\"t\",\"wait_seconds\":100000}",
        /* not an object */
        "[]",
        "\"t\"",
    };
    refused_bodies(TX_PATH, bodies, N(bodies), 400, "invalid_transaction");
}

/* A list of 1001 entries: over the per-transaction limit. */
static void oversized_lists_are_400(void **state)
{
    size_t cap = 1001 * 80 + 256, n = 0;
    char *tx = malloc(cap), *cp = malloc(cap + 64);
    n += (size_t)snprintf(tx + n, cap - n, "{\"digest\":\"many\",\"writes\":[");
    for (int i = 0; i < 1001; i++)
        n += (size_t)snprintf(tx + n, cap - n,
                              "%s{\"object_id\":\"o%d\",\"version\":1,\"type\":\"c\"}",
                              i ? "," : "", i);
    snprintf(tx + n, cap - n, "]}");
    snprintf(cp, cap + 64, "{\"sequence\":2,\"transactions\":[%s]}", tx);
    const struct th_bad bad[] = {
        {"POST", TX_PATH, JSON, tx, 400, "invalid_transaction"},
        {"POST", CP_PATH, JSON, cp, 400, "invalid_checkpoint"},
    };
    refused(bad, N(bad));
    free(tx);
    free(cp);
}

/* ---- checkpoints ---- */

static void malformed_checkpoint_is_400_and_writes_nothing(void **state)
{
    static const char *const bodies[] = {
        /* one digest twice */
        "{\"sequence\":2,\"transactions\":[{\"digest\":\"d\"}," GOOD_TX ",{\"digest\":\"d\"}]}",
        "{\"sequence\":2,\"transactions\":[{\"digest\":\"b1\"},{\"digest\":\"b1\"}]}",
        /* a malformed transaction after good ones: nothing of the good ones is written */
        "{\"sequence\":2,\"transactions\":[" GOOD_TX
        ",{\"digest\":\"t\",\"writes\":[" W("x", -1) "]}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX
        ",{\"digest\":\"t\",\"deletes\":[{\"object_id\":\"x\",\"version\":-1}]}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",{\"digest\":\"t\",\"writes\":[" W(
            "x", 7) "],\"deletes\":[{\"object_id\":\"x\",\"version\":7}]}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",{\"writes\":[" W("x", 7) "]}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",{\"digest\":\"t\",\"writes\":{}}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",{\"digest\":\"t\",\"colour\":1}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",{\"digest\":\"t\",\"wait_seconds\":1}]}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX ",7]}",
        /* the checkpoint itself */
        "{\"sequence\":0,\"transactions\":[" GOOD_TX "]}",
        "{\"sequence\":-4,\"transactions\":[" GOOD_TX "]}",
        "{\"sequence\":\"2\",\"transactions\":[" GOOD_TX "]}",
        "{\"sequence\":2.5,\"transactions\":[" GOOD_TX "]}",
        "{\"transactions\":[" GOOD_TX "]}",
        "{\"sequence\":2}",
        "{\"sequence\":2,\"transactions\":" GOOD_TX "}",
        "{\"sequence\":2,\"transactions\":[" GOOD_TX "],\"extra\":true}",
        "[]",
    };
    refused_bodies(CP_PATH, bodies, N(bodies), 400, "invalid_checkpoint");
    /* the same digest in two checkpoints is not malformed: the second one skips it */
}

static void checkpoint_of_1001_transactions_is_batch_too_large(void **state)
{
    size_t cap = 1001 * 32 + 64, n = 0;
    char *cp = malloc(cap);
    n += (size_t)snprintf(cp + n, cap - n, "{\"sequence\":2,\"transactions\":[");
    for (int i = 0; i < 1001; i++)
        n += (size_t)snprintf(cp + n, cap - n, "%s{\"digest\":\"big-%d\"}", i ? "," : "", i);
    snprintf(cp + n, cap - n, "]}");
    refused_bodies(CP_PATH, (const char *[]){cp}, 1, 400, "batch_too_large");
    /* 1000 is the limit, not above it: the same in another ledger applies */
    struct th_response r;
    json_decref(th_svc_call("PUT", "/ledgers/big", "{}", 201));
    char *last = strstr(cp, ",{\"digest\":\"big-1000\"}");
    assert_non_null(last);
    strcpy(last, "]}");
    assert_int_equal(post("/ledgers/big/checkpoints", cp, &r), 201);
    assert_int_equal(json_integer_value(json_object_get(r.json, "applied")), 1000);
    th_response_free(&r);
    free(cp);
}

/* ---- names, media type, JSON ---- */

static void bad_and_unknown_ledger_names(void **state)
{
    char long_name[160], paths[7][3][256];
    memset(long_name, 'a', 129);
    long_name[129] = '\0';
    const char *names[] = {"-x", "_x", ".x", "a$b", "a%20b", "a%2Fb", long_name};
    const char *cp = "{\"sequence\":1,\"transactions\":[" GOOD_TX "]}";
    struct th_req bad[4 * N(names)];
    size_t n = 0;
    for (size_t i = 0; i < N(names); i++) {
        snprintf(paths[i][0], sizeof(paths[i][0]), "/ledgers/%s/transactions", names[i]);
        snprintf(paths[i][1], sizeof(paths[i][1]), "/ledgers/%s/checkpoints", names[i]);
        snprintf(paths[i][2], sizeof(paths[i][2]), "/ledgers/%s", names[i]);
        bad[n++] = (struct th_req){"POST", paths[i][0], JSON, GOOD_TX};
        bad[n++] = (struct th_req){"POST", paths[i][1], JSON, cp};
        bad[n++] = (struct th_req){"PUT", paths[i][2], JSON, "{}"};
        bad[n++] = (struct th_req){"GET", paths[i][2], NULL, NULL};
    }
    refused_all(bad, n, 400, "invalid_name");
    /* 128 characters is a name */
    char path[256];
    long_name[128] = '\0';
    snprintf(path, sizeof(path), "/ledgers/%s/objects/x", long_name);
    const struct th_req unknown[] = {
        {"GET", path, NULL, NULL},
        {"POST", "/ledgers/nope/transactions", JSON, GOOD_TX},
        {"POST", "/ledgers/nope/checkpoints", JSON, cp},
    };
    refused_all(unknown, N(unknown), 404, "ledger_not_found");
    const char *reads[] = {"", "/objects/x", "/displays/p", "/transactions/b1", "/events"};
    th_bad_expect_gets(&bad_ledger.state, "/ledgers/nope", reads, N(reads), 404,
                       "ledger_not_found");
}

static void bad_ledger_config_creates_nothing(void **state)
{
    const char *bodies[] = {"{\"tombstone_retention_seconds\":0}",
                            "{\"tombstone_retention_seconds\":\"60\"}", "{\"retention\":60}", "[]"};
    th_bad_expect_bodies(&bad_ledger.state, "PUT", "/ledgers/newone", JSON, bodies, N(bodies), 400,
                         "invalid_config");
    const struct th_req get = {"GET", "/ledgers/newone", NULL, NULL};
    refused_all(&get, 1, 404, "ledger_not_found");
}

static void wrong_media_type_is_415(void **state)
{
    const char *cts[] = {"text/plain", "application/x-www-form-urlencoded", NULL};
    const char *cp = "{\"sequence\":2,\"transactions\":[" GOOD_TX "]}";
    struct th_req bad[2 * N(cts)];
    size_t n = 0;
    for (size_t i = 0; i < N(cts); i++) {
        bad[n++] = (struct th_req){"POST", TX_PATH, cts[i], GOOD_TX};
        bad[n++] = (struct th_req){"POST", CP_PATH, cts[i], cp};
    }
    refused_all(bad, n, 415, "unsupported_media_type");
}

static void malformed_json_is_400(void **state)
{
    const char *bodies[] = {"{\"digest\":", "{digest:\"t\"}", "{\"digest\":\"t\"} x", "", "nul"};
    refused_bodies(TX_PATH, bodies, N(bodies), 400, "invalid_json");
    refused_bodies(CP_PATH, bodies, N(bodies), 400, "invalid_json");
}

/* ---- reads of what is not there ---- */

static void reads_of_what_does_not_exist(void **state)
{
    const struct th_bad bad[] = {
        {"GET", "/ledgers/bad/objects/never", NULL, NULL, 404, "object_not_found"},
        {"GET", "/ledgers/bad/displays/never", NULL, NULL, 404, "display_not_found"},
        {"GET", "/ledgers/bad/transactions/never", NULL, NULL, 404, "transaction_not_found"},
        /* refused submissions did not execute: still not found */
        {"POST", TX_PATH, JSON,
         "{\"digest\":\"waits\",\"inputs\":[{\"object_id\":\"nothing\",\"version\":3}],"
         "\"writes\":[" W("nothing", 4) "]}",
         409, "dependencies_pending"},
        {"GET", "/ledgers/bad/transactions/waits", NULL, NULL, 404, "transaction_not_found"},
        {"POST", TX_PATH, JSON,
         "{\"digest\":\"late\",\"inputs\":[{\"object_id\":\"y\",\"version\":1}],"
         "\"writes\":[" W("y", 3) "]}",
         409, "superseded"},
        {"GET", "/ledgers/bad/transactions/late", NULL, NULL, 404, "transaction_not_found"},
    };
    refused(bad, N(bad));
    /* x was deleted at 2 by b2 */
    struct th_response r;
    assert_int_equal(th_bad_send("GET", "/ledgers/bad/objects/x", NULL, NULL, &r), 0);
    th_assert_problem(&r, 404, "object_deleted");
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 2);
    th_response_free(&r);
    const char *params[] = {"after=-1", "after=abc", "after=", "limit=0", "limit=1001", "limit=x"};
    th_bad_expect_gets(&bad_ledger.state, "/ledgers/bad/events?", params, N(params), 400,
                       "invalid_parameter");
}

/* ---- the horizon ---- */

static void checkpoint_at_or_below_horizon_is_409_and_writes_nothing(void **state)
{
    struct th_response r;
    const char *c1 = "{\"sequence\":1,\"transactions\":[{\"digest\":\"h1\",\"writes\":[" W(
        "x", 1) "],\"events\":[{\"type\":\"e\"}]}]}";
    assert_int_equal(post("/ledgers/horizon/checkpoints", c1, &r), 201);
    th_response_free(&r);
    PQclear(th_sql(th_svc_pg(), "UPDATE rowlock.ledgers SET horizon = 5 WHERE name = 'horizon'"));
    char *before = th_bad_snapshot(&horizon_ledger.state);
    for (int seq = 2; seq <= 5; seq++) {
        char body[512];
        snprintf(
            body, sizeof(body),
            "{\"sequence\":%d,\"transactions\":[{\"digest\":\"h%d\",\"writes\":[" W(
                "x", 9) "],\"deletes\":[{\"object_id\":\"z\",\"version\":9}],\"events\":[{\"type\":"
                        "\"e\"}]}]}",
            seq, seq);
        post("/ledgers/horizon/checkpoints", body, &r);
        th_assert_problem(&r, 409, "below_horizon");
        th_response_free(&r);
    }
    /* the recorded checkpoint 1, sent again, is still only a replay */
    assert_int_equal(post("/ledgers/horizon/checkpoints", c1, &r), 200);
    assert_true(json_is_true(json_object_get(r.json, "replay")));
    th_response_free(&r);
    th_bad_unchanged(&horizon_ledger.state, before); /* a refused checkpoint wrote nothing */
    free(before);
    assert_int_equal(
        th_http(th_svc.port, "GET", "/ledgers/horizon/transactions/h3", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "transaction_not_found");
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/ledgers/horizon/objects/x", NULL, NULL, 0, &r),
                     0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 1);
    th_response_free(&r);
    /* just above the horizon applies */
    const char *c6 = "{\"sequence\":6,\"transactions\":[{\"digest\":\"h6\",\"writes\":[" W(
        "x", 6) "],\"events\":[{\"type\":\"e\"}]}]}";
    assert_int_equal(post("/ledgers/horizon/checkpoints", c6, &r), 201);
    assert_int_equal(json_integer_value(json_object_get(r.json, "applied")), 1);
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/ledgers/horizon", NULL, NULL, 0, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.json, "horizon")), 5);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(r.json, "counts"), "checkpoints")), 2);
    th_response_free(&r);
    assert_int_equal(th_http(th_svc.port, "GET", "/ledgers/horizon/objects/x", NULL, NULL, 0, &r),
                     0);
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 6);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(malformed_transaction_is_400_and_writes_nothing),
        cmocka_unit_test(oversized_lists_are_400),
        cmocka_unit_test(malformed_checkpoint_is_400_and_writes_nothing),
        cmocka_unit_test(checkpoint_of_1001_transactions_is_batch_too_large),
        cmocka_unit_test(bad_and_unknown_ledger_names),
        cmocka_unit_test(bad_ledger_config_creates_nothing),
        cmocka_unit_test(wrong_media_type_is_415),
        cmocka_unit_test(malformed_json_is_400),
        cmocka_unit_test(reads_of_what_does_not_exist),
        cmocka_unit_test(checkpoint_at_or_below_horizon_is_409_and_writes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
