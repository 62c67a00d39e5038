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

static struct th_service svc;
static char dburl[1024];
static PGconn *pg;
static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static long post(const char *path, const char *body, struct th_response *r)
{
    assert_int_equal(th_http(svc.port, "POST", path, json_ct, body, strlen(body), r), 0);
    return r->status;
}

static void expect_status(const char *path, const char *body, long status)
{
    struct th_response r;
    if (post(path, body, &r) != status)
        fail_msg("POST %s %s: expected %ld, got %ld %s", path, body, status, r.status, r.body);
    th_response_free(&r);
}

static int setup(void **state)
{
    struct th_response r;
    if (th_db_create("ledger_bad_input", dburl, sizeof(dburl)) != 0 ||
        th_service_start(&svc, dburl, NULL) != 0)
        return -1;
    pg = th_pg(dburl);
    const char *names[] = {"bad", "horizon"};
    for (int i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/ledgers/%s", names[i]);
        if (th_http(svc.port, "PUT", path, json_ct, "{}", 2, &r) != 0 || r.status != 201)
            return -1;
        th_response_free(&r);
    }
    /* something to leave untouched: a checkpoint, an optimistic transaction, a display, events */
    expect_status(CP_PATH,
                  "{\"sequence\":1,\"transactions\":[{\"digest\":\"b1\",\"writes\":[" W(
                      "x", 1) "],\"displays\":[{\"type\":\"p\",\"version\":1,\"data\":1}],"
                              "\"events\":[{\"type\":\"e\"}]}]}",
                  201);
    expect_status(
        TX_PATH,
        "{\"digest\":\"b2\",\"inputs\":[{\"object_id\":\"x\",\"version\":1}],"
        "\"writes\":[" W("y", 2) "],\"deletes\":[{\"object_id\":\"x\",\"version\":2}],"
                                 "\"events\":[{\"type\":\"e\"},{\"type\":\"f\",\"data\":[1]}]}",
        201);
    return 0;
}

static int teardown(void **state)
{
    PQfinish(pg);
    return th_service_stop(&svc) == 0 ? 0 : -1;
}

/* ---- what "writes nothing" means ---- */

static int64_t sql_int(const char *sql)
{
    PGresult *r = th_sql(pg, sql);
    int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

/* Every row of ledger l (and the list of ledgers), summed up (caller decrefs). */
static json_t *snapshot(const char *l)
{
    char sql[512];
    snprintf(sql, sizeof(sql), "SELECT id FROM rowlock.ledgers WHERE name = '%s'", l);
    int64_t id = sql_int(sql);
    json_t *s = json_object();
    json_object_set_new(s, "ledgers",
                        json_integer(sql_int("SELECT count(*) FROM rowlock.ledgers")));
    snprintf(sql, sizeof(sql), "SELECT horizon FROM rowlock.ledgers WHERE id = %" PRId64, id);
    json_object_set_new(s, "horizon", json_integer(sql_int(sql)));
    static const char *const tables[][2] = {
        {"objects", "count(*) * 1000000 + coalesce(sum(version), 0) * 10 + count(*) FILTER (WHERE "
                    "deleted)"},
        {"displays", "count(*) * 1000000 + coalesce(sum(version), 0)"},
        {"transactions", "count(*) * 1000 + count(*) FILTER (WHERE executed)"},
        {"events", "count(*)"},
        {"checkpoints", "count(*)"},
    };
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        snprintf(sql, sizeof(sql), "SELECT %s FROM rowlock.%s_%" PRId64, tables[i][1], tables[i][0],
                 id);
        json_object_set_new(s, tables[i][0], json_integer(sql_int(sql)));
    }
    return s;
}

