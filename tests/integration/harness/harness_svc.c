/* The program's database and its service (harness_svc.h): the setup, teardown and calls every
 * test program would otherwise write for itself. Nothing here knows a resource family. */
#include "harness_svc.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include <cmocka.h>

struct th_service th_svc;
char th_svc_dburl[1024];

int th_svc_db(const char *name)
{
    return th_db_create(name, th_svc_dburl, sizeof(th_svc_dburl));
}

int th_svc_run(const char *const *env)
{
    return th_service_start(&th_svc, th_svc_dburl, env);
}

int th_svc_start(const char *name, const char *const *env)
{
    return th_svc_db(name) == 0 ? th_svc_run(env) : -1;
}

static PGconn *pg;

PGconn *th_svc_pg(void)
{
    if (pg == NULL)
        pg = th_pg(th_svc_dburl);
    return pg;
}

int64_t th_svc_sql_int(const char *sql)
{
    PGresult *r = th_sql(th_svc_pg(), sql);
    int64_t v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return v;
}

int th_svc_teardown(void **state)
{
    (void)state;
    PQfinish(pg);
    pg = NULL;
    if (th_svc.pid <= 0)
        return 0;
    return th_service_stop(&th_svc) == 0 ? 0 : -1;
}

json_t *th_svc_call(const char *method, const char *path, const char *body, long want)
{
    return th_call(th_svc.port, method, path, body, want);
}

json_t *th_svc_get(const char *path)
{
    return th_get_json(th_svc.port, path);
}

void th_svc_get_problem(const char *path, long status, const char *code)
{
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    th_assert_problem(&r, status, code);
    th_response_free(&r);
}
