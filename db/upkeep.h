/* What /metrics says of all topics, queues and ledgers at once, whatever their number: how many
 * there are and how long the janitor's oldest due upkeep has waited (rowlock.topic_upkeep,
 * queue_upkeep, ledger_upkeep), in one statement. */
#ifndef DB_UPKEEP_H
#define DB_UPKEEP_H

#include <stdint.h>

#include "db/db.h"

struct db_pool;
struct db_conn;

struct db_resources_summary {
    int64_t topics, ledgers, queues;
    /* seconds the longest-waiting due upkeep has been due (0: nothing due) */
    double topic_due_s, ledger_due_s, queue_due_s;
};
enum db_status db_resources_summary(struct db_pool *pool, struct db_resources_summary *out,
                                    struct db_error *err);

/* Cuts a scrape's count off after budget (ms, as text; "" or NULL: the connection's own
 * statement_timeout) for the rest of c's transaction: what a slow gauge costs a scrape
 * (service/gauge_cache.h). The cut statement fails with DB_ERR_TIMEOUT. */
enum db_status db_metrics_budget(struct db_conn *c, const char *budget, struct db_error *err);

#endif
