/* The conformance cases of operator cancel and of batch completion (see queue_conformance.h):
 * like the rest of the table (queue_conformance.c, which runs them), written against struct
 * qc_impl only, and asserting per retention what a cancel or a repeated settlement answers. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "queue_conformance_case.h"

static enum qc_outcome job_cancel(const struct env *e, int64_t id)
{
    return e->impl->cancel(e->impl->ctx, e->queue, id);
}

#define EXPECT_CANCELLED(e, id) expect_cancelled((e), (id), __LINE__)
#define EXPECT_BATCH(e, owner, items, n, want)                                                     \
    expect_batch((e), (owner), (items), (n), (want), __LINE__)

/* A cancelled job, while kept, reads as marked cancelled (nothing to read once deleted). */
static void expect_cancelled(const struct env *e, int64_t id, int line)
{
    if (e->retention == QC_DELETED)
        return;
    struct qc_job j;
    qc_read_job(e, id, &j, line);
    if (!j.cancelled)
        print_error("job %" PRId64 " (%s) does not read as cancelled\n", id, j.state);
    _assert_true(j.cancelled, "cancelled", __FILE__, line);
}

/* One batch completion of owner's n items is accepted, and item i answered want[i]; every wrong
 * answer is reported before the case fails. */
static void expect_batch(const struct env *e, const char *owner, struct qc_settle *items, size_t n,
                         const enum qc_outcome *want, int line)
{
    for (size_t i = 0; i < n; i++)
        items[i].outcome = QC_ERROR;
    enum qc_outcome o = e->impl->complete_batch(e->impl->ctx, e->queue, owner, items, n);
    if (o != QC_OK) {
        print_error("batch completion of %zu items as %s answered %s\n", n, owner,
                    qc_outcome_name(o));
        _fail(__FILE__, line);
    }
    int wrong = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].outcome == want[i])
            continue;
        print_error("batch item %zu (job %" PRId64 ", fence %" PRId64 "): got %s, want %s\n", i,
                    items[i].job_id, items[i].fence, qc_outcome_name(items[i].outcome),
                    qc_outcome_name(want[i]));
        wrong++;
    }
    if (wrong > 0)
        _fail(__FILE__, line);
}

/* The state a cancelled job reads while kept. */
static const char *cancelled_state(const struct env *e)
{
    return e->impl->cancelled_state ? "cancelled" : "failed";
}

/* What its holder's writes get once an operator cancelled it. */
static enum qc_outcome cancelled_refusal(const struct env *e)
{
    if (e->retention != QC_KEPT)
        return QC_NOT_FOUND;
    return e->impl->cancelled_state ? QC_CANCELLED : QC_TERMINAL;
}

/* Cancel of a pending job ends it without spending an attempt: it reads cancelled while kept,
 * not found once deleted, and is not claimable. */
void qc_case_cancel_pending(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    EXPECT(job_cancel(e, id), QC_OK);
    EXPECT_FINAL(e, id, cancelled_state(e), 0, ANY_FENCE);
    EXPECT_CANCELLED(e, id);
    CLAIM_NONE(e, "worker-a");
}

/* Cancel of a processing job ends the running attempt as failed: every write of its holder,
 * heartbeat and complete first, is then refused (as cancelled while kept, not found once
 * deleted) and the job is not claimable. */
void qc_case_cancel_processing(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(job_cancel(e, id), QC_OK);
    EXPECT_WRITES(e, id, "worker-a", a.fence, W_ALL, cancelled_refusal(e));
    EXPECT_FINAL(e, id, cancelled_state(e), 1, a.fence);
    EXPECT_CANCELLED(e, id);
    CLAIM_NONE(e, "worker-b");
    if (e->retention == QC_DELETED)
        return;
    struct qc_job j;
    READ_JOB(e, id, &j);
    assert_int_equal(j.nhistory, 1);
    EXPECT_ATTEMPT(&j, 0, 1, a.fence, "worker-a", "failed");
}

/* Cancel of a finished job (completed, or already cancelled) is refused (terminal while kept,
 * not found once deleted) and changes nothing: the completed job still reads succeeded. */
void qc_case_cancel_finished(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t done = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(qc_lease_complete(e, done, "worker-a", a.fence), QC_OK);
    EXPECT(job_cancel(e, done), qc_ended(e));
    EXPECT_FINAL(e, done, "succeeded", 1, a.fence);
    if (e->retention == QC_KEPT) {
        struct qc_job j;
        READ_JOB(e, done, &j);
        assert_false(j.cancelled);
    }
    int64_t cancelled = qc_job_add(e);
    EXPECT(job_cancel(e, cancelled), QC_OK);
    EXPECT(job_cancel(e, cancelled), qc_ended(e));
    EXPECT_FINAL(e, cancelled, cancelled_state(e), 0, ANY_FENCE);
}

/* A batch completion answers each item on its own: of three live leases, the item with a wrong
 * fence is refused as a fence mismatch and changes nothing while the other two complete; the
 * same batch again is refused per item (the completed ones terminal while kept, not found once
 * deleted; the stale fence still a mismatch); then the right fence completes the third. */
void qc_case_batch_complete(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    for (int i = 0; i < 3; i++)
        qc_job_add(e);
    struct qc_lease l[3];
    assert_int_equal(CLAIM(e, "worker-a", 3, 0, l), 3);
    struct qc_settle items[3];
    for (int i = 0; i < 3; i++)
        items[i] = (struct qc_settle){l[i].job_id, l[i].fence + (i == 1), QC_ERROR};
    const enum qc_outcome first[] = {QC_OK, QC_FENCE_MISMATCH, QC_OK};
    EXPECT_BATCH(e, "worker-a", items, 3, first);
    EXPECT_FINAL(e, l[0].job_id, "succeeded", 1, l[0].fence);
    EXPECT_JOB(e, l[1].job_id, "processing", 1, l[1].fence);
    EXPECT_FINAL(e, l[2].job_id, "succeeded", 1, l[2].fence);
    const enum qc_outcome again[] = {qc_ended(e), QC_FENCE_MISMATCH, qc_ended(e)};
    EXPECT_BATCH(e, "worker-a", items, 3, again);
    EXPECT_JOB(e, l[1].job_id, "processing", 1, l[1].fence);
    items[0] = (struct qc_settle){l[1].job_id, l[1].fence, QC_ERROR};
    const enum qc_outcome right[] = {QC_OK};
    EXPECT_BATCH(e, "worker-a", items, 1, right);
    EXPECT_FINAL(e, l[1].job_id, "succeeded", 1, l[1].fence);
    if (e->retention == QC_KEPT) {
        struct qc_job j;
        READ_JOB(e, l[1].job_id, &j);
        EXPECT_ATTEMPT(&j, 0, 1, l[1].fence, "worker-a", "completed");
    }
}
