/* What a case file of the conformance suite shares with queue_conformance.c, which owns the
 * runner and the table: the case's environment, the protocol calls and the assertions (each
 * reported at the case's line), and the cases defined in other files. Only case files include
 * it; the implementations know queue_conformance.h alone. */
#ifndef TESTS_QUEUE_CONFORMANCE_CASE_H
#define TESTS_QUEUE_CONFORMANCE_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "queue_conformance.h"

#define SHORT_LEASE_S 1   /* a lease a case lets run out */
#define EXPIRY_WAIT_S 1.3 /* past SHORT_LEASE_S (and a backoff of 1 s), whatever the rounding */
#define LONG_LEASE_S  60  /* a lease that never runs out during a case */
#define NO_SUCH_JOB   1000000000
#define ANY_FENCE     (-1) /* expect_job: do not check the fence */

/* What a case runs against: the implementation and the case's own fresh queue. */
struct env {
    const struct qc_impl *impl;
    enum qc_retention retention; /* of the queues the case creates */
    char queue[128];
    int payloads; /* jobs enqueued so far, to number payloads */
};

/* The writes a case can name at once, in the order they are tried. */
enum {
    W_HEARTBEAT = 1 << 0,
    W_COMPLETE = 1 << 1,
    W_FAIL_RETRY = 1 << 2,
    W_FAIL_FINAL = 1 << 3,
    W_HANDBACK = 1 << 4,
    W_RELEASE = 1 << 5,
    W_FENCED = W_HEARTBEAT | W_COMPLETE | W_FAIL_RETRY | W_FAIL_FINAL,
    W_ALL = W_FENCED | W_HANDBACK | W_RELEASE,
};

#define EXPECT(call, want) qc_expect_outcome((call), (want), #call, __LINE__)
#define CLAIM(e, owner, max, lease_s, out)                                                         \
    qc_claim_jobs((e), (owner), (max), (lease_s), (out), __LINE__)
#define CLAIM_ONE(e, owner, lease_s) qc_claim_one((e), (owner), (lease_s), __LINE__)
#define CLAIM_NONE(e, owner)         qc_claim_none((e), (owner), __LINE__)
#define READ_JOB(e, id, j)           qc_read_job((e), (id), (j), __LINE__)
#define EXPECT_JOB(e, id, state, attempts, fence)                                                  \
    qc_expect_job((e), (id), (state), (attempts), (fence), __LINE__)
#define EXPECT_FINAL(e, id, state, attempts, fence)                                                \
    qc_expect_final((e), (id), (state), (attempts), (fence), __LINE__)
#define EXPECT_ATTEMPT(j, i, attempt, fence, owner, outcome)                                       \
    qc_expect_attempt((j), (i), (attempt), (fence), (owner), (outcome), __LINE__)
#define EXPECT_WRITES(e, id, owner, fence, ops, want)                                              \
    qc_expect_writes((e), (id), (owner), (fence), (ops), (want), __LINE__)

/* The protocol call on the case's queue. */
enum qc_outcome qc_lease_complete(const struct env *e, int64_t id, const char *owner,
                                  int64_t fence);

/* The assertions behind the macros above (queue_conformance.c says what each checks); each
 * fails the case at line. */
void qc_expect_outcome(enum qc_outcome got, enum qc_outcome want, const char *what, int line);
void qc_queue_create(struct env *e, int max_attempts, int lease_s, double backoff_base_s,
                     double backoff_max_s);
int64_t qc_job_add(struct env *e);
size_t qc_claim_jobs(const struct env *e, const char *owner, int max_jobs, int lease_s,
                     struct qc_lease *out, int line);
struct qc_lease qc_claim_one(const struct env *e, const char *owner, int lease_s, int line);
void qc_claim_none(const struct env *e, const char *owner, int line);
void qc_read_job(const struct env *e, int64_t id, struct qc_job *j, int line);
void qc_expect_job(const struct env *e, int64_t id, const char *state, int attempts, int64_t fence,
                   int line);
void qc_expect_final(const struct env *e, int64_t id, const char *state, int attempts,
                     int64_t fence, int line);
/* How a write to a job that reached a final state is refused, in e's retention. */
enum qc_outcome qc_ended(const struct env *e);
void qc_expect_attempt(const struct qc_job *j, size_t i, int attempt, int64_t fence,
                       const char *owner, const char *outcome, int line);
void qc_expect_writes(const struct env *e, int64_t id, const char *owner, int64_t fence,
                      unsigned ops, enum qc_outcome want, int line);

/* Operator cancel and batch completion (queue_conformance_admin.c). */
void qc_case_cancel_pending(struct env *e);
void qc_case_cancel_processing(struct env *e);
void qc_case_cancel_finished(struct env *e);
void qc_case_batch_complete(struct env *e);

#endif
