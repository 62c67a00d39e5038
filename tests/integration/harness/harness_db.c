/* A fresh database with rowlock's schema and a pool on it (see harness_db.h). */
#include "harness_db.h"

#include <stdio.h>

#include "db/schema.h"
#include "harness_svc.h"

int th_db_open(const char *name, int pool_size, struct db_pool **pool, PGconn **sql)
{
    *pool = NULL;
    if (sql != NULL)
        *sql = NULL;
    if (th_svc_db(name) != 0) {
        fprintf(stderr, "cannot create the test database %s\n", name);
        return -1;
    }
    struct db_pool_config pc = {.conninfo = th_svc_dburl,
                                .size = pool_size,
                                .acquire_timeout_ms = 5000,
                                .statement_timeout_ms = 20000,
                                .connect_timeout_s = 5};
    *pool = db_pool_create(&pc);
    enum db_schema_verdict verdict = DB_SCHEMA_INCOMPATIBLE;
    int found = 0;
    struct db_error err = {"", ""};
    if (*pool == NULL || db_schema_apply(*pool, &verdict, &found, &err) != DB_OK ||
        verdict != DB_SCHEMA_CREATED) {
        fprintf(stderr, "cannot apply the schema: %s\n", *pool ? err.message : "no pool");
        return -1;
    }
    if (sql != NULL && (*sql = th_pg(th_svc_dburl)) == NULL)
        return -1;
    return 0;
}

void th_db_close(struct db_pool *pool, PGconn *sql)
{
    PQfinish(sql);
    db_pool_destroy(pool);
}
