/* SQLSTATE classification (see db_classify in conn.h): which status a failed result or a lost
 * connection reports, and which failures leave the connection broken so that the pool closes
 * it. What each status means is db.h's; what is done about it is the caller's (tx.c runs a
 * conflict again, routes map the rest). */
#include <string.h>

#include "db/conn.h"

enum db_status db_classify(struct db_conn *c, const PGresult *res, struct db_error *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (msg == NULL || msg[0] == '\0')
        msg = PQerrorMessage(c->pg);
    if (db_conn_was_cut(c)) {
        db_error_set(err, "08006",
                     "no answer from the database within the deadline of %d ms: the connection "
                     "was closed",
                     db_pool_deadline_ms(c->pool));
        c->broken = 1;
        return DB_ERR_UNAVAILABLE;
    }
    db_error_set(err, state ? state : "", "%s", msg);
    /* 25006: a server that became read-only (a demoted primary): reconnect, so that a
     * multi-host connection string finds the new primary */
    if (state == NULL || PQstatus(c->pg) != CONNECTION_OK || strncmp(state, "08", 2) == 0 ||
        strcmp(state, "57P01") == 0 || strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0 ||
        strcmp(state, "25006") == 0) {
        c->broken = 1;
        return DB_ERR_UNAVAILABLE;
    }
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0)
        return DB_ERR_CONFLICT;
    if (strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
        return DB_ERR_TIMEOUT;
    return DB_ERR_HARD;
}

int db_result_ok(const PGresult *res)
{
    ExecStatusType t = res != NULL ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
}
