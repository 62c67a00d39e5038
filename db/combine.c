/* Combining concurrent calls into one transaction (see combine.h). */
#include "db/combine.h"

#include <string.h>

static int same_key(const struct db_combine_req *a, const struct db_combine_req *b)
{
    return a->pool == b->pool && strcmp(a->queue, b->queue) == 0;
}

/* How many batches of req's key run now. */
static size_t running_of(const struct db_combiner *cb, const struct db_combine_req *req)
{
    size_t n = 0;
    for (int i = 0; i < DB_COMBINE_RUNNING_MAX; i++)
        n += cb->running[i] != NULL && same_key(cb->running[i], req);
    return n;
}

static int free_slot(const struct db_combiner *cb)
{
    for (int i = 0; i < DB_COMBINE_RUNNING_MAX; i++)
        if (cb->running[i] == NULL)
            return i;
    return -1;
}

/* Unlinks r, which is on the waiting list after prev (NULL: at its head). */
static void unlink_req(struct db_combiner *cb, struct db_combine_req *prev,
                       struct db_combine_req *r)
{
    if (prev != NULL)
        prev->next = r->next;
    else
        cb->head = r->next;
    if (cb->tail == r)
        cb->tail = prev;
    r->next = NULL;
}

/* Makes lead's batch: lead, then the other waiting callers of its key, oldest first, while
 * they fit (the first that does not fit ends it, so that they keep their order). Unlinks them
 * from the waiting list. Returns how many. */
static size_t take_batch(struct db_combiner *cb, struct db_combine_req *lead,
                         struct db_combine_req **batch)
{
    struct db_combine_req *prev = NULL;
    for (struct db_combine_req *r = cb->head; r != lead; r = r->next)
        prev = r;
    unlink_req(cb, prev, lead);
    size_t n = 0, weight = lead->weight;
    batch[n++] = lead;
    lead->taken = 1;
    prev = NULL;
    for (struct db_combine_req *r = cb->head, *next; r != NULL && n < cb->max_batch; r = next) {
        next = r->next;
        if (!same_key(r, lead)) {
            prev = r;
            continue;
        }
        if (weight + r->weight > cb->max_weight)
            break;
        unlink_req(cb, prev, r);
        batch[n++] = r;
        r->taken = 1;
        weight += r->weight;
    }
    return n;
}

/* Whether a batch of req's key may start now; *slot gets the running slot it would take. */
static int may_lead(const struct db_combiner *cb, const struct db_combine_req *req, int *slot)
{
    return running_of(cb, req) < cb->per_key && (*slot = free_slot(cb)) >= 0;
}

/* Wakes the oldest waiting caller of each key that may lead a batch now (a waiting caller is
 * woken only to lead or once answered, not by every batch that ends). */
static void wake_leaders(struct db_combiner *cb)
{
    for (struct db_combine_req *r = cb->head; r != NULL; r = r->next) {
        int first = 1, slot;
        for (const struct db_combine_req *e = cb->head; e != r && first; e = e->next)
            first = !same_key(e, r);
        if (first && may_lead(cb, r, &slot))
            pthread_cond_signal(&r->cond);
    }
}

void db_combine(struct db_combiner *cb, struct db_pool *pool, struct db_combine_req *req,
                db_combine_fn run)
{
    req->pool = pool;
    req->next = NULL;
    req->done = 0;
    req->taken = 0;
    pthread_cond_init(&req->cond, NULL);
    pthread_mutex_lock(&cb->mutex);
    cb->calls++;
    if (cb->tail != NULL)
        cb->tail->next = req;
    else
        cb->head = req;
    cb->tail = req;
    int slot = -1;
    /* wait until another's batch has run this caller, or this caller may lead one */
    while (!req->done && (req->taken || !may_lead(cb, req, &slot)))
        pthread_cond_wait(&req->cond, &cb->mutex);
    if (req->done) {
        pthread_mutex_unlock(&cb->mutex);
        pthread_cond_destroy(&req->cond);
        return;
    }
    struct db_combine_req *batch[DB_COMBINE_BATCH_MAX];
    size_t n = take_batch(cb, req, batch);
    cb->running[slot] = req;
    cb->batches++;
    pthread_mutex_unlock(&cb->mutex);

    run(pool, batch, n);

    pthread_mutex_lock(&cb->mutex);
    for (size_t i = 0; i < n; i++) {
        batch[i]->done = 1;
        if (batch[i] != req)
            pthread_cond_signal(&batch[i]->cond);
    }
    cb->running[slot] = NULL;
    wake_leaders(cb);
    pthread_mutex_unlock(&cb->mutex);
    pthread_cond_destroy(&req->cond);
}

void db_combine_counts(struct db_combiner *cb, unsigned long long *calls,
                       unsigned long long *batches)
{
    pthread_mutex_lock(&cb->mutex);
    *calls = cb->calls;
    *batches = cb->batches;
    pthread_mutex_unlock(&cb->mutex);
}
