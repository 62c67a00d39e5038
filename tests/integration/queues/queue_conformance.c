/* The leased-queue conformance cases (see queue_conformance.h): each row of the table states one
 * rule of the protocol and asserts it through struct qc_impl only (outcomes, states, attempts,
 * fences, history), never through SQL or HTTP; the runner makes the table one cmocka group per
 * retention. On a queue that deletes finished jobs, a job that reaches a final state reads, and
 * is written to, as not found; so a case checks the history before the attempt that ends the
 * job, and what it asserts of the end depends on the retention (EXPECT_FINAL, qc_ended). Expiry
 * cases take short leases and wait them out, since expiry is wall-clock protocol. No case leaves
 * an expired lease without attempts left: only a janitor decides that one. */
#include "queue_conformance.h"
#include "queue_conformance_case.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

const char *qc_outcome_name(enum qc_outcome o)
{
    static const char *const names[] = {
        "ok",       "owner_mismatch", "fence_mismatch", "lease_expired",
        "terminal", "cancelled",      "not_found",      "error"};
    return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "unknown";
}

const char *qc_retention_name(enum qc_retention r)
{
    return r == QC_KEPT ? "kept" : "deleted";
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

#define EXPECT_SAME_JOB(a, b) expect_same_job((a), (b), __LINE__)

/* ---- the protocol calls, on the case's queue ---- */

static enum qc_outcome lease_heartbeat(const struct env *e, int64_t id, const char *owner,
                                       int64_t fence, int lease_s)
{
    return e->impl->heartbeat(e->impl->ctx, e->queue, id, owner, fence, lease_s);
}

enum qc_outcome qc_lease_complete(const struct env *e, int64_t id, const char *owner, int64_t fence)
{
    return e->impl->complete(e->impl->ctx, e->queue, id, owner, fence);
}

static enum qc_outcome lease_fail(const struct env *e, int64_t id, const char *owner, int64_t fence,
                                  int retry)
{
    return e->impl->fail_lease(e->impl->ctx, e->queue, id, owner, fence, retry);
}

static enum qc_outcome lease_handback(const struct env *e, int64_t id, const char *owner,
                                      int64_t fence)
{
    return e->impl->handback(e->impl->ctx, e->queue, id, owner, fence);
}

static enum qc_outcome lease_release(const struct env *e, int64_t id, const char *owner,
                                     int64_t fence)
{
    return e->impl->release(e->impl->ctx, e->queue, id, owner, fence);
}

/* ---- assertions, reported at the case's line ---- */

void qc_expect_outcome(enum qc_outcome got, enum qc_outcome want, const char *what, int line)
{
    if (got == want)
        return;
    print_error("%s: got %s, want %s\n", what, qc_outcome_name(got), qc_outcome_name(want));
    _fail(__FILE__, line);
}

void qc_queue_create(struct env *e, int max_attempts, int lease_s, double backoff_base_s,
                     double backoff_max_s)
{
    EXPECT(e->impl->create_queue(e->impl->ctx, e->queue, e->retention, max_attempts, lease_s,
                                 backoff_base_s, backoff_max_s),
           QC_OK);
}

/* Enqueues one job; *duplicate (may be NULL: then it must be a new job) says whether it was. */
static int64_t job_add_full(struct env *e, const char *dedupe_key, double delay_s, int priority,
                            int *duplicate)
{
    char payload[64];
    snprintf(payload, sizeof(payload), "{\"n\": %d}", ++e->payloads);
    int64_t id = 0;
    int dup = -1;
    EXPECT(
        e->impl->enqueue(e->impl->ctx, e->queue, payload, dedupe_key, delay_s, priority, &id, &dup),
        QC_OK);
    assert_true(id > 0);
    if (duplicate != NULL)
        *duplicate = dup;
    else
        assert_int_equal(dup, 0);
    return id;
}

int64_t qc_job_add(struct env *e)
{
    return job_add_full(e, NULL, 0, 0, NULL);
}

size_t qc_claim_jobs(const struct env *e, const char *owner, int max_jobs, int lease_s,
                     struct qc_lease *out, int line)
{
    size_t n = (size_t)-1;
    enum qc_outcome o = e->impl->claim(e->impl->ctx, e->queue, owner, max_jobs, lease_s, out, &n);
    if (o != QC_OK) {
        print_error("claim for %s answered %s\n", owner, qc_outcome_name(o));
        _fail(__FILE__, line);
    }
    _assert_true(n <= (size_t)max_jobs, "n <= max_jobs", __FILE__, line);
    return n;
}

struct qc_lease qc_claim_one(const struct env *e, const char *owner, int lease_s, int line)
{
    struct qc_lease l = {0, 0, 0};
    size_t n = qc_claim_jobs(e, owner, 1, lease_s, &l, line);
    if (n != 1)
        print_error("claim for %s got %zu jobs, want 1\n", owner, n);
    _assert_int_equal(n, 1, __FILE__, line);
    return l;
}

void qc_claim_none(const struct env *e, const char *owner, int line)
{
    struct qc_lease l[4];
    size_t n = qc_claim_jobs(e, owner, 4, LONG_LEASE_S, l, line);
    if (n != 0)
        print_error("claim for %s got job %" PRId64 " (attempt %d), want none\n", owner,
                    l[0].job_id, l[0].attempt);
    _assert_int_equal(n, 0, __FILE__, line);
}

void qc_read_job(const struct env *e, int64_t id, struct qc_job *j, int line)
{
    memset(j, 0, sizeof(*j));
    enum qc_outcome o = e->impl->get_job(e->impl->ctx, e->queue, id, j);
    if (o != QC_OK) {
        print_error("reading job %" PRId64 " answered %s\n", id, qc_outcome_name(o));
        _fail(__FILE__, line);
    }
}

void qc_expect_job(const struct env *e, int64_t id, const char *state, int attempts, int64_t fence,
                   int line)
{
    struct qc_job j;
    qc_read_job(e, id, &j, line);
    if (fence == ANY_FENCE)
        fence = j.fence;
    if (strcmp(j.state, state) != 0 || j.attempts != attempts || j.fence != fence)
        print_error("job %" PRId64 ": %s, attempts %d, fence %" PRId64 "; want %s, %d, %" PRId64
                    "\n",
                    id, j.state, j.attempts, j.fence, state, attempts, fence);
    _assert_string_equal(j.state, state, __FILE__, line);
    _assert_int_equal(j.attempts, attempts, __FILE__, line);
    _assert_int_equal(j.fence, fence, __FILE__, line);
}

/* A job that reached a final state: kept, it reads as state, attempts and fence (as
 * expect_job); deleted, it is not found. */
void qc_expect_final(const struct env *e, int64_t id, const char *state, int attempts,
                     int64_t fence, int line)
{
    if (e->retention == QC_KEPT) {
        qc_expect_job(e, id, state, attempts, fence, line);
        return;
    }
    struct qc_job j;
    memset(&j, 0, sizeof(j));
    enum qc_outcome o = e->impl->get_job(e->impl->ctx, e->queue, id, &j);
    if (o != QC_NOT_FOUND)
        print_error("job %" PRId64 " ended %s on a queue that keeps no finished job: reading it "
                    "answered %s (state \"%s\"), want not_found\n",
                    id, state, qc_outcome_name(o), j.state);
    _assert_int_equal(o, QC_NOT_FOUND, __FILE__, line);
}

/* How a write to a job that reached a final state is refused: terminal while the job is kept,
 * not found once it was deleted as it ended. */
enum qc_outcome qc_ended(const struct env *e)
{
    return e->retention == QC_KEPT ? QC_TERMINAL : QC_NOT_FOUND;
}

void qc_expect_attempt(const struct qc_job *j, size_t i, int attempt, int64_t fence,
                       const char *owner, const char *outcome, int line)
{
    _assert_true(i < j->nhistory && i < QC_HISTORY_MAX, "history entry exists", __FILE__, line);
    const struct qc_attempt *a = &j->history[i];
    if (a->attempt != attempt || a->fence != fence || strcmp(a->owner, owner) != 0 ||
        strcmp(a->outcome, outcome) != 0)
        print_error("history[%zu]: attempt %d, fence %" PRId64 ", %s, \"%s\"; want %d, %" PRId64
                    ", %s, \"%s\"\n",
                    i, a->attempt, a->fence, a->owner, a->outcome, attempt, fence, owner, outcome);
    _assert_int_equal(a->attempt, attempt, __FILE__, line);
    _assert_int_equal(a->fence, fence, __FILE__, line);
    _assert_string_equal(a->owner, owner, __FILE__, line);
    _assert_string_equal(a->outcome, outcome, __FILE__, line);
}

/* A refused write changes nothing the protocol shows. */
static void expect_same_job(const struct qc_job *a, const struct qc_job *b, int line)
{
    _assert_string_equal(b->state, a->state, __FILE__, line);
    _assert_int_equal(b->attempts, a->attempts, __FILE__, line);
    _assert_int_equal(b->fence, a->fence, __FILE__, line);
    _assert_int_equal(b->nhistory, a->nhistory, __FILE__, line);
    for (size_t i = 0; i < a->nhistory && i < QC_HISTORY_MAX; i++)
        _assert_string_equal(b->history[i].outcome, a->history[i].outcome, __FILE__, line);
}

static enum qc_outcome write_op(const struct env *e, unsigned op, int64_t id, const char *owner,
                                int64_t fence)
{
    switch (op) {
    case W_HEARTBEAT:
        return lease_heartbeat(e, id, owner, fence, 0);
    case W_COMPLETE:
        return qc_lease_complete(e, id, owner, fence);
    case W_FAIL_RETRY:
        return lease_fail(e, id, owner, fence, 1);
    case W_FAIL_FINAL:
        return lease_fail(e, id, owner, fence, 0);
    case W_HANDBACK:
        return lease_handback(e, id, owner, fence);
    default:
        return lease_release(e, id, owner, fence);
    }
}

/* Each write of ops, as owner with fence, answers want. Every write is tried and every wrong
 * answer reported before the case fails (a write wrongly accepted may change what the later
 * ones see). */
void qc_expect_writes(const struct env *e, int64_t id, const char *owner, int64_t fence,
                      unsigned ops, enum qc_outcome want, int line)
{
    static const char *const names[] = {"heartbeat",    "complete",  "fail (retry)",
                                        "fail (final)", "hand-back", "release"};
    int wrong = 0;
    for (unsigned k = 0; k < 6; k++) {
        if ((ops & (1u << k)) == 0)
            continue;
        enum qc_outcome got = write_op(e, 1u << k, id, owner, fence);
        if (got != want) {
            print_error("%s of job %" PRId64 " as %s with fence %" PRId64 ": got %s, want %s\n",
                        names[k], id, owner, fence, qc_outcome_name(got), qc_outcome_name(want));
            wrong++;
        }
    }
    if (wrong > 0)
        _fail(__FILE__, line);
}

/* ---- fenced writes refuse, and say why ---- */

/* Another owner presenting the right fence is refused by every write; the holder is not. */
static void case_owner_differs(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    struct qc_job before, after;
    READ_JOB(e, id, &before);
    EXPECT_WRITES(e, id, "worker-b", a.fence, W_ALL, QC_OWNER_MISMATCH);
    READ_JOB(e, id, &after);
    EXPECT_SAME_JOB(&before, &after);
    EXPECT_JOB(e, id, "processing", 1, a.fence);
    EXPECT(qc_lease_complete(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_FINAL(e, id, "succeeded", 1, a.fence);
}

/* The same owner re-claims its expired lease: every write with the old fence is refused as
 * stale and changes nothing; the new fence works. */
static void case_fence_differs(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease old = CLAIM_ONE(e, "worker-a", SHORT_LEASE_S);
    sleep_s(EXPIRY_WAIT_S);
    struct qc_lease cur = CLAIM_ONE(e, "worker-a", LONG_LEASE_S);
    assert_int_equal(cur.job_id, id);
    assert_int_equal(cur.fence, old.fence + 1);
    struct qc_job before, after;
    READ_JOB(e, id, &before);
    EXPECT_WRITES(e, id, "worker-a", old.fence, W_ALL, QC_FENCE_MISMATCH);
    READ_JOB(e, id, &after);
    EXPECT_SAME_JOB(&before, &after);
    EXPECT(lease_heartbeat(e, id, "worker-a", cur.fence, LONG_LEASE_S), QC_OK);
    EXPECT(qc_lease_complete(e, id, "worker-a", cur.fence), QC_OK);
    EXPECT_FINAL(e, id, "succeeded", 1, cur.fence);
}

/* Past its expiry the holder's heartbeat, complete and fail are refused and change nothing (a
 * takeover is already licensed); another owner may then take the job. */
static void case_lease_expired(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", SHORT_LEASE_S);
    sleep_s(EXPIRY_WAIT_S);
    struct qc_job before, after;
    READ_JOB(e, id, &before);
    EXPECT_WRITES(e, id, "worker-a", a.fence, W_FENCED, QC_LEASE_EXPIRED);
    READ_JOB(e, id, &after);
    EXPECT_SAME_JOB(&before, &after);
    EXPECT_JOB(e, id, "processing", 1, a.fence);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", LONG_LEASE_S);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.fence, a.fence + 1);
    EXPECT_WRITES(e, id, "worker-a", a.fence, W_FENCED, QC_OWNER_MISMATCH);
}

/* After complete, and after a final fail, every write of the last holder is refused (as
 * terminal while the job is kept; as not found once it was deleted as it ended), changes
 * nothing, and the job is not claimable. */
static void case_terminal(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t done = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(qc_lease_complete(e, done, "worker-a", a.fence), QC_OK);
    EXPECT_WRITES(e, done, "worker-a", a.fence, W_ALL, qc_ended(e));
    EXPECT_FINAL(e, done, "succeeded", 1, a.fence);
    int64_t failed = qc_job_add(e);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, failed);
    EXPECT(lease_fail(e, failed, "worker-b", b.fence, 0), QC_OK);
    EXPECT_WRITES(e, failed, "worker-b", b.fence, W_ALL, qc_ended(e));
    EXPECT_FINAL(e, failed, "failed", 1, b.fence);
    CLAIM_NONE(e, "worker-c");
}

/* A job that does not exist, or belongs to another queue, is not found by any write or read. */
static void case_not_found(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t mine = qc_job_add(e);
    struct qc_job j;
    EXPECT_WRITES(e, mine + NO_SUCH_JOB, "worker-a", 1, W_ALL, QC_NOT_FOUND);
    EXPECT(e->impl->get_job(e->impl->ctx, e->queue, mine + NO_SUCH_JOB, &j), QC_NOT_FOUND);
    struct env other = *e;
    snprintf(other.queue, sizeof(other.queue), "%.100s-other", e->queue);
    qc_queue_create(&other, 5, LONG_LEASE_S, 0, 0);
    int64_t theirs = qc_job_add(&other);
    struct qc_lease l = CLAIM_ONE(&other, "worker-a", 0);
    assert_int_equal(l.job_id, theirs);
    EXPECT_WRITES(e, theirs, "worker-a", l.fence, W_ALL, QC_NOT_FOUND);
    EXPECT(e->impl->get_job(e->impl->ctx, e->queue, theirs, &j), QC_NOT_FOUND);
    EXPECT_JOB(&other, theirs, "processing", 1, l.fence);
}

/* ---- giving a job back ---- */

/* Hand-back refunds the attempt: with max_attempts 1 the job is pending with no attempt spent
 * and another worker claims it at once. */
static void case_handback_refunds(struct env *e)
{
    qc_queue_create(e, 1, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    EXPECT_JOB(e, id, "pending", 0, ANY_FENCE);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    assert_int_equal(a.attempt, 1);
    EXPECT_JOB(e, id, "processing", 1, a.fence);
    EXPECT(lease_handback(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_JOB(e, id, "pending", 0, a.fence);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.attempt, 1);
    struct qc_job j;
    READ_JOB(e, id, &j);
    EXPECT_ATTEMPT(&j, 0, 1, a.fence, "worker-a", "handed_back");
}

/* Hand-back needs no live lease: after expiry it still refunds. */
static void case_handback_after_expiry(struct env *e)
{
    qc_queue_create(e, 2, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", SHORT_LEASE_S);
    sleep_s(EXPIRY_WAIT_S);
    EXPECT(lease_handback(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_JOB(e, id, "pending", 0, a.fence);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.attempt, 1);
}

/* Release spends the attempt: pending with the attempt still counted; the next claim is the
 * next attempt. */
static void case_release_spends(struct env *e)
{
    qc_queue_create(e, 3, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(lease_release(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_JOB(e, id, "pending", 1, a.fence);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.attempt, 2);
    struct qc_job j;
    READ_JOB(e, id, &j);
    EXPECT_ATTEMPT(&j, 0, 1, a.fence, "worker-a", "released");
}

/* Release needs no live lease: after expiry it still spends. */
static void case_release_after_expiry(struct env *e)
{
    qc_queue_create(e, 3, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", SHORT_LEASE_S);
    sleep_s(EXPIRY_WAIT_S);
    EXPECT(lease_release(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_JOB(e, id, "pending", 1, a.fence);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.attempt, 2);
}

/* Releasing the last attempt ends the job in failed: no longer claimable, and its holder's
 * complete is refused. */
static void case_release_last_attempt_fails(struct env *e)
{
    qc_queue_create(e, 1, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(lease_release(e, id, "worker-a", a.fence), QC_OK);
    EXPECT_FINAL(e, id, "failed", 1, a.fence);
    CLAIM_NONE(e, "worker-b");
    EXPECT(qc_lease_complete(e, id, "worker-a", a.fence), qc_ended(e));
}

/* ---- attempts ---- */

/* Two expired leases of worker-a: worker-a re-claims one and keeps its attempt number; worker-b
 * takes the other and spends an attempt, after which worker-a's writes on it are refused. */
static void case_reclaim_attempts(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t x = qc_job_add(e), y = qc_job_add(e);
    struct qc_lease first[2];
    assert_int_equal(CLAIM(e, "worker-a", 2, SHORT_LEASE_S, first), 2);
    assert_int_equal(first[0].attempt, 1);
    assert_int_equal(first[1].attempt, 1);
    sleep_s(EXPIRY_WAIT_S);
    struct qc_lease same = CLAIM_ONE(e, "worker-a", LONG_LEASE_S);
    struct qc_lease other = CLAIM_ONE(e, "worker-b", LONG_LEASE_S);
    assert_true((same.job_id == x && other.job_id == y) || (same.job_id == y && other.job_id == x));
    const struct qc_lease *old_same = first[0].job_id == same.job_id ? &first[0] : &first[1];
    const struct qc_lease *old_other = first[0].job_id == other.job_id ? &first[0] : &first[1];
    assert_int_equal(same.attempt, 1);
    assert_int_equal(same.fence, old_same->fence + 1);
    EXPECT_JOB(e, same.job_id, "processing", 1, same.fence);
    assert_int_equal(other.attempt, 2);
    assert_int_equal(other.fence, old_other->fence + 1);
    EXPECT_JOB(e, other.job_id, "processing", 2, other.fence);
    EXPECT_WRITES(e, other.job_id, "worker-a", old_other->fence, W_ALL, QC_OWNER_MISMATCH);
}

/* Fail with retry on each of three attempts: pending twice, then failed; the history shows each
 * attempt failed (the first two as the last one runs, and all three once it failed, while the
 * job is kept), and the job is not claimed again. */
static void case_attempts_exhausted(struct env *e)
{
    qc_queue_create(e, 3, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    int64_t fences[3];
    const char *owners[] = {"worker-1", "worker-2", "worker-3"};
    struct qc_job j;
    for (int i = 0; i < 3; i++) {
        struct qc_lease l = CLAIM_ONE(e, owners[i], 0);
        assert_int_equal(l.job_id, id);
        assert_int_equal(l.attempt, i + 1);
        fences[i] = l.fence;
        READ_JOB(e, id, &j);
        assert_int_equal(j.nhistory, i + 1);
        for (int k = 0; k <= i; k++)
            EXPECT_ATTEMPT(&j, (size_t)k, k + 1, fences[k], owners[k], k < i ? "failed" : "");
        EXPECT(lease_fail(e, id, owners[i], l.fence, 1), QC_OK);
        if (i < 2)
            EXPECT_JOB(e, id, "pending", i + 1, l.fence);
    }
    EXPECT_FINAL(e, id, "failed", 3, fences[2]);
    CLAIM_NONE(e, "worker-4");
    if (e->retention == QC_DELETED)
        return;
    READ_JOB(e, id, &j);
    assert_int_equal(j.nhistory, 3);
    for (int i = 0; i < 3; i++)
        EXPECT_ATTEMPT(&j, (size_t)i, i + 1, fences[i], owners[i], "failed");
}

/* Fail without retry is final even with attempts left. */
static void case_fail_without_retry(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(lease_fail(e, id, "worker-a", a.fence, 0), QC_OK);
    EXPECT_FINAL(e, id, "failed", 1, a.fence);
    CLAIM_NONE(e, "worker-b");
}

/* Fail with retry and a 1 s backoff: an immediate claim gets nothing, one after it the job. */
static void case_backoff(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 1, 60);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(lease_fail(e, id, "worker-a", a.fence, 1), QC_OK);
    EXPECT_JOB(e, id, "pending", 1, a.fence);
    CLAIM_NONE(e, "worker-b");
    sleep_s(EXPIRY_WAIT_S);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    assert_int_equal(b.job_id, id);
    assert_int_equal(b.attempt, 2);
}

/* ---- enqueue and claim ---- */

/* A job enqueued with a delay is not claimable before it; an undelayed one is. */
static void case_delay(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    job_add_full(e, NULL, 3600, 0, NULL);
    CLAIM_NONE(e, "worker-a");
    int64_t now = qc_job_add(e);
    struct qc_lease l = CLAIM_ONE(e, "worker-a", 0);
    assert_int_equal(l.job_id, now);
    CLAIM_NONE(e, "worker-a");
}

/* A dedupe key returns the same job while it is pending or processing, and a new job once the
 * first has finished (kept or deleted: the queue holds no dedupe window). */
static void case_dedupe(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int dup = -1;
    int64_t first = job_add_full(e, "key-1", 0, 0, &dup);
    assert_int_equal(dup, 0);
    assert_int_equal(job_add_full(e, "key-1", 0, 0, &dup), first);
    assert_int_equal(dup, 1);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    assert_int_equal(a.job_id, first);
    assert_int_equal(job_add_full(e, "key-1", 0, 0, &dup), first);
    assert_int_equal(dup, 1);
    int64_t other = job_add_full(e, "key-2", 0, 0, &dup);
    assert_int_equal(dup, 0);
    assert_int_not_equal(other, first);
    EXPECT(qc_lease_complete(e, first, "worker-a", a.fence), QC_OK);
    int64_t second = job_add_full(e, "key-1", 0, 0, &dup);
    assert_int_equal(dup, 0);
    assert_int_not_equal(second, first);
    EXPECT_JOB(e, second, "pending", 0, ANY_FENCE);
    EXPECT_FINAL(e, first, "succeeded", 1, a.fence);
}

/* Every claim, however the previous lease ended, hands out the next fence; the job ends
 * succeeded on its third attempt (the hand-back refunded one). */
static void case_fence_increments(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_job j;
    READ_JOB(e, id, &j);
    int64_t fence = j.fence;
    const char *owners[] = {"worker-a", "worker-b", "worker-c", "worker-d"};
    for (int i = 0; i < 4; i++) {
        struct qc_lease l = CLAIM_ONE(e, owners[i], 0);
        assert_int_equal(l.job_id, id);
        assert_int_equal(l.fence, fence + 1);
        fence = l.fence;
        EXPECT_JOB(e, id, "processing", l.attempt, fence);
        enum qc_outcome o = i == 0   ? lease_handback(e, id, owners[i], fence)
                            : i == 1 ? lease_release(e, id, owners[i], fence)
                            : i == 2 ? lease_fail(e, id, owners[i], fence, 1)
                                     : qc_lease_complete(e, id, owners[i], fence);
        EXPECT(o, QC_OK);
    }
    EXPECT_FINAL(e, id, "succeeded", 3, fence);
}

/* Of two jobs leased for 2 s, the one heartbeated for 6 s is not claimable after the first
 * expiry while the other is, and its holder can still complete it. */
static void case_heartbeat_extends(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    qc_job_add(e);
    qc_job_add(e);
    struct qc_lease a[2];
    assert_int_equal(CLAIM(e, "worker-a", 2, 2, a), 2);
    EXPECT(lease_heartbeat(e, a[0].job_id, "worker-a", a[0].fence, 6), QC_OK);
    EXPECT_JOB(e, a[0].job_id, "processing", 1, a[0].fence);
    sleep_s(2 + EXPIRY_WAIT_S - SHORT_LEASE_S); /* past the 2 s lease, well inside the 6 s one */
    struct qc_lease b[2];
    assert_int_equal(CLAIM(e, "worker-b", 2, LONG_LEASE_S, b), 1);
    assert_int_equal(b[0].job_id, a[1].job_id);
    EXPECT(qc_lease_complete(e, a[0].job_id, "worker-a", a[0].fence), QC_OK);
    EXPECT_FINAL(e, a[0].job_id, "succeeded", 1, a[0].fence);
}

/* Higher priority is claimed first, whatever the enqueue order. */
static void case_priority(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t low = job_add_full(e, NULL, 0, 0, NULL);
    int64_t high = job_add_full(e, NULL, 0, 10, NULL);
    int64_t mid = job_add_full(e, NULL, 0, 5, NULL);
    int64_t negative = job_add_full(e, NULL, 0, -5, NULL);
    int64_t want[] = {high, mid, low, negative};
    for (int i = 0; i < 4; i++)
        assert_int_equal(CLAIM_ONE(e, "worker-a", 0).job_id, want[i]);
    CLAIM_NONE(e, "worker-a");
}

/* Expired leases and pending jobs are claimed in one order, priority first: a claim takes both
 * kinds (from their own indexes) and merges them, and cuts the merge at max_jobs. */
static void case_priority_across_expired_leases(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t top = job_add_full(e, NULL, 0, 10, NULL);
    int64_t mid = job_add_full(e, NULL, 0, 5, NULL);
    struct qc_lease l[4];
    assert_int_equal(CLAIM(e, "worker-a", 2, SHORT_LEASE_S, l), 2);
    int64_t low = job_add_full(e, NULL, 0, 0, NULL);
    int64_t high = job_add_full(e, NULL, 0, 7, NULL);
    sleep_s(EXPIRY_WAIT_S);
    /* top (expired), high (pending), mid (expired); low is past the cut */
    assert_int_equal(CLAIM(e, "worker-b", 3, 0, l), 3);
    const int64_t want[] = {top, high, mid};
    for (int i = 0; i < 3; i++)
        assert_int_equal(l[i].job_id, want[i]);
    assert_int_equal(l[0].attempt, 2);
    assert_int_equal(l[1].attempt, 1);
    assert_int_equal(l[2].attempt, 2);
    assert_int_equal(CLAIM_ONE(e, "worker-c", 0).job_id, low);
    CLAIM_NONE(e, "worker-c");
}

/* max_jobs bounds a claim; the leases of one claim and the next are distinct jobs. */
static void case_max_jobs(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    for (int i = 0; i < 5; i++)
        qc_job_add(e);
    struct qc_lease l[10];
    assert_int_equal(CLAIM(e, "worker-a", 2, 0, l), 2);
    assert_int_equal(CLAIM(e, "worker-b", 10, 0, l + 2), 3);
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < i; k++)
            assert_int_not_equal(l[i].job_id, l[k].job_id);
    CLAIM_NONE(e, "worker-c");
}

/* case_history's job reads as state, on its fourth attempt, with its five leases (fences) in
 * the history, the last one ended as last. */
static void history_check(const struct env *e, int64_t id, const char *state,
                          const int64_t fences[5], const char *last)
{
    struct qc_job j;
    READ_JOB(e, id, &j);
    assert_string_equal(j.state, state);
    assert_int_equal(j.attempts, 4);
    assert_int_equal(j.nhistory, 5);
    EXPECT_ATTEMPT(&j, 0, 1, fences[0], "worker-a", "handed_back");
    EXPECT_ATTEMPT(&j, 1, 1, fences[1], "worker-b", "released");
    EXPECT_ATTEMPT(&j, 2, 2, fences[2], "worker-c", "lease_expired");
    EXPECT_ATTEMPT(&j, 3, 3, fences[3], "worker-d", "failed");
    EXPECT_ATTEMPT(&j, 4, 4, fences[4], "worker-e", last);
}

/* One job through every way an attempt ends: the history holds each attempt's number, owner,
 * fence and outcome, in order: the first four as the fifth runs, and all five once it completed
 * (while the job is kept). */
static void case_history(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t id = qc_job_add(e);
    struct qc_lease a = CLAIM_ONE(e, "worker-a", 0);
    EXPECT(lease_handback(e, id, "worker-a", a.fence), QC_OK);
    struct qc_lease b = CLAIM_ONE(e, "worker-b", 0);
    EXPECT(lease_release(e, id, "worker-b", b.fence), QC_OK);
    struct qc_lease c = CLAIM_ONE(e, "worker-c", SHORT_LEASE_S);
    sleep_s(EXPIRY_WAIT_S);
    struct qc_lease d = CLAIM_ONE(e, "worker-d", 0);
    EXPECT(lease_fail(e, id, "worker-d", d.fence, 1), QC_OK);
    struct qc_lease f = CLAIM_ONE(e, "worker-e", 0);
    const int64_t fences[] = {a.fence, b.fence, c.fence, d.fence, f.fence};
    history_check(e, id, "processing", fences, "");
    EXPECT(qc_lease_complete(e, id, "worker-e", f.fence), QC_OK);
    EXPECT_FINAL(e, id, "succeeded", 4, f.fence);
    if (e->retention == QC_KEPT)
        history_check(e, id, "succeeded", fences, "completed");
}

/* ---- exclusivity under real concurrency ---- */

#define RACE_JOBS    200
#define RACE_WORKERS 8
#define RACE_BATCH   4

struct racer {
    const struct env *e;
    pthread_barrier_t *start;
    pthread_t thread;
    char owner[16];
    int64_t claimed[RACE_JOBS];
    size_t n;
    int problems;
    char first_problem[200];
};

static void racer_problem(struct racer *r, const char *what, int64_t id, enum qc_outcome o)
{
    if (r->problems++ == 0)
        snprintf(r->first_problem, sizeof(r->first_problem), "%s: %s of job %" PRId64 " got %s",
                 r->owner, what, id, qc_outcome_name(o));
}

/* Claims and completes until a claim comes back empty. No cmocka assertion here: a failure
 * would jump off this thread's stack. */
static void *racer_run(void *arg)
{
    struct racer *r = arg;
    struct qc_lease got[RACE_BATCH];
    pthread_barrier_wait(r->start);
    for (;;) {
        size_t n = 0;
        enum qc_outcome o =
            r->e->impl->claim(r->e->impl->ctx, r->e->queue, r->owner, RACE_BATCH, 0, got, &n);
        if (o != QC_OK || n > RACE_BATCH) {
            racer_problem(r, "claim", 0, o);
            break;
        }
        if (n == 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (r->n == RACE_JOBS) {
                racer_problem(r, "claim beyond the number of jobs", got[i].job_id, QC_OK);
                return NULL;
            }
            r->claimed[r->n++] = got[i].job_id;
            o = qc_lease_complete(r->e, got[i].job_id, r->owner, got[i].fence);
            if (o != QC_OK)
                racer_problem(r, "complete", got[i].job_id, o);
        }
    }
    return NULL;
}

static int cmp_id(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* RACE_WORKERS threads released together by a barrier claim (RACE_BATCH at a time) and
 * complete RACE_JOBS jobs: every job is claimed exactly once, every completion is accepted (the
 * workers' own records), and each job ends succeeded on its first attempt and fence, or, on a
 * queue that deletes finished jobs, is gone. */
static void case_concurrent_claims(struct env *e)
{
    qc_queue_create(e, 5, LONG_LEASE_S, 0, 0);
    int64_t ids[RACE_JOBS], seen[RACE_JOBS];
    for (int i = 0; i < RACE_JOBS; i++)
        ids[i] = qc_job_add(e);
    struct racer *r = calloc(RACE_WORKERS, sizeof(*r));
    assert_non_null(r);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACE_WORKERS);
    int started = 0;
    for (int w = 0; w < RACE_WORKERS; w++) {
        r[w].e = e;
        r[w].start = &start;
        snprintf(r[w].owner, sizeof(r[w].owner), "racer-%d", w);
        started += pthread_create(&r[w].thread, NULL, racer_run, &r[w]) == 0;
    }
    assert_int_equal(started, RACE_WORKERS); /* else the barrier never opens */
    size_t total = 0;
    int problems = 0;
    for (int w = 0; w < RACE_WORKERS; w++) {
        pthread_join(r[w].thread, NULL);
        if (r[w].problems > 0)
            print_error("%d problems, first: %s\n", r[w].problems, r[w].first_problem);
        problems += r[w].problems;
        for (size_t k = 0; k < r[w].n; k++, total++)
            if (total < RACE_JOBS)
                seen[total] = r[w].claimed[k];
    }
    pthread_barrier_destroy(&start);
    free(r);
    assert_int_equal(problems, 0);
    assert_int_equal(total, RACE_JOBS);
    qsort(ids, RACE_JOBS, sizeof(ids[0]), cmp_id);
    qsort(seen, RACE_JOBS, sizeof(seen[0]), cmp_id);
    for (int i = 0; i < RACE_JOBS; i++)
        assert_int_equal(seen[i], ids[i]); /* each job once: no double claim, none missed */
    CLAIM_NONE(e, "worker-late");
    for (int i = 0; i < RACE_JOBS; i++) {
        EXPECT_FINAL(e, ids[i], "succeeded", 1, ANY_FENCE);
        if (e->retention == QC_DELETED)
            continue;
        struct qc_job j;
        READ_JOB(e, ids[i], &j);
        assert_int_equal(j.nhistory, 1);
        assert_string_equal(j.history[0].outcome, "completed");
    }
}

/* ---- the table and the runner ---- */

struct qc_case {
    const char *name;
    void (*run)(struct env *e);
};

static const struct qc_case cases[] = {
    {"fenced_writes_refused_when_owner_differs", case_owner_differs},
    {"old_fence_refused_after_same_owner_reclaim", case_fence_differs},
    {"fenced_writes_refused_when_lease_expired", case_lease_expired},
    {"writes_refused_when_job_terminal", case_terminal},
    {"unknown_or_foreign_job_not_found", case_not_found},
    {"handback_refunds_the_attempt", case_handback_refunds},
    {"handback_works_after_expiry", case_handback_after_expiry},
    {"release_spends_the_attempt", case_release_spends},
    {"release_works_after_expiry", case_release_after_expiry},
    {"release_of_last_attempt_fails_the_job", case_release_last_attempt_fails},
    {"same_owner_reclaim_keeps_attempt_other_owner_spends", case_reclaim_attempts},
    {"attempts_exhausted_end_in_failed", case_attempts_exhausted},
    {"fail_without_retry_is_final", case_fail_without_retry},
    {"backoff_delays_the_next_claim", case_backoff},
    {"delayed_job_not_claimable_early", case_delay},
    {"dedupe_same_job_while_unfinished_new_after", case_dedupe},
    {"every_claim_increments_the_fence", case_fence_increments},
    {"heartbeat_extends_the_lease", case_heartbeat_extends},
    {"higher_priority_claimed_first", case_priority},
    {"expired_leases_and_pending_jobs_in_one_priority_order", case_priority_across_expired_leases},
    {"claim_max_jobs_bounds_the_count", case_max_jobs},
    {"history_records_owner_fence_outcome", case_history},
    {"cancel_of_pending_job_ends_it", qc_case_cancel_pending},
    {"cancel_of_processing_job_refuses_its_holder", qc_case_cancel_processing},
    {"cancel_of_finished_job_refused", qc_case_cancel_finished},
    {"batch_completion_answers_each_item_on_its_own", qc_case_batch_complete},
    {"eight_workers_released_at_once_never_share_a_job", case_concurrent_claims},
};

size_t qc_case_count(void)
{
    return sizeof(cases) / sizeof(cases[0]);
}

struct slot {
    const struct qc_impl *impl;
    enum qc_retention retention;
    const struct qc_case *c;
};

/* Runs a case on its queue, qc-<retention>-<case>: each retention's queues are its own. */
static void run_case(void **state)
{
    const struct slot *s = *state;
    struct env e = {s->impl, s->retention, "", 0};
    snprintf(e.queue, sizeof(e.queue), "qc-%s-%s", qc_retention_name(s->retention), s->c->name);
    s->c->run(&e);
}

int qc_run(const char *group, const struct qc_impl *impl, enum qc_retention retention)
{
    size_t n = qc_case_count();
    struct CMUnitTest *tests = calloc(n, sizeof(*tests));
    struct slot *slots = calloc(n, sizeof(*slots));
    char name[128];
    int failed = -1;
    if (tests == NULL || slots == NULL)
        goto done;
    for (size_t i = 0; i < n; i++) {
        slots[i] = (struct slot){impl, retention, &cases[i]};
        tests[i] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL, &slots[i]};
    }
    snprintf(name, sizeof(name), "%s_%s", group, qc_retention_name(retention));
    print_message("group %s: queues that %s finished jobs\n", name,
                  retention == QC_KEPT ? "keep" : "delete");
    failed = _cmocka_run_group_tests(name, tests, n, NULL, NULL);
done:
    free(tests);
    free(slots);
    return failed;
}
