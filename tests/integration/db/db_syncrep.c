/* The stalled synchronous standby of db_syncrep.h, on the server of ROWLOCK_TEST_ADMIN_URL. */
#include "db_syncrep.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

void syncrep_set(const char *name)
{
    PGconn *c = th_admin_pg();
    char sql[256];
    if (name[0] == '\0')
        snprintf(sql, sizeof(sql), "ALTER SYSTEM RESET synchronous_standby_names");
    else
        snprintf(sql, sizeof(sql), "ALTER SYSTEM SET synchronous_standby_names = '%s'", name);
    PQclear(th_sql(c, sql));
    PQclear(th_sql(c, "SELECT pg_reload_conf()"));
    PQfinish(c);
    for (int i = 0; i < 200; i++) { /* the reload is asynchronous: wait until it took */
        PGconn *s = th_admin_pg();
        PGresult *r = th_sql(s, "SHOW synchronous_standby_names");
        int seen = strcmp(PQgetvalue(r, 0, 0), name) == 0;
        PQclear(r);
        PQfinish(s);
        if (seen)
            return;
        usleep(10000);
    }
    fail_msg("synchronous_standby_names did not become '%s'", name);
}

void syncrep_database_on(const char *db)
{
    PGconn *c = th_admin_pg();
    char sql[256];
    snprintf(sql, sizeof(sql), "ALTER DATABASE %s SET synchronous_commit = on", db);
    PQclear(th_sql(c, sql));
    PQfinish(c);
}

int syncrep_waiting_backend(const char *db, int timeout_ms)
{
    PGconn *c = th_admin_pg();
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT pid FROM pg_stat_activity WHERE datname = '%s' AND wait_event = 'SyncRep'",
             db);
    int pid = 0;
    for (int waited = 0; pid == 0 && waited <= timeout_ms; waited += 10) {
        PGresult *r = th_sql(c, sql);
        pid = PQntuples(r) > 0 ? atoi(PQgetvalue(r, 0, 0)) : 0;
        PQclear(r);
        if (pid == 0)
            usleep(10000);
    }
    PQfinish(c);
    return pid;
}

void syncrep_terminate(int pid)
{
    PGconn *c = th_admin_pg();
    char sql[96];
    snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(%d)", pid);
    PQclear(th_sql(c, sql));
    PQfinish(c);
}

long syncrep_count(const char *dburl, const char *sql)
{
    PGconn *c = th_pg(dburl);
    PGresult *r = th_sql(c, sql);
    long n = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return n;
}
