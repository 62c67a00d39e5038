/* The PostgreSQL connection pool: a fixed number of slots, acquired with a bounded wait,
 * connected lazily and reconnected after a connection breaks, with statement_timeout set on
 * every connection. Transactions belong to tx.c. */
#ifndef DB_POOL_H
#define DB_POOL_H

#include <stdint.h>

#include "db/db.h"

struct db_pool_config {
    const char *conninfo; /* libpq URI or key=value string */
    int size;
    int acquire_timeout_ms;
    int statement_timeout_ms;
    int connect_timeout_s;
};

struct db_pool;

/* Creates a pool; no connection is opened yet. Returns NULL when out of memory. */
struct db_pool *db_pool_create(const struct db_pool_config *cfg);
/* Closes every connection. All connections must have been released. NULL-safe. */
void db_pool_destroy(struct db_pool *pool);

/* Takes a connection, waiting at most the acquire timeout for one to come free, and connects it
 * if needed. DB_OK with *out set; DB_ERR_POOL_TIMEOUT; DB_ERR_UNAVAILABLE (cannot connect). */
enum db_status db_pool_acquire(struct db_pool *pool, struct db_conn **out, struct db_error *err);
/* Gives a connection back. A broken one, or one left inside a transaction, is closed and
 * reconnected on its next use. */
void db_pool_release(struct db_conn *c);
/* Marks a connection broken so that release closes it. */
void db_conn_mark_broken(struct db_conn *c);
/* The libpq handle, for workflows that need it (escaping identifiers). Borrowed. */
PGconn *db_conn_pg(struct db_conn *c);

struct db_pool_stats {
    int size;
    int in_use;
    int connected;
    uint64_t acquires;
    uint64_t waits;    /* acquires that found no free connection at first */
    uint64_t timeouts; /* acquires that gave up */
    uint64_t connects; /* successful connection opens (first and re-) */
    uint64_t connect_failures;
};
void db_pool_get_stats(struct db_pool *pool, struct db_pool_stats *out);

#endif
