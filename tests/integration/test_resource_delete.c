/* DELETE of a topic and of a ledger frees what it held (issue 17): after it, the rowlock schema
 * holds exactly the relations it held before the resource was created (its generated tables,
 * indexes and sequences are dropped), its janitor row is gone, its name answers 404 and can be
 * created again, empty. A second DELETE is 404. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

static struct th_service svc;
static char dburl[1024];
static PGconn *pg;

static long long count(const char *sql)
{
    PGresult *r = th_sql(pg, sql);
    long long n = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return n;
}

static long long relations(void)
{
    return count("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                 "WHERE n.nspname = 'rowlock'");
}

static void topic_delete_frees_its_tables(void **state)
{
    (void)state;
    long long before = relations();
    json_decref(th_call(svc.port, "PUT", "/topics/gone", "{}", 201));
    json_decref(
        th_call(svc.port, "POST", "/topics/gone/messages", "{\"key\":\"k\",\"value\":1}", 201));
    assert_true(relations() > before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.topic_upkeep"), 1);
    json_decref(th_call(svc.port, "DELETE", "/topics/gone", NULL, 200));
    assert_int_equal(relations(), before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.topic_upkeep"), 0);
    json_decref(th_call(svc.port, "GET", "/topics/gone", NULL, 404));
    json_decref(th_call(svc.port, "DELETE", "/topics/gone", NULL, 404));
    json_decref(th_call(svc.port, "PUT", "/topics/gone", "{}", 201));
    json_t *page = th_call(svc.port, "GET", "/topics/gone/messages?after=0", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(page, "messages")), 0);
    json_decref(page);
    json_decref(th_call(svc.port, "DELETE", "/topics/gone", NULL, 200));
}

static void ledger_delete_frees_its_tables(void **state)
{
    (void)state;
    long long before = relations();
    json_decref(th_call(svc.port, "PUT", "/ledgers/gone", "{}", 201));
    assert_true(relations() > before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.ledger_upkeep"), 1);
    json_t *d = th_call(svc.port, "DELETE", "/ledgers/gone", NULL, 200);
    assert_string_equal(json_string_value(json_object_get(d, "name")), "gone");
    assert_true(json_is_true(json_object_get(d, "deleted")));
    json_decref(d);
    assert_int_equal(relations(), before);
    assert_int_equal(count("SELECT count(*) FROM rowlock.ledger_upkeep"), 0);
    json_decref(th_call(svc.port, "GET", "/ledgers/gone", NULL, 404));
    json_decref(th_call(svc.port, "DELETE", "/ledgers/gone", NULL, 404));
    json_decref(th_call(svc.port, "DELETE", "/ledgers/bad%20name", NULL, 400));
    json_decref(th_call(svc.port, "PUT", "/ledgers/gone", "{}", 201));
    json_t *l = th_call(svc.port, "GET", "/ledgers/gone", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(l, "watermark")), 0);
    json_decref(l);
}

static int setup(void **state)
{
    (void)state;
    if (th_db_create("resource_delete", dburl, sizeof(dburl)) != 0)
        return -1;
    if (th_service_start(&svc, dburl, NULL) != 0)
        return -1;
    pg = th_pg(dburl);
    return pg ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    PQfinish(pg);
    return th_service_stop(&svc) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(topic_delete_frees_its_tables),
        cmocka_unit_test(ledger_delete_frees_its_tables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
