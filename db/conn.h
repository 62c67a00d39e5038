/* struct db_conn, the connection slot pool.c lends, query.c runs statements on, tx.c runs
 * transactions on and watchdog.c cuts, with what those files call on it. Not for workflows:
 * they see struct db_conn only as an opaque handle. */
#ifndef DB_CONN_H
#define DB_CONN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "db/pool.h"
#include "db/stmt_cache.h"

/* How the last round trip of a transaction lost its connection (db/query.c, db/tx.c). */
enum db_lost {
    DB_LOST_NONE,
    DB_LOST_NOTHING_RAN,    /* nothing of the transaction reached the server: safe to re-run */
    DB_LOST_NOT_COMMITTED,  /* the transaction ran in part and was not committed */
    DB_LOST_COMMIT_UNKNOWN, /* COMMIT was sent and no answer came: it may have committed */
};

/* See db_conn_relation_opened. */
#define DB_REL_RETIRE_FACTOR 64
#define DB_REL_SEEN_BITS     65536

struct db_conn {
    PGconn *pg;
    struct db_pool *pool;
    int broken;
    /* pool.c: set while c is lent (under the pool's mutex), read by the watchdog */
    unsigned generation;     /* the pool's flush generation when c connected */
    int watch_fd;            /* a dup of c's socket the watchdog may shut down; -1 when closed */
    long long busy_since_ms; /* monotonic ms when c was lent; 0 when free */
    atomic_int cut;          /* the watchdog shut c's socket down */
    int connected_before;    /* c has been connected once (a later connect is a reconnect) */
    atomic_int backend_pid;  /* the server process of c's connection; 0 while closed */
    struct db_stmt_cache *stmts; /* statements prepared on this connection (db/stmt_cache.h) */
    unsigned stmt_stamp;         /* the statement batch in progress (db_query_pipeline) */
    struct db_stmt_cache *seen;  /* names of dynamic statements seen lately (not prepared) */
    int stmt_churn;              /* statements evicted or seen anew since c connected */
    /* relations of a resource of their own (a topic's offset sequence) c's backend has opened
     * since c connected: a bit per hashed id, and how many bits are set */
    uint64_t rel_seen[DB_REL_SEEN_BITS / 64];
    int rel_opened;
    char **inl; /* SQL of the pipeline's statements sent inline (query.c) */
    size_t inl_cap;
    /* the transaction in progress (set by tx.c, sent with statements by query.c) */
    const char *const *begin; /* its BEGIN commands, until they go out with a statement */
    int commit_next;          /* send COMMIT with the next statement */
    int committed;            /* that COMMIT succeeded */
    enum db_lost lost;        /* how the transaction's connection was lost, when it was */
};

/* Closes the libpq connection of c and forgets its prepared statements. */
void db_conn_close(struct db_conn *c);
/* Counts a prepared statement of c DEALLOCATEd to make room for another. */
void db_conn_statement_evicted(struct db_conn *c);
/* Counts a statement evicted, or a dynamic one seen for the first time lately; past
 * DB_STMT_RETIRE_FACTOR times the cache's capacity since c connected, c is closed when released:
 * a backend keeps catalog entries of every table it has touched (thousands of topics' tables
 * otherwise grow its memory without bound), and a new one starts empty. */
#define DB_STMT_RETIRE_FACTOR 4
/* Names of dynamic statements a connection remembers having seen, times its cache's capacity. */
#define DB_STMT_SEEN_FACTOR 4
void db_conn_statement_churned(struct db_conn *c);
/* Counts a relation of one resource (a topic's offset sequence, id its resource's id) opened on
 * c. A backend keeps the catalog entry of every relation it has opened for as long as it lives,
 * and statements no longer tell one topic from another, so the statement churn above never sees
 * them: past DB_REL_RETIRE_FACTOR times the statement cache's capacity distinct ones since c
 * connected, c is closed when released, which bounds a backend's memory however many topics
 * there are. Distinct is counted through a bitmap of DB_REL_SEEN_BITS
 * (hash collisions undercount by a few per cent at the bound). The two bounds are one budget: a
 * statement churned counts as DB_REL_RETIRE_FACTOR / DB_STMT_RETIRE_FACTOR relations, so that a
 * connection meeting both new ledgers and new topics stays within what either alone may cost. */
void db_conn_relation_opened(struct db_conn *c, int64_t id);
/* sqlstate.c: classifies a failed result or connection into a status, filling err. */
enum db_status db_classify(struct db_conn *c, const PGresult *res, struct db_error *err);
/* sqlstate.c: true when res (NULL-safe) is a successful command or rows. */
int db_result_ok(const PGresult *res);
/* query.c: COMMIT on its own round trip, for tx.c when the workflow's last statement did not
 * carry it. A COMMIT that could not be sent committed nothing; one sent whose answer never came
 * answers DB_ERR_OUTCOME_UNKNOWN (c->lost says how). */
enum db_status db_conn_commit(struct db_conn *c, struct db_error *err);

#endif
