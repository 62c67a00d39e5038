/* Completion effects: the jobs to enqueue and the messages to produce that a fenced completion
 * (db/leases.c) or a consumer's commit (db/topic_consumers.c) carries, applied inside that
 * write's transaction after it applied, so that they commit with it or not at all. */
#ifndef DB_EFFECTS_H
#define DB_EFFECTS_H

#include <stddef.h>

#include "db/queues.h"
#include "db/topics.h"

/* The jobs for one queue, as db_jobs_enqueue takes them (parents by id, or by index in this
 * group); out: each job's id (out has n entries) and, on a refusal, its parent. */
struct db_fx_jobs {
    const char *queue;
    const struct db_job_in *jobs;
    size_t n;
    struct db_job_ref *out;
    struct db_dep_refusal refusal;
};

/* The messages for one topic under one producer (NULL: the default), as db_producer_produce
 * takes them; out has n entries. */
struct db_fx_messages {
    const char *topic, *producer;
    const struct db_message_in *msgs;
    size_t n;
    struct db_message_out *out;
};

/* Why effects were refused: nothing of the write that carried them is committed. */
enum db_fx_refusal {
    DB_FX_OK,
    DB_FX_QUEUE_NOT_FOUND,
    DB_FX_TOPIC_NOT_FOUND,
    DB_FX_PRODUCER_NOT_FOUND,
    DB_FX_JOBS_REFUSED, /* the group's enqueue: job_verdict (a bad value, a parent's refusal) */
};

struct db_effects {
    struct db_fx_jobs *jobs;
    size_t njobs;
    struct db_fx_messages *msgs;
    size_t nmsgs;
    /* out */
    int applied; /* applied, to commit with the write (a consumer's commit that moved nothing
                  * applies none) */
    enum db_fx_refusal refused;
    size_t group; /* the group refused (of jobs or msgs, by refused) */
    enum db_queue_verdict job_verdict;
};

/* Applies fx in the caller's transaction, never committing it: each group of jobs enqueued into
 * its queue, then each group of messages produced. DB_ABORTED (roll back) with fx->refused set
 * when one cannot be applied. */
enum db_status db_effects_apply(struct db_conn *c, struct db_effects *fx, struct db_error *err);

/* A fenced completion (db_leases_complete) carrying fx: one transaction; refused by the fence,
 * nothing of fx is applied (verdict says why); fx refused, the completion is not either (the
 * lease is still held, verdict DB_Q_OK and fx->refused set). */
enum db_status db_leases_complete_fx(struct db_pool *pool, const char *queue,
                                     const struct db_lease *l, const char *result,
                                     struct db_effects *fx, enum db_queue_verdict *verdict,
                                     struct db_error *err);

#endif
