/* The per-connection prepared-statement cache: a connection used for more distinct
 * statements than ROWLOCK_DB_STATEMENT_CACHE (a ledger's statements are named by its id, so
 * thousands of ledgers are thousands of statements) holds at most that many on the server, as
 * pg_prepared_statements of its own session says; a resource's statement seen for the first time
 * is sent inline, prepared only when seen again; an evicted statement is prepared again when it
 * comes back; a connection that evicted twice the capacity is reopened when released (its
 * backend's catalog caches hold every table it touched); a pipeline whose statements are all new
 * works at the edge of a full cache; a failing statement leaves the cache in step with the
 * server; and a connection whose backend opened the offset sequences of more distinct topics than
 * DB_REL_RETIRE_FACTOR x the cache (a catalog entry each, kept for the backend's life, which no
 * statement counts since every topic shares them) is reopened, while one busy topic never
 * reopens it; the two bounds are one budget, half of each reopening it too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "db/conn.h"
#include "db/schema.h"
#include "db/topics.h"
#include "db/tx.h"
#include "harness_svc.h"

#define CACHE 16

static struct db_pool *pool;

static int setup(void **state)
{
    (void)state;
    if (th_svc_db("stmtcache") != 0)
        return -1;
    struct db_pool_config pc = {.conninfo = th_svc_dburl,
                                .size = 1, /* every statement goes through one connection */
                                .acquire_timeout_ms = 1000,
                                .statement_timeout_ms = 5000,
                                .connect_timeout_s = 5,
                                .statement_cache = CACHE};
    pool = db_pool_create(&pc);
    return pool ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    db_pool_destroy(pool);
    return 0;
}