/* Ledger "bad" and the list of ledgers, as text for the harness's "changes nothing" check. */
static char *snapshot_bad(void)
{
    json_t *s = snapshot("bad");
    char *text = json_dumps(s, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(s);
    return text;
}

/* Sends the request and asserts the problem, and that ledger "bad" (and the list of ledgers) did
 * not change: a table of one case. ct NULL: no Content-Type. */
static void refused(const char *method, const char *path, const char *ct, const char *body,
                    long status, const char *code)
{
    const struct th_bad c = {method, path, ct, body, status, code};
    th_expect_problems(svc.port, snapshot_bad, &c, 1);
}

static void refused_tx(const char *body, const char *code)
{
    refused("POST", TX_PATH, "application/json", body, 400, code);
}

static void refused_cp(const char *body, const char *code)
{
    refused("POST", CP_PATH, "application/json", body, 400, code);
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
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        refused_tx(bodies[i], "invalid_transaction");
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
    refused_tx(tx, "invalid_transaction");
    snprintf(cp, cap + 64, "{\"sequence\":2,\"transactions\":[%s]}", tx);
    refused_cp(cp, "invalid_checkpoint");
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
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        refused_cp(bodies[i], "invalid_checkpoint");
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
    refused_cp(cp, "batch_too_large");
    /* 1000 is the limit, not above it: the same in another ledger applies */
    struct th_response r;
    assert_int_equal(th_http(svc.port, "PUT", "/ledgers/big", json_ct, "{}", 2, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
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
    char long_name[160], path[256];
    memset(long_name, 'a', 129);
    long_name[129] = '\0';
    const char *bad[] = {"-x", "_x", ".x", "a$b", "a%20b", "a%2Fb", long_name};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(path, sizeof(path), "/ledgers/%s/transactions", bad[i]);
        refused("POST", path, "application/json", GOOD_TX, 400, "invalid_name");
        snprintf(path, sizeof(path), "/ledgers/%s/checkpoints", bad[i]);
        refused("POST", path, "application/json", "{\"sequence\":1,\"transactions\":[" GOOD_TX "]}",
                400, "invalid_name");
        snprintf(path, sizeof(path), "/ledgers/%s", bad[i]);
        refused("PUT", path, "application/json", "{}", 400, "invalid_name");
        refused("GET", path, NULL, NULL, 400, "invalid_name");
    }
    /* 128 characters is a name */
    long_name[128] = '\0';
    snprintf(path, sizeof(path), "/ledgers/%s/objects/x", long_name);
    refused("GET", path, NULL, NULL, 404, "ledger_not_found");
    const char *unknown[][2] = {
        {"POST", "/ledgers/nope/transactions"},
        {"POST", "/ledgers/nope/checkpoints"},
        {"GET", "/ledgers/nope"},
        {"GET", "/ledgers/nope/objects/x"},
        {"GET", "/ledgers/nope/displays/p"},
        {"GET", "/ledgers/nope/transactions/b1"},
        {"GET", "/ledgers/nope/events"},
    };
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
        int cp = strstr(unknown[i][1], "checkpoints") != NULL;
        const char *body = unknown[i][0][0] == 'G' ? NULL
                           : cp ? "{\"sequence\":1,\"transactions\":[" GOOD_TX "]}"
                                : GOOD_TX;
        refused(unknown[i][0], unknown[i][1], body ? "application/json" : NULL, body, 404,
                "ledger_not_found");
    }
}

static void bad_ledger_config_creates_nothing(void **state)
{
    const char *bodies[] = {"{\"tombstone_retention_seconds\":0}",
                            "{\"tombstone_retention_seconds\":\"60\"}", "{\"retention\":60}", "[]"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++)
        refused("PUT", "/ledgers/newone", "application/json", bodies[i], 400, "invalid_config");
    refused("GET", "/ledgers/newone", NULL, NULL, 404, "ledger_not_found");
}

static void wrong_media_type_is_415(void **state)
{
    const char *cts[] = {"text/plain", "application/x-www-form-urlencoded", NULL};
    const char *cp = "{\"sequence\":2,\"transactions\":[" GOOD_TX "]}";
    for (size_t i = 0; i < sizeof(cts) / sizeof(cts[0]); i++) {
        refused("POST", TX_PATH, cts[i], GOOD_TX, 415, "unsupported_media_type");
        refused("POST", CP_PATH, cts[i], cp, 415, "unsupported_media_type");
    }
}

static void malformed_json_is_400(void **state)
{
    const char *bodies[] = {"{\"digest\":", "{digest:\"t\"}", "{\"digest\":\"t\"} x", "", "nul"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        refused("POST", TX_PATH, "application/json", bodies[i], 400, "invalid_json");
        refused("POST", CP_PATH, "application/json", bodies[i], 400, "invalid_json");
    }
}

/* ---- reads of what is not there ---- */

static void reads_of_what_does_not_exist(void **state)
{
    refused("GET", "/ledgers/bad/objects/never", NULL, NULL, 404, "object_not_found");
    refused("GET", "/ledgers/bad/displays/never", NULL, NULL, 404, "display_not_found");
    refused("GET", "/ledgers/bad/transactions/never", NULL, NULL, 404, "transaction_not_found");
    /* refused submissions did not execute: still not found */
    refused("POST", TX_PATH, "application/json",
            "{\"digest\":\"waits\",\"inputs\":[{\"object_id\":\"nothing\",\"version\":3}],"
            "\"writes\":[" W("nothing", 4) "]}",
            409, "dependencies_pending");
    refused("GET", "/ledgers/bad/transactions/waits", NULL, NULL, 404, "transaction_not_found");
    refused("POST", TX_PATH, "application/json",
            "{\"digest\":\"late\",\"inputs\":[{\"object_id\":\"y\",\"version\":1}],"
            "\"writes\":[" W("y", 3) "]}",
            409, "superseded");
    refused("GET", "/ledgers/bad/transactions/late", NULL, NULL, 404, "transaction_not_found");
    /* x was deleted at 2 by b2 */
    struct th_response r;
    assert_int_equal(th_http(svc.port, "GET", "/ledgers/bad/objects/x", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "object_deleted");
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 2);
    th_response_free(&r);
    const char *params[] = {"after=-1", "after=abc", "after=", "limit=0", "limit=1001", "limit=x"};
    for (size_t i = 0; i < sizeof(params) / sizeof(params[0]); i++) {
        char path[128];
        snprintf(path, sizeof(path), "/ledgers/bad/events?%s", params[i]);
        refused("GET", path, NULL, NULL, 400, "invalid_parameter");
    }
}

/* ---- the horizon ---- */

static void checkpoint_at_or_below_horizon_is_409_and_writes_nothing(void **state)
{
    struct th_response r;
    const char *c1 = "{\"sequence\":1,\"transactions\":[{\"digest\":\"h1\",\"writes\":[" W(
        "x", 1) "],\"events\":[{\"type\":\"e\"}]}]}";
    assert_int_equal(post("/ledgers/horizon/checkpoints", c1, &r), 201);
    th_response_free(&r);
    PQclear(th_sql(pg, "UPDATE rowlock.ledgers SET horizon = 5 WHERE name = 'horizon'"));
    json_t *before = snapshot("horizon");
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
    json_t *after = snapshot("horizon");
    if (!json_equal(before, after))
        fail_msg("a refused checkpoint wrote: %s became %s", json_dumps(before, JSON_COMPACT),
                 json_dumps(after, JSON_COMPACT));
    json_decref(before);
    json_decref(after);
    assert_int_equal(
        th_http(svc.port, "GET", "/ledgers/horizon/transactions/h3", NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, 404, "transaction_not_found");
    th_response_free(&r);
    assert_int_equal(th_http(svc.port, "GET", "/ledgers/horizon/objects/x", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "version")), 1);
    th_response_free(&r);
    /* just above the horizon applies */
    const char *c6 = "{\"sequence\":6,\"transactions\":[{\"digest\":\"h6\",\"writes\":[" W(
        "x", 6) "],\"events\":[{\"type\":\"e\"}]}]}";
    assert_int_equal(post("/ledgers/horizon/checkpoints", c6, &r), 201);
    assert_int_equal(json_integer_value(json_object_get(r.json, "applied")), 1);
    th_response_free(&r);
    assert_int_equal(th_http(svc.port, "GET", "/ledgers/horizon", NULL, NULL, 0, &r), 0);
    assert_int_equal(json_integer_value(json_object_get(r.json, "horizon")), 5);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(r.json, "counts"), "checkpoints")), 2);
    th_response_free(&r);
    assert_int_equal(th_http(svc.port, "GET", "/ledgers/horizon/objects/x", NULL, NULL, 0, &r), 0);
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
    return cmocka_run_group_tests(tests, setup, teardown);
}
