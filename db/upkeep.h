/* The janitor's upkeep protocol, written once for every resource family: rowlock.upkeep holds
 * when each resource's upkeep is next due (one row per resource, kept by triggers on its
 * family's catalogue table, migration 13); a pass claims a family's due rows, visits each
 * resource in a transaction of its own and sets when it is next due. What a visit does is its
 * family's (db/topics.c, db/queue_upkeep.c, db/ledger_upkeep.c). Also the summary of every
 * family for /metrics, and the budget of a scrape's counts. */
#ifndef DB_UPKEEP_H
#define DB_UPKEEP_H

#include <stdint.h>

#include "db/db.h"

struct db_pool;
struct db_conn;

/* A claim takes at most DB_UPKEEP_CLAIM due resources and moves their due time
 * DB_UPKEEP_LEASE_S seconds on while this process works on them (so that other processes skip
 * them, and a process that dies in the middle leaves them due again then). */
#define DB_UPKEEP_CLAIM   1000
#define DB_UPKEEP_LEASE_S 60
/* A pass claims again while a claim comes back full, at most this many times. */
#define DB_UPKEEP_ROUNDS  10
#define DB_UPKEEP_TEXT(x) #x
#define DB_UPKEEP_SQL(x)  DB_UPKEEP_TEXT(x) /* DB_UPKEEP_LEASE_S as SQL text */

/* The claim of family's due resources ($1 how many, $2 seconds of lease), joined with the
 * family's catalogue table (rowlock.<catalog> r): returns r.id, r.name, then columns (SQL of r's
 * columns the visit needs). */
/* clang-format off */
#define DB_UPKEEP_CLAIM_SQL(family, catalog, columns) \
    "UPDATE rowlock.upkeep u SET due_at = now() + make_interval(secs => $2::float8) " \
    "FROM rowlock." catalog " r WHERE u.family = '" family "' AND r.id = u.resource_id " \
    "AND u.resource_id IN (SELECT resource_id FROM rowlock.upkeep WHERE family = '" family "' " \
    "  AND due_at <= now() ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED) " \
    "RETURNING r.id, r.name, " columns
/* A visit's last statement: sets when resource `id` (SQL of its id, a parameter) of family is
 * next due (next: its SQL expression). A write that made the resource due again while the visit
 * ran (a new TTL or retention: its trigger set due_at to now(), before half the lease the claim
 * set, DB_UPKEEP_LEASE_S on) keeps its earlier time, which the visit, working from the settings
 * it claimed with, must not push back (up to an hour). */
#define DB_UPKEEP_SET_NEXT_SQL(family, id, next) \
    "UPDATE rowlock.upkeep SET due_at = CASE WHEN due_at < now() + make_interval(secs => " \
    DB_UPKEEP_SQL(DB_UPKEEP_LEASE_S) " / 2) THEN due_at ELSE (" next ") END " \
    "WHERE family = '" family "' AND resource_id = " id
/* clang-format on */

/* One family's upkeep, for db_upkeep_run. */
struct db_upkeep {
    const char *family;          /* rowlock.upkeep.family: the family's name ("topics") */
    const struct db_stmt *claim; /* DB_UPKEEP_CLAIM_SQL of the family */
    /* Visits the resource of row `row` of claimed (the claim's result), in transactions of its
     * own, and reports what it did to its caller through ctx. Returns DB_OK, or a failure:
     * the resource is then due again at once (the next pass tries it again). */
    enum db_status (*visit)(struct db_pool *pool, const PGresult *claimed, int row, void *ctx);
};

/* A janitor pass over u's family: claims of due resources, each visited, repeated while a claim
 * comes back full (at most DB_UPKEEP_ROUNDS times). DB_OK, or the status of the claim that
 * failed (err set); a visit's failure is the visit's to report. */
enum db_status db_upkeep_run(struct db_pool *pool, const struct db_upkeep *u, void *ctx,
                             struct db_error *err);

/* What /metrics says of one family's resources, whatever their number. */
struct db_upkeep_family {
    char family[64];
    int64_t resources; /* how many (one upkeep row each) */
    double due_s;      /* how long the longest-waiting due upkeep has been due (0: none) */
};
#define DB_UPKEEP_FAMILIES_MAX 16
struct db_resources_summary {
    int n;
    struct db_upkeep_family families[DB_UPKEEP_FAMILIES_MAX];
};
/* Every family's row, in one statement. A family without resources has no row. */
enum db_status db_resources_summary(struct db_pool *pool, struct db_resources_summary *out,
                                    struct db_error *err);
/* The row of family in s, or NULL when it has no resources. */
const struct db_upkeep_family *db_resources_family(const struct db_resources_summary *s,
                                                   const char *family);

/* Cuts a scrape's count off after budget (ms, as text; "" or NULL: the connection's own
 * statement_timeout) for the rest of c's transaction: what a slow gauge costs a scrape
 * (service/gauge_cache.h). The cut statement fails with DB_ERR_TIMEOUT. */
enum db_status db_metrics_budget(struct db_conn *c, const char *budget, struct db_error *err);

#endif
