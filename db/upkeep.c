/* The janitor's upkeep protocol for every family, and the summary of all families for /metrics
 * (see upkeep.h). What a visit does to a resource is its family's. */
#include "db/upkeep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/sql.h"
#include "db/tx.h"

static const struct db_stmt st_summary = {
    "resources_summary",
    "SELECT family, count(*), coalesce(extract(epoch FROM now() - min(due_at) "
    "  FILTER (WHERE due_at <= now())), 0) FROM rowlock.upkeep GROUP BY family ORDER BY family",
    0};

/* A resource whose visit failed is due again at once. */
static const struct db_stmt st_retry = {
    "upkeep_retry",
    "UPDATE rowlock.upkeep SET due_at = now() WHERE family = $1 AND resource_id = $2::bigint", 2};

static const struct db_stmt st_metrics_budget = {
    "metrics_budget", "SELECT set_config('statement_timeout', $1, true)", 1};

enum db_status db_metrics_budget(struct db_conn *c, const char *budget, struct db_error *err)
{
    if (budget == NULL || budget[0] == '\0')
        return DB_OK;
    const char *params[] = {budget};
    return db_query(c, &st_metrics_budget, params, NULL, err);
}

/* Makes resource id of family due again at once, the outcome ignored: when this fails too, the
 * claim's lease runs out instead. */
static void retry(struct db_pool *pool, const char *family, const char *id)
{
    const char *params[] = {family, id};
    PGresult *rows = NULL;
    struct db_error err;
    db_tx_query(pool, &st_retry, params, &rows, &err);
    PQclear(rows);
}

/* One claim of u's due resources and their visits; *claimed how many. */
static enum db_status upkeep_round(struct db_pool *pool, const struct db_upkeep *u, void *ctx,
                                   int *claimed, struct db_error *err)
{
    char limit[DB_INT_TEXT], lease[DB_INT_TEXT];
    snprintf(limit, sizeof(limit), "%d", DB_UPKEEP_CLAIM);
    snprintf(lease, sizeof(lease), "%d", DB_UPKEEP_LEASE_S);
    const char *params[] = {limit, lease};
    PGresult *rows = NULL;
    enum db_status st = db_tx_query(pool, u->claim, params, &rows, err);
    *claimed = st == DB_OK ? PQntuples(rows) : 0;
    /* one short transaction per resource: a slow one never holds up the others' locks, and a
     * failing one never stops the others' upkeep */
    for (int i = 0; i < *claimed; i++)
        if (u->visit(pool, rows, i, ctx) != DB_OK)
            retry(pool, u->family, PQgetvalue(rows, i, 0));
    PQclear(rows);
    return st;
}

enum db_status db_upkeep_run(struct db_pool *pool, const struct db_upkeep *u, void *ctx,
                             struct db_error *err)
{
    enum db_status st = DB_OK;
    int claimed = DB_UPKEEP_CLAIM;
    for (int round = 0; st == DB_OK && claimed == DB_UPKEEP_CLAIM && round < DB_UPKEEP_ROUNDS;
         round++)
        st = upkeep_round(pool, u, ctx, &claimed, err);
    return st;
}

enum db_status db_resources_summary(struct db_pool *pool, struct db_resources_summary *out,
                                    struct db_error *err)
{
    memset(out, 0, sizeof(*out));
    PGresult *rows = NULL;
    enum db_status st = db_tx_query(pool, &st_summary, NULL, &rows, err);
    for (int i = 0; st == DB_OK && i < PQntuples(rows) && i < DB_UPKEEP_FAMILIES_MAX; i++) {
        struct db_upkeep_family *f = &out->families[out->n++];
        db_copy(f->family, sizeof(f->family), PQgetvalue(rows, i, 0));
        f->resources = strtoll(PQgetvalue(rows, i, 1), NULL, 10);
        f->due_s = atof(PQgetvalue(rows, i, 2));
    }
    PQclear(rows);
    return st;
}

const struct db_upkeep_family *db_resources_family(const struct db_resources_summary *s,
                                                   const char *family)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->families[i].family, family) == 0)
            return &s->families[i];
    return NULL;
}
