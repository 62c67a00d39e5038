/* For tests that call db/ directly (no rowlock process): a fresh database with rowlock's schema
 * and a pool on it. */
#ifndef TH_HARNESS_DB_H
#define TH_HARNESS_DB_H

#include <libpq-fe.h>

#include "db/pool.h"

/* Creates the program's database (th_svc_db: its URL in th_svc_dburl), a pool of pool_size
 * connections on it, and the schema (db_schema_apply), and opens a plain connection for SQL
 * checks into *sql (when sql is not NULL). Returns 0, or -1 with the reason on stderr; free
 * with th_db_close. */
int th_db_open(const char *name, int pool_size, struct db_pool **pool, PGconn **sql);
void th_db_close(struct db_pool *pool, PGconn *sql);

#endif
