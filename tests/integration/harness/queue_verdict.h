/* The verdict on a leased queue after a run, written once for every test that churns one
 * (test_queue_claim_exclusive, test_many_processes): from the attempt history in the database
 * and the completes the workers saw accepted, each job succeeded exactly once or failed with its
 * attempts spent, per job fences only grow and no two leases overlap. The workloads that fill
 * the queue stay in the tests. */
#ifndef TESTS_QUEUE_VERDICT_H
#define TESTS_QUEUE_VERDICT_H

#include <jansson.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* One attempt of a job: a row of rowlock.job_attempt_history, or one a test recorded itself. */
struct qv_attempt {
    int64_t job, fence;
    int attempt;
    char owner[32];
    int64_t claimed_us, ended_us; /* ended_us -1 while open */
    char outcome[16];             /* "" while open */
};

/* Counts, over attempts of many jobs, the ways a job was leased to two owners at once: per job in
 * claim order, fences must strictly increase, an attempt must have ended by the time the next
 * was claimed ([claimed, ended) intervals never overlap), and at most one attempt completed.
 * Sorts a in place (job, claim time, fence); prints the first violations. */
int qv_check_history(struct qv_attempt *a, size_t n);

/* A log of completes (job, fence, owner), appended to by any thread. */
struct qv_complete {
    int64_t id, fence;
    char owner[32];
};
struct qv_log {
    pthread_mutex_t mu;
    struct qv_complete *v; /* owned; qv_log_free */
    size_t n, cap;
};
#define QV_LOG_INIT                                                                                \
    {                                                                                              \
        .mu = PTHREAD_MUTEX_INITIALIZER                                                            \
    }
void qv_log_add(struct qv_log *log, int64_t id, int64_t fence, const char *owner);
void qv_log_free(struct qv_log *log);

/* One job as the jobs table holds it after the run; payload borrowed (NULL without a hook). */
struct qv_job {
    int64_t id, fence;
    const char *state;
    int attempts;
    json_t *payload;
};

struct qv_rules {
    const char *queue;    /* its name */
    int max_attempts;     /* the queue's max_attempts */
    struct qv_log *acked; /* every complete answered 2xx */
    struct qv_log *lost;  /* completes whose answer was lost, their resend refused as
                           * job_terminal (the first try was applied); NULL: none */
    /* Optional further rules for one job, with its attempts h[0..nh) in claim order: returns
     * how many it broke (qv_problem says why). */
    int (*job_rules)(void *arg, const struct qv_job *job, const struct qv_attempt *h, size_t nh);
    void *arg;
};

struct qv_verdict {
    int jobs;        /* in the queue */
    size_t attempts; /* in its history */
    int overlaps;    /* qv_check_history's count */
    int bad_jobs;    /* rules broken by jobs (one job may break several) */
    int failed;      /* jobs that failed */
};

/* Checks every job of the queue (sorting the logs): a succeeded job's last attempt completed and
 * was the only one to; of its accepted completes there is at most one, with the fence and owner
 * of that attempt, and there is one or a lost answer for it. A failed job has no accepted
 * complete and spent every attempt, the last ending failed or lease_expired. Every job: one
 * attempt in the history per fence, its attempts counter the highest attempt number. */
struct qv_verdict qv_check_queue(PGconn *c, const struct qv_rules *rules);

/* Reports one job that broke a rule (the first 30 are printed); returns 1. */
int qv_problem(int64_t id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
