/* The summary of all topics, queues and ledgers for /metrics (see upkeep.h). */
#include "db/upkeep.h"

#include <stdlib.h>
#include <string.h>

#include "db/tx.h"

static const struct db_stmt st_summary = {
    "resources_summary",
    "SELECT (SELECT count(*) FROM rowlock.topics), (SELECT count(*) FROM rowlock.ledgers), "
    "coalesce((SELECT extract(epoch FROM now() - min(due_at)) FROM rowlock.topic_upkeep "
    "  WHERE due_at <= now()), 0), "
    "coalesce((SELECT extract(epoch FROM now() - min(due_at)) FROM rowlock.ledger_upkeep "
    "  WHERE due_at <= now()), 0), "
    "(SELECT count(*) FROM rowlock.queues), "
    "coalesce((SELECT extract(epoch FROM now() - min(due_at)) FROM rowlock.queue_upkeep "
    "  WHERE due_at <= now()), 0)",
    0};

static const struct db_stmt st_metrics_budget = {
    "metrics_budget", "SELECT set_config('statement_timeout', $1, true)", 1};

enum db_status db_metrics_budget(struct db_conn *c, const char *budget, struct db_error *err)
{
    if (budget == NULL || budget[0] == '\0')
        return DB_OK;
    const char *params[] = {budget};
    return db_query(c, &st_metrics_budget, params, NULL, err);
}

static enum db_status summary_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct db_resources_summary *out = arg;
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_summary, NULL, &r, err);
    if (st != DB_OK)
        return st;
    out->topics = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    out->ledgers = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
    out->topic_due_s = atof(PQgetvalue(r, 0, 2));
    out->ledger_due_s = atof(PQgetvalue(r, 0, 3));
    out->queues = strtoll(PQgetvalue(r, 0, 4), NULL, 10);
    out->queue_due_s = atof(PQgetvalue(r, 0, 5));
    PQclear(r);
    return DB_OK;
}

enum db_status db_resources_summary(struct db_pool *pool, struct db_resources_summary *out,
                                    struct db_error *err)
{
    memset(out, 0, sizeof(*out));
    return db_tx_run(pool, DB_READ_COMMITTED, summary_tx, out, err);
}
