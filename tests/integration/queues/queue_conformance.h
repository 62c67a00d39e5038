/* The leased-queue conformance suite: an abstract lease interface (struct qc_impl) and, in
 * queue_conformance.c, a table of protocol cases written only against it (some defined in other
 * case files, see queue_conformance_case.h) and a runner that turns the table into cmocka tests,
 * once per retention of finished jobs (kept, or deleted as they end). The implementations (the C
 * queue API in test_queue_conformance_c.c, REST over HTTP in test_queue_conformance_http.c) live in
 * their own programs; nothing here knows SQL or HTTP. */
#ifndef TESTS_QUEUE_CONFORMANCE_H
#define TESTS_QUEUE_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

/* What a protocol call answered. The first six are the protocol's words; QC_ERROR is everything
 * else (a transport or database failure, a reply the protocol does not allow) and fails a case
 * wherever it appears. */
enum qc_outcome {
    QC_OK,
    QC_OWNER_MISMATCH,
    QC_FENCE_MISMATCH,
    QC_LEASE_EXPIRED,
    QC_TERMINAL,
    QC_CANCELLED, /* a fenced write on a job an operator cancelled */
    QC_NOT_FOUND,
    QC_ERROR,
};
/* Static name of an outcome, for failure messages. */
const char *qc_outcome_name(enum qc_outcome o);

/* One lease handed out by a claim. */
struct qc_lease {
    int64_t job_id;
    int64_t fence;
    int attempt;
};

#define QC_HISTORY_MAX 16
#define QC_OWNER_MAX   256

/* One attempt of a job's history, in fence order. outcome is "" while the attempt runs, else
 * completed, failed, handed_back, released or lease_expired. */
struct qc_attempt {
    int attempt;
    int64_t fence;
    char owner[QC_OWNER_MAX];
    char outcome[16];
};

/* A job as read: state (pending, processing, succeeded, failed), attempts spent, current fence,
 * whether its last error is a cancel's ({"cancelled": true}), and the first QC_HISTORY_MAX
 * attempts (nhistory counts all of them). */
struct qc_job {
    char state[16];
    int attempts;
    int64_t fence;
    int cancelled;
    size_t nhistory;
    struct qc_attempt history[QC_HISTORY_MAX];
};

/* One item of a batch completion: the lease (the batch names the owner), and how it was
 * answered: QC_OK (completed) or the item's own refusal. */
struct qc_settle {
    int64_t job_id;
    int64_t fence;
    enum qc_outcome outcome; /* out */
};

/* What a queue keeps of a job that reached a final state (succeeded, failed). */
enum qc_retention {
    QC_KEPT,    /* kept: it reads as it ended, and a write to it is refused as terminal */
    QC_DELETED, /* deleted, with its history, by the statement that ended it: reads and writes
                 * answer not found */
};
/* Static name of a retention ("kept", "deleted"), for group and queue names. */
const char *qc_retention_name(enum qc_retention r);

/* An implementation of the queue protocol. Every function takes ctx first and may be called from
 * several threads at once. lease_seconds 0 means the queue's. Writes (heartbeat .. release) name
 * the lease by job id, owner and fence. */
struct qc_impl {
    const char *name;
    void *ctx;
    /* Creates the queue, keeping or deleting its succeeded, failed and cancelled jobs as
     * retention says (how long kept ones stay is the implementation's choice, past any case).
     * QC_OK or QC_ERROR. */
    enum qc_outcome (*create_queue)(void *ctx, const char *queue, enum qc_retention retention,
                                    int max_attempts, int lease_seconds,
                                    double backoff_base_seconds, double backoff_max_seconds);
    /* Enqueues one job (payload is JSON text, dedupe_key may be NULL). *id gets the job (the
     * existing one when *duplicate is set). */
    enum qc_outcome (*enqueue)(void *ctx, const char *queue, const char *payload,
                               const char *dedupe_key, double delay_seconds, int priority,
                               int64_t *id, int *duplicate);
    /* Claims up to max_jobs for owner; out holds max_jobs entries, *n gets how many. */
    enum qc_outcome (*claim)(void *ctx, const char *queue, const char *owner, int max_jobs,
                             int lease_seconds, struct qc_lease *out, size_t *n);
    enum qc_outcome (*heartbeat)(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                 int64_t fence, int lease_seconds);
    enum qc_outcome (*complete)(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                int64_t fence);
    /* Fail (named so beside cmocka's fail() macro). retry: back to pending after the backoff
     * when attempts are left; else failed. */
    enum qc_outcome (*fail_lease)(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                  int64_t fence, int retry);
    enum qc_outcome (*handback)(void *ctx, const char *queue, int64_t job_id, const char *owner,
                                int64_t fence);
    enum qc_outcome (*release)(void *ctx, const char *queue, int64_t job_id, const char *owner,
                               int64_t fence);
    /* QC_OK with *out filled, or QC_NOT_FOUND. */
    enum qc_outcome (*get_job)(void *ctx, const char *queue, int64_t job_id, struct qc_job *out);
    /* Operator cancel: an unfinished job ends cancelled (or is deleted, on a queue that keeps no
     * cancelled jobs); a finished one is refused. */
    enum qc_outcome (*cancel)(void *ctx, const char *queue, int64_t job_id);
    /* 1: a cancelled job is in a state of its own, "cancelled", and its holder's writes are
     * refused as QC_CANCELLED; 0 (releases before migration 20): it is failed, marked cancelled,
     * and its holder's writes are refused as QC_TERMINAL. */
    int cancelled_state;
    /* Completes n leases of owner in one request, each fenced and answered on its own in
     * items[i].outcome. QC_OK when the request itself was accepted (whatever the items got),
     * else QC_ERROR. */
    enum qc_outcome (*complete_batch)(void *ctx, const char *queue, const char *owner,
                                      struct qc_settle *items, size_t n);
};

/* Number of cases in the table. */
size_t qc_case_count(void);
/* Runs every case of the table against impl as one cmocka group, named group followed by the
 * retention ("_kept", "_deleted"), each case on a fresh queue of its own created with that
 * retention. Returns cmocka's result: the number of failed cases (-1: out of memory). */
int qc_run(const char *group, const struct qc_impl *impl, enum qc_retention retention);

#endif
