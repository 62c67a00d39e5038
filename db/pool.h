/* The PostgreSQL connection pool: a fixed number of slots, acquired with a bounded wait,
 * connected lazily and reconnected after a connection breaks, with statement_timeout set on
 * every connection. A connection to a server that takes no writes (a standby, a demoted or
 * read-only primary) is closed, never lent; target_session_attrs defaults to read-write, so a
 * connection string naming several hosts reaches the writable one. An idle connection is
 * checked before it is lent; a connection lent for longer than the deadline has its socket shut
 * down by a watchdog thread (watchdog.c). Transactions belong to tx.c; what is logged goes
 * through the caller's log function (notice.h). */
#ifndef DB_POOL_H
#define DB_POOL_H

#include <stdint.h>

#include "db/db.h"
#include "db/notice.h"

struct db_pool_config {
    const char *conninfo; /* libpq URI or key=value string */
    int size;
    int acquire_timeout_ms;
    int statement_timeout_ms;
    int connect_timeout_s;
    /* longest time a connection may stay lent (a request's time in the database) before the
     * watchdog shuts its socket down; 0: no deadline, no watchdog */
    int deadline_ms;
    /* prepared statements a connection keeps at most (the least recently used is DEALLOCATEd
     * to make room): bounds each backend's plan memory whatever the number of resources; 0:
     * DB_STATEMENT_CACHE_DEFAULT; at least DB_STMT_CACHE_MIN */
    int statement_cache;
    db_log_fn log; /* NULL: lines go to stderr as plain text */
    void *log_ctx;
};

/* TCP settings of every connection (a connection string may override them): an idle connection
 * to a vanished server is found within DB_KEEPALIVES_IDLE_S + DB_KEEPALIVES_COUNT *
 * DB_KEEPALIVES_INTERVAL_S seconds, and data left unacknowledged for DB_TCP_USER_TIMEOUT_MS
 * ends the connection. (Unix-socket connections have no use for them.) */
#define DB_KEEPALIVES_IDLE_S     10
#define DB_KEEPALIVES_INTERVAL_S 5
#define DB_KEEPALIVES_COUNT      3
#define DB_TCP_USER_TIMEOUT_MS   10000

#define DB_STATEMENT_CACHE_DEFAULT 128

struct db_pool;

/* Creates a pool; no connection is opened yet. Returns NULL when out of memory. */
struct db_pool *db_pool_create(const struct db_pool_config *cfg);
/* Closes every connection. All connections must have been released. NULL-safe. */
void db_pool_destroy(struct db_pool *pool);

/* Takes a connection, waiting at most the acquire timeout for one to come free, and connects it
 * if needed. An idle connection the server has closed (its socket readable), or one opened
 * before the last flush, is closed and reopened first. DB_OK with *out set;
 * DB_ERR_POOL_TIMEOUT; DB_ERR_UNAVAILABLE (cannot connect). */
enum db_status db_pool_acquire(struct db_pool *pool, struct db_conn **out, struct db_error *err);
/* Gives a connection back. A broken one, or one left inside a transaction, is closed and
 * reconnected on its next use. */
void db_pool_release(struct db_conn *c);
/* Marks a connection broken so that release closes it. */
void db_conn_mark_broken(struct db_conn *c);
/* c failed at the connection level (lost, or the server said it is going away): every idle
 * connection opened before is closed at its next acquire. Logged once per flush; a second call
 * for a connection of the same generation does nothing. */
void db_pool_flush(struct db_conn *c, const char *why);
/* Exempts lent connection c from the deadline until it is released: for work that may rightly
 * outlast it and is no client's request (schema migrations at startup, waiting for another
 * process's schema lock). */
void db_conn_lift_deadline(struct db_conn *c);
/* True when the watchdog cut c (its deadline passed while it was lent). */
int db_conn_was_cut(struct db_conn *c);
/* The pool's deadline in ms (0: none). */
int db_pool_deadline_ms(struct db_pool *pool);
/* The libpq handle, for workflows that need it (escaping identifiers). Borrowed. */
PGconn *db_conn_pg(struct db_conn *c);
/* Prepared statements connection c holds now. */
int db_conn_statements(struct db_conn *c);

struct db_pool_stats {
    int size;
    int in_use;
    int connected;
    uint64_t acquires;
    uint64_t waits;    /* acquires that found no free connection at first */
    uint64_t timeouts; /* acquires that gave up */
    uint64_t connects; /* successful connection opens (first and re-) */
    uint64_t connect_failures;
    uint64_t stale;               /* idle connections found closed by the server at acquire */
    uint64_t flushes;             /* pool flushes after a connection-level failure */
    uint64_t deadlines;           /* connections cut by the watchdog */
    uint64_t read_only;           /* connections closed because their server takes no writes */
    uint64_t statement_evictions; /* prepared statements DEALLOCATEd to make room */
    uint64_t retired;    /* connections closed after DB_STMT_RETIRE_FACTOR x the cache's evictions,
                          * or DB_REL_RETIRE_FACTOR x its distinct topics' sequences, or a mix of
                          * both (one budget: db/conn.h) */
    int statement_cache; /* prepared statements a connection keeps at most */
};
void db_pool_get_stats(struct db_pool *pool, struct db_pool_stats *out);
/* True when pid is the server process of one of pool's connections (NULL-safe; any thread). */
int db_pool_has_backend(struct db_pool *pool, int pid);

#endif