/* "SELECT <n>": a distinct statement per resource, like a ledger's. */
static int build_select(char *buf, size_t size, const void *ctx)
{
    int n = snprintf(buf, size, "SELECT %d", *(const int *)ctx);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

static int run_named(struct db_conn *c, int n)
{
    char name[32];
    snprintf(name, sizeof(name), "r%d_probe", n);
    PGresult *r = NULL;
    struct db_error err;
    enum db_status st = db_query_dyn(c, name, build_select, &n, 0, NULL, &r, &err);
    int v = st == DB_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

/* What the server holds for this session. */
static int server_prepared(struct db_conn *c)
{
    PGresult *r = PQexec(db_conn_pg(c), "SELECT count(*) FROM pg_prepared_statements");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

/* 1 when this session holds statement name prepared. */
static int server_holds(struct db_conn *c, const char *name)
{
    const char *params[] = {name};
    PGresult *r =
        PQexecParams(db_conn_pg(c), "SELECT count(*) FROM pg_prepared_statements WHERE name = $1",
                     1, NULL, params, NULL, NULL, 0);
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static struct db_conn *acquire(void)
{
    struct db_conn *c = NULL;
    struct db_error err;
    assert_int_equal(db_pool_acquire(pool, &c, &err), DB_OK);
    return c;
}

static void bounded_by_the_setting(void **state)
{
    (void)state;
    struct db_pool_stats before, after;
    db_pool_get_stats(pool, &before);
    for (int n = 1; n <= 10 * CACHE; n++) {
        struct db_conn *c = acquire();
        assert_int_equal(run_named(c, n), n); /* the first time inline */
        assert_int_equal(run_named(c, n), n); /* seen again: prepared */
        int held = server_prepared(c);
        if (held > CACHE || held != db_conn_statements(c))
            fail_msg("after %d distinct statements the server holds %d prepared (cache %d, "
                     "recorded %d)",
                     n, held, CACHE, db_conn_statements(c));
        db_pool_release(c);
    }
    db_pool_get_stats(pool, &after);
    assert_int_equal(after.statement_cache, CACHE);
    assert_true(after.statement_evictions - before.statement_evictions >= 3 * CACHE);
    /* and the connection was reopened after each 4 x CACHE statements evicted or new: its
     * backend's catalog caches (every table its statements touched) start empty again */
    assert_true(after.retired - before.retired >= 3);
    /* the oldest were evicted: they come back prepared anew, and still answer */
    struct db_conn *c = acquire();
    for (int n = 1; n <= 3 * CACHE; n++) {
        assert_int_equal(run_named(c, n), n);
        assert_int_equal(run_named(c, n), n);
    }
    assert_true(server_prepared(c) <= CACHE);
    db_pool_release(c);
}

/* Pipelines of new statements at a full cache: each one's statements stay until it has run. */
static void pipelines_at_the_edge(void **state)
{
    (void)state;
    struct db_conn *c = acquire();
    for (int round = 0; round < 3 * CACHE; round++) {
        int v[4];
        char names[4][32];
        PGresult *r[4] = {NULL};
        struct db_call calls[4];
        for (int i = 0; i < 4; i++) {
            v[i] = 1000 + round * 4 + i;
            snprintf(names[i], sizeof(names[i]), "p%d_probe", v[i]);
            calls[i] = (struct db_call){
                .name = names[i], .build = build_select, .ctx = &v[i], .nparams = 0, .out = &r[i]};
        }
        for (int pass = 0; pass < 2; pass++) { /* inline, then prepared */
            struct db_error err;
            assert_int_equal(db_query_pipeline(c, calls, 4, &err), DB_OK);
            for (int i = 0; i < 4; i++) {
                assert_int_equal(atoi(PQgetvalue(r[i], 0, 0)), v[i]);
                PQclear(r[i]);
                r[i] = NULL;
            }
        }
    }
    assert_true(server_prepared(c) <= CACHE);
    assert_int_equal(server_prepared(c), db_conn_statements(c));
    db_pool_release(c);
}

/* A statement seen once is sent inline and not kept: a connection serving thousands of resources
 * in turn does not prepare (and evict) one per request; seen again, it is prepared. */
static void first_sight_inline(void **state)
{
    (void)state;
    struct db_conn *c = acquire();
    assert_int_equal(run_named(c, 777777), 777777);
    assert_int_equal(server_holds(c, "r777777_probe"), 0);
    assert_int_equal(run_named(c, 777777), 777777);
    assert_int_equal(server_holds(c, "r777777_probe"), 1);
    assert_int_equal(server_prepared(c), db_conn_statements(c));
    db_pool_release(c);
}

static int build_bad(char *buf, size_t size, const void *ctx)
{
    (void)ctx;
    snprintf(buf, size, "SELECT * FROM no_such_table");
    return 0;
}

/* A statement the server refuses to prepare is not recorded: the cache and the server agree. */
static void refused_statement_not_recorded(void **state)
{
    (void)state;
    struct db_conn *c = acquire();
    struct db_error err;
    assert_int_equal(db_query_dyn(c, "bad_probe", build_bad, NULL, 0, NULL, NULL, &err),
                     DB_ERR_HARD);
    assert_int_equal(server_prepared(c), db_conn_statements(c));
    db_pool_release(c);
}

static int backend_pid(void)
{
    struct db_conn *c = acquire();
    int pid = PQbackendPID(db_conn_pg(c));
    db_pool_release(c);
    return pid;
}

static void produce_one(const char *topic, int n)
{
    char key[32], value[32];
    snprintf(key, sizeof(key), "k%d", n);
    snprintf(value, sizeof(value), "{\"n\":%d}", n);
    struct db_message_in in = {.key = key, .value = value};
    struct db_message_out out;
    enum db_topic_verdict v = DB_TOPIC_NOT_FOUND;
    struct db_error err;
    if (db_topics_produce(pool, topic, NULL, &in, 1, &out, &v, &err) != DB_OK || v != DB_TOPIC_OK)
        fail_msg("produce to %s: %s", topic, err.message);
}

/* Offset sequences of many topics: the connection is reopened past the bound; one topic's,
 * however often, never reopens it. */
static void topic_sequences_bounded(void **state)
{
    (void)state;
    enum db_schema_verdict verdict = DB_SCHEMA_INCOMPATIBLE;
    int found = 0;
    struct db_error err;
    assert_int_equal(db_schema_apply(pool, &verdict, &found, &err), DB_OK);
    const int topics = DB_REL_RETIRE_FACTOR * CACHE + 64;
    struct db_topic_config cfg = {.headless_ttl_seconds = 3600, .default_schema_version = 1};
    for (int i = 0; i < topics; i++) {
        char name[32];
        snprintf(name, sizeof(name), "seq-%d", i);
        struct db_topic t;
        enum db_topic_verdict v;
        assert_int_equal(db_topics_put(pool, name, &cfg, &t, &v, &err), DB_OK);
    }
    struct db_pool_stats before, after;
    db_pool_get_stats(pool, &before);
    int pid = backend_pid();
    for (int i = 0; i < topics; i++)
        produce_one("seq-0", i);
    db_pool_get_stats(pool, &after);
    assert_int_equal(after.retired, before.retired);
    assert_int_equal(backend_pid(), pid);
    for (int i = 0; i < topics; i++) {
        char name[32];
        snprintf(name, sizeof(name), "seq-%d", i);
        produce_one(name, i);
    }
    db_pool_get_stats(pool, &after);
    if (after.retired != before.retired + 1 || backend_pid() == pid)
        fail_msg("%d topics' sequences opened on one connection: reopened %d times (want 1)",
                 topics, (int)(after.retired - before.retired));
}

/* The two bounds are one budget (db/conn.h): half of each, neither reached alone, reopens the
 * connection once (new topics' sequences, then new statements; run after topic_sequences_bounded,
 * whose topics it writes to). */
static void topics_and_statements_share_one_budget(void **state)
{
    (void)state;
    const int topics = DB_REL_RETIRE_FACTOR * CACHE / 2;
    const int statements = DB_STMT_RETIRE_FACTOR * CACHE / 2 + 8;
    struct db_pool_stats before, after;
    db_pool_get_stats(pool, &before);
    int pid = backend_pid();
    for (int i = 1; i <= topics; i++) {
        char name[32];
        snprintf(name, sizeof(name), "seq-%d", i);
        produce_one(name, i);
    }
    struct db_conn *c = acquire();
    for (int i = 0; i < statements; i++)
        assert_int_equal(run_named(c, 900000 + i), 900000 + i);
    db_pool_release(c);
    db_pool_get_stats(pool, &after);
    if (after.retired != before.retired + 1 || backend_pid() == pid)
        fail_msg("%d topics' sequences and %d new statements on one connection: reopened %d "
                 "times (want 1)",
                 topics, statements, (int)(after.retired - before.retired));
}

/* Every pooled session runs without JIT (db/pool.c): a count over many rows (the queue gauges)
 * passed jit_above_cost and compiled for longer than it scanned. */
static void sessions_without_jit(void **state)
{
    (void)state;
    struct db_conn *c = acquire();
    PGresult *r = PQexec(db_conn_pg(c), "SHOW jit");
    assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
    assert_string_equal(PQgetvalue(r, 0, 0), "off");
    PQclear(r);
    db_pool_release(c);
}

static const struct db_stmt st_plan_mode = {"test_plan_mode",
                                            "SELECT current_setting('plan_cache_mode')", 0};

static enum db_status plan_mode_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_plan_mode, NULL, &r, err);
    if (st == DB_OK)
        snprintf(arg, 32, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    return st;
}

/* A DB_READ_COMMITTED_GENERIC_PLANS transaction runs its statements on generic plans, and only
 * it: the setting is the transaction's own (SET LOCAL, sent with BEGIN). */
static void generic_plans_for_their_transaction_only(void **state)
{
    (void)state;
    char inside[32] = "", plain[32] = "";
    struct db_error err;
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, plan_mode_tx, inside, &err),
                     DB_OK);
    assert_int_equal(db_tx_run(pool, DB_READ_COMMITTED, plan_mode_tx, plain, &err), DB_OK);
    assert_string_equal(inside, "force_generic_plan");
    assert_string_equal(plain, "auto"); /* the same session (a pool of one), after it */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bounded_by_the_setting),
        cmocka_unit_test(pipelines_at_the_edge),
        cmocka_unit_test(first_sight_inline),
        cmocka_unit_test(refused_statement_not_recorded),
        cmocka_unit_test(topic_sequences_bounded),
        cmocka_unit_test(topics_and_statements_share_one_budget),
        cmocka_unit_test(sessions_without_jit),
        cmocka_unit_test(generic_plans_for_their_transaction_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
