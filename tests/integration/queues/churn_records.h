/* The verdict on a churned leased queue from its workers' own records, for test_queue_claim_
 * exclusive: what each claim handed out, which settlements were accepted, which leases a worker
 * let go unsettled. It needs nothing from the database, so it holds for a queue that deletes
 * its jobs as they end (their rows and history gone) as well as for one that keeps them; the
 * database's own view of a kept queue is queue_verdict.h's. */
#ifndef TESTS_CHURN_RECORDS_H
#define TESTS_CHURN_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "queue_verdict.h"

/* What the workers saw: logs of (job, fence, owner), each appended to by any thread. */
struct cr_records {
    struct qv_log claims;    /* every lease a claim handed out */
    struct qv_log completed; /* every complete accepted */
    struct qv_log failed;    /* every fail accepted that ended the job (answered state failed) */
    struct qv_log dropped;   /* leases their worker let go unsettled: it died or stalled holding
                              * them, or a write to them was refused */
};
#define CR_RECORDS_INIT                                                                            \
    {                                                                                              \
        QV_LOG_INIT, QV_LOG_INIT, QV_LOG_INIT, QV_LOG_INIT                                         \
    }
void cr_records_free(struct cr_records *r);

/* How a job ended, by the records. */
enum cr_end {
    CR_COMPLETED, /* a complete of its last lease accepted */
    CR_FAILED,    /* a final fail of its last lease accepted */
    CR_EXPIRED,   /* its last lease let go: with no attempt left, the janitor failed it */
    CR_BROKEN,    /* a rule broken (qv_problem said which) */
};

struct cr_verdict {
    int completed, failed, expired; /* jobs that ended so */
    int bad_jobs;                   /* jobs that broke a rule */
    size_t strays; /* claims, completes and final fails that are no job's (of another job, or an
                    * accepted settlement that was not its job's one end) */
};

/* Checks the n jobs ids (as enqueued; ends, n entries or NULL, gets how each ended), once no job
 * is pending or processing, against the records (sorting the logs): a job's claims carry the
 * fences 1, 2, .. k, each once (no lease handed out twice, none unseen); it ended exactly once:
 * one accepted complete or final fail, of its last lease (fence k, that claim's owner: nothing
 * claimed it after it ended), or else that lease was let go; and no record is of another job. */
struct cr_verdict cr_check(struct cr_records *r, const int64_t *ids, size_t n, enum cr_end *ends);

#endif
