/* Shared vocabulary of db/: the status every workflow and query reports, the error that carries
 * SQLSTATE and message, and named prepared statements. Knows nothing of HTTP. */
#ifndef DB_DB_H
#define DB_DB_H

#include <libpq-fe.h>
#include <stddef.h>

enum db_status {
    DB_OK = 0,  /* done (for db_tx_run: committed) */
    DB_ABORTED, /* the workflow chose to roll back; its verdict is in its own result */
    /* inside db/ only: a serialization failure or deadlock (40001, 40P01) in the transaction's
     * statements: run it again. db_tx_run does (after a short backoff) and never returns it:
     * when the last attempt conflicts too it answers DB_ERR_BUSY */
    DB_ERR_CONFLICT,
    /* inside db/ only: the workflow found what it ran on changed under it (a stale id hint, a
     * resource deleted while it was written, an offset a reader recorded as a hole): run it
     * again. db_tx_run does (without waiting) and never returns it: when the last attempt
     * answers it too it answers DB_ERR_BUSY. Not a conflict the database reported */
    DB_ERR_REDO,
    DB_ERR_UNAVAILABLE,  /* the database cannot be reached, or the connection broke */
    DB_ERR_POOL_TIMEOUT, /* no pooled connection came free within the acquire timeout */
    DB_ERR_TIMEOUT,      /* statement or lock timeout (57014, 55P03) */
    DB_ERR_HARD,         /* anything else; SQLSTATE and message in struct db_error */
    /* the connection was lost after COMMIT was sent (or the deadline cut it while COMMIT was
     * on its way): the transaction may or may not have committed. Never retried. */
    DB_ERR_OUTCOME_UNKNOWN,
    /* from db_tx_run only: every one of its DB_TX_MAX_ATTEMPTS attempts conflicted
     * (DB_ERR_CONFLICT) or had to run again (DB_ERR_REDO), and the last left nothing
     * committed; err holds the last attempt's error. A client may send the request again */
    DB_ERR_BUSY
};

/* Sizes of the text db/ writes into a caller's buffer or struct, its NUL included: both sides
 * use these names, never the number. */
#define DB_SQLSTATE_SIZE 6   /* a SQLSTATE: five characters */
#define DB_MESSAGE_SIZE  512 /* struct db_error's message (a longer one is cut) */
#define DB_NAME_MAX      128 /* bytes of a topic's, queue's, ledger's, producer's or consumer's name */
#define DB_NAME_SIZE     (DB_NAME_MAX + 1)
#define DB_TIME_TEXT     40 /* a timestamp as the API writes it (DB_TS, db/sql.h) */
#define DB_INT_TEXT      24 /* an integer of up to 64 bits in decimal, with its sign */

struct db_error {
    char sqlstate[DB_SQLSTATE_SIZE];
    char message[DB_MESSAGE_SIZE];
};

/* A named prepared statement. Defined once, static, next to the workflow that uses it; prepared
 * lazily on each connection the first time it runs there. */
struct db_stmt {
    const char *name;
    const char *sql;
    int nparams;
};

struct db_conn;

/* Runs a prepared statement with text parameters (NULL = SQL NULL). On DB_OK *out holds the
 * result (PQclear it; out may be NULL to discard); otherwise *out is NULL and err says why. */
enum db_status db_query(struct db_conn *c, const struct db_stmt *st, const char *const *params,
                        PGresult **out, struct db_error *err);
/* Like db_query for a statement whose text is only known at run time (generated tables): name
 * identifies it on the connection; build(buf, size, ctx) writes its SQL and is called only when
 * the connection has not prepared that name yet. */
typedef int (*db_sql_builder)(char *buf, size_t size, const void *ctx);
enum db_status db_query_dyn(struct db_conn *c, const char *name, db_sql_builder build,
                            const void *ctx, int nparams, const char *const *params, PGresult **out,
                            struct db_error *err);
/* One statement of db_query_pipeline: a static statement (st), or a dynamic one (name, build,
 * ctx and nparams as for db_query_dyn); params and out as for db_query. */
struct db_call {
    const struct db_stmt *st;
    const char *name;
    db_sql_builder build;
    const void *ctx;
    int nparams;
    const char *const *params;
    PGresult **out;
};
/* Runs the n calls in order in one round trip (libpq pipeline mode). Returns the status of the
 * first that failed; the calls after it did not run, and every *out is then NULL. */
enum db_status db_query_pipeline(struct db_conn *c, const struct db_call *calls, size_t n,
                                 struct db_error *err);
/* Runs SQL without parameters (BEGIN, SET, DDL). Same reporting as db_query. */
enum db_status db_exec(struct db_conn *c, const char *sql, struct db_error *err);
/* The longest text PostgreSQL takes as a parameter: no protocol message may pass 1 GiB - 1
 * bytes (its MaxAllocSize). */
#define DB_PARAM_MAX ((size_t)0x3fffffff)
/* The one builder of array parameters: the PostgreSQL array literal of n texts, for passing a
 * batch as one parameter of a set-based statement ({"a","b\"c",NULL}; n = 0 gives {}). Every text
 * is double-quoted with " and \ escaped, so braces, commas, spaces and the word NULL in a text
 * need nothing more; a NULL entry is SQL NULL. Returns malloc'd text (the caller frees it), or
 * NULL when out of memory or when the literal would pass DB_PARAM_MAX (never a cut one). */
char *db_text_array(const char *const *vals, size_t n);
/* Column arrays of a batch: arr[k] is the array literal of column k over n items, where
 * get(items, i, k, buf, size) gives item i's text for column k (NULL for SQL NULL; buf, 32 bytes,
 * may hold formatted numbers). One parameter per column of a set-based statement. */
typedef const char *(*db_column_fn)(const void *items, size_t i, size_t col, char *buf,
                                    size_t size);
struct db_arrays {
    size_t n, ncols;
    char **arr;
};
/* Returns 0, or -1 when out of memory; free with db_arrays_free either way. */
int db_arrays_build(struct db_arrays *a, const void *items, size_t n, size_t ncols,
                    db_column_fn get);
void db_arrays_free(struct db_arrays *a);
/* Sets err from a printf-like message, with SQLSTATE "" (a non-database failure). */
void db_error_set(struct db_error *err, const char *sqlstate, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Name of a status, for logs. */
const char *db_status_name(enum db_status s);

#endif
