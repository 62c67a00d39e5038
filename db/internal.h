/* Internals shared by pool.c and tx.c: the connection slot. Not for workflows. */
#ifndef DB_INTERNAL_H
#define DB_INTERNAL_H

#include <stddef.h>

#include "db/pool.h"

struct db_conn {
    PGconn *pg;
    struct db_pool *pool;
    int broken;
    const struct db_stmt **prepared; /* statements already prepared on this connection */
    size_t nprepared, capprepared;
    char **dyn_names; /* names of dynamic statements prepared on this connection */
    size_t ndyn, capdyn;
    /* the transaction in progress (db/tx.c) */
    const char *const *begin; /* its BEGIN commands, until they go out with a statement */
    int commit_next;          /* send COMMIT with the next statement */
    int committed;            /* that COMMIT succeeded */
    int failed_first;         /* the round trip that carried BEGIN lost the connection */
};

/* Closes the libpq connection of c and forgets its prepared statements. */
void db_conn_close(struct db_conn *c);
/* Classifies a failed result or connection into a status, filling err. */
enum db_status db_classify(struct db_conn *c, const PGresult *res, struct db_error *err);

#endif
