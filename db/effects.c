/* Completion effects (see effects.h): the enqueues and produces a write carries, applied in its
 * transaction by the in-transaction forms of the enqueue and produce workflows, so that each is
 * what it would be on its own route, and commits with the write. */
#include "db/effects.h"

enum db_status db_effects_apply(struct db_conn *c, struct db_effects *fx, struct db_error *err)
{
    fx->refused = DB_FX_OK;
    fx->applied = 0;
    for (size_t g = 0; g < fx->njobs; g++) {
        struct db_fx_jobs *j = &fx->jobs[g];
        enum db_queue_verdict v = DB_Q_QUEUE_NOT_FOUND;
        enum db_status st =
            db_jobs_enqueue_in(c, j->queue, j->jobs, j->n, j->out, &j->refusal, &v, err);
        if (st == DB_OK && v == DB_Q_OK)
            continue;
        if (st != DB_OK && st != DB_ABORTED)
            return st;
        fx->group = g;
        fx->job_verdict = v;
        fx->refused = v == DB_Q_QUEUE_NOT_FOUND ? DB_FX_QUEUE_NOT_FOUND : DB_FX_JOBS_REFUSED;
        return DB_ABORTED;
    }
    for (size_t g = 0; g < fx->nmsgs; g++) {
        struct db_fx_messages *m = &fx->msgs[g];
        enum db_topic_verdict v = DB_TOPIC_NOT_FOUND;
        enum db_status st =
            db_topics_produce_in(c, m->topic, m->producer, m->msgs, m->n, m->out, &v, err);
        if (st == DB_OK && v == DB_TOPIC_OK)
            continue;
        if (st != DB_OK && st != DB_ABORTED)
            return st;
        fx->group = g;
        fx->refused =
            v == DB_TOPIC_PRODUCER_NOT_FOUND ? DB_FX_PRODUCER_NOT_FOUND : DB_FX_TOPIC_NOT_FOUND;
        return DB_ABORTED;
    }
    fx->applied = 1;
    return DB_OK;
}
