/* Combining concurrent calls into one transaction (group commit for workflows). Callers of one
 * workflow on one queue of one pool that arrive while such a call runs wait, and the first of
 * them then runs one transaction for all that waited: one statement, one COMMIT and one WAL
 * flush instead of one each, and claimers no longer skip each other's locked rows. Waiting
 * callers hold their thread but no pool connection.
 *
 * Nothing here is needed for correctness: rowlock processes never share this state, and a
 * combined transaction must give each caller what a transaction of its own could have (the
 * workflow's run function is where that is argued). A caller alone runs alone. */
#ifndef DB_COMBINE_H
#define DB_COMBINE_H

#include <pthread.h>
#include <stddef.h>

struct db_pool;

/* One caller's part of a combined call. The workflow's own arguments and results hang off arg;
 * weight is what it adds to the batch (jobs claimed, leases settled). */
struct db_combine_req {
    struct db_combine_req *next;
    const struct db_pool *pool;
    const char *queue;
    size_t weight;
    void *arg;
    int taken, done;     /* in a batch; answered. Under the combiner's mutex */
    pthread_cond_t cond; /* signalled when answered, or when it may lead */
};

/* Runs one transaction for batch[0..n) (all on one pool and queue) and sets every caller's
 * results in its arg. */
typedef void (*db_combine_fn)(struct db_pool *pool, struct db_combine_req **batch, size_t n);

#define DB_COMBINE_RUNNING_MAX 64
#define DB_COMBINE_BATCH_MAX   32

struct db_combiner {
    pthread_mutex_t mutex;
    struct db_combine_req *head, *tail; /* waiting, oldest first */
    /* the (pool, queue) pairs whose batch is running now */
    const struct db_combine_req *running[DB_COMBINE_RUNNING_MAX];
    size_t per_key;    /* batches of one key that may run at once */
    size_t max_weight; /* a batch takes callers in order while their weights fit */
    size_t max_batch;  /* and at most this many callers (<= DB_COMBINE_BATCH_MAX) */
    /* counters, under the mutex: calls, and the transactions that ran them */
    unsigned long long calls, batches;
};

#define DB_COMBINER_INIT(per_key, weight, batch)                                                   \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, NULL, NULL, {NULL}, (per_key), (weight), (batch), 0, 0          \
    }

/* Runs req through cb: returns once run has set req's results, whether this caller ran the
 * batch or another did. pool and queue are req's. */
void db_combine(struct db_combiner *cb, struct db_pool *pool, struct db_combine_req *req,
                db_combine_fn run);

/* Calls and the transactions that ran them, so far. */
void db_combine_counts(struct db_combiner *cb, unsigned long long *calls,
                       unsigned long long *batches);

#endif
