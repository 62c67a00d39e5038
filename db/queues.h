/* Leased work queues: queues, jobs, claims with FOR UPDATE SKIP LOCKED, fenced writes (heartbeat,
 * complete, fail) that need owner, fence, state processing and a live lease, hand-back (refunds
 * the attempt) and release (spends it), attempt history, and the janitor. This is the C queue
 * API the conformance suite drives directly; the REST routes are thin over it. JSON is text. */
#ifndef DB_QUEUES_H
#define DB_QUEUES_H

#include <stddef.h>
#include <stdint.h>

#include "db/db.h"
#include "db/pool.h"

#define DB_QUEUE_BATCH_MAX 1000 /* jobs per enqueue, leases per claim or settlement */
/* A job's state or an attempt's outcome as text ("processing", "lease_expired"), NUL included. */
#define DB_JOB_STATE_TEXT 16
/* Bytes of a worker's owner name at most, and the size that holds one. */
#define DB_OWNER_MAX  255
#define DB_OWNER_SIZE (DB_OWNER_MAX + 1)

/* Limits on claims (0: none): at most concurrency leases live at once; at most rate claims
 * per rate_period_seconds, with bursts of rate_burst (0: rate). A queue's own count every job
 * of it; its key_limits, every key's own (db_queue_key_put overrides them for one key). */
#define DB_LIMIT_MAX       1000000
#define DB_RATE_PERIOD_MAX 86400.0
#define DB_RATE_PERIOD_MIN 0.001
struct db_queue_limits {
    int concurrency;
    int rate;
    double rate_period_seconds;
    int rate_burst;
};

struct db_queue_config {
    int max_attempts;
    int lease_seconds;
    double backoff_base_seconds; /* retry n waits base * 2^(n-1), at most max */
    double backoff_max_seconds;
    int retention_seconds; /* finished jobs are purged after this, unless their state says */
    /* How long jobs that end succeeded, failed or cancelled are kept, each: seconds,
     * DB_RETENTION_INHERIT (0, so that a configuration left zero keeps jobs as before) follows
     * retention_seconds, DB_RETENTION_DELETE deletes the job, its body and its attempt history
     * in the statement that finishes it. As read: seconds in effect, or DB_RETENTION_DELETE. */
    int succeeded_retention_seconds, failed_retention_seconds, cancelled_retention_seconds;
    /* An enqueue's dedupe key is held this long after it (0: only while its job is pending or
     * processing), whatever happens to the job. */
    int dedupe_window_seconds;
    struct db_queue_limits limits, key_limits;
};
#define DB_RETENTION_INHERIT 0
#define DB_RETENTION_DELETE  (-1)
#define DB_RETENTION_MAX     (86400 * 3650) /* seconds any retention may be at most */
#define DB_DEDUPE_WINDOW_MAX (86400 * 366)  /* seconds a dedupe window may be at most */

struct db_queue {
    int64_t id;
    char name[DB_NAME_SIZE];
    struct db_queue_config cfg;
    char created_at[DB_TIME_TEXT], updated_at[DB_TIME_TEXT];
    char paused_at[DB_TIME_TEXT]; /* when it was paused; "" while it runs */
};

struct db_queue_stats {
    int64_t waiting, pending, processing, succeeded, failed, cancelled;
    double oldest_pending_age_seconds;
    int64_t dedupe_keys; /* keys held by a dedupe window now */
    double paused_since; /* when the queue was paused, seconds since the epoch; 0: running */
    /* due jobs claims left because of each limit (DB_LIMIT_KINDS, in db_limit_kind_names'
     * order: concurrency, key_concurrency, rate, key_rate), since the queue was created */
    int64_t held_back[4];
};
#define DB_LIMIT_KINDS 4
extern const char *const db_limit_kind_names[DB_LIMIT_KINDS];

/* Why a queue call did not do what was asked. */
enum db_queue_verdict {
    DB_Q_OK,
    DB_Q_CREATED,
    DB_Q_DUPLICATE, /* enqueue: a job holds this dedupe key (unfinished, or within its window) */
    DB_Q_QUEUE_NOT_FOUND,
    DB_Q_JOB_NOT_FOUND,
    DB_Q_OWNER_MISMATCH,
    DB_Q_FENCE_MISMATCH,
    DB_Q_LEASE_EXPIRED,
    DB_Q_JOB_TERMINAL,
    DB_Q_JOB_CANCELLED,     /* a fenced write on a job an operator cancelled */
    DB_Q_NOT_FAILED,        /* operator retry of a job that is neither failed nor cancelled */
    DB_Q_BAD_INPUT,         /* a value PostgreSQL refused (for example a run_at it cannot read) */
    DB_Q_QUEUE_BUSY,        /* delete: the queue has jobs in processing (and force was not set) */
    DB_Q_QUEUE_REFERENCED,  /* delete: schedules (db/schedules.h) target the queue */
    DB_Q_KEY_NOT_FOUND,     /* a concurrency key without limits of its own */
    DB_Q_UNKNOWN_PARENT,    /* enqueue: a parent id names no job (struct db_dep_refusal) */
    DB_Q_PARENT_FAILED,     /* enqueue: a parent failed or was cancelled, and the child's policy
                             * is to be cancelled with it */
    DB_Q_TOO_MANY_CHILDREN, /* enqueue: a parent would have more than DB_JOB_CHILDREN_MAX */
};
const char *db_queue_verdict_name(enum db_queue_verdict v);

enum db_status db_queues_put(struct db_pool *pool, const char *name,
                             const struct db_queue_config *cfg, struct db_queue *out,
                             enum db_queue_verdict *verdict, struct db_error *err);
enum db_status db_queues_get(struct db_pool *pool, const char *name, struct db_queue *out,
                             struct db_queue_stats *stats, enum db_queue_verdict *verdict,
                             struct db_error *err);
/* Deletes the queue and everything it held (jobs, bodies, attempt history, its janitor row) in
 * one transaction. Unless force is set, a queue with a job in processing is left as it was
 * (DB_Q_QUEUE_BUSY); *processing gets how many (those deleted with force). The queue's row is
 * locked first, so no job is enqueued meanwhile, then every job's: a claim that ran before
 * finished first and its job counts as processing, and a claim after finds nothing. */
enum db_status db_queues_delete(struct db_pool *pool, const char *name, int force,
                                int64_t *processing, enum db_queue_verdict *verdict,
                                struct db_error *err);
/* Pauses (pause 1) or resumes (0) the queue: while it is paused, enqueues go on and claims hand
 * out nothing; leases already held go on. Pausing a paused queue (resuming a running one)
 * changes nothing: *out is the queue as it is, with when it was first paused. *changed is 1
 * when this call paused or resumed it. */
enum db_status db_queues_pause(struct db_pool *pool, const char *name, int pause,
                               struct db_queue *out, int *changed, enum db_queue_verdict *verdict,
                               struct db_error *err);
typedef void (*db_queue_each)(const struct db_queue *q, const struct db_queue_stats *s, void *ctx);
enum db_status db_queues_list(struct db_pool *pool, const char *after, int limit,
                              db_queue_each each, void *ctx, struct db_error *err);

/* A concurrency key of a queue: the limits it has of its own (own: set by db_queue_key_put; 0
 * for each not set, which the queue's key_limits give), those in effect, and its live leases. */
struct db_queue_key {
    char *key; /* owned: db_queue_key_clear */
    int own;
    struct db_queue_limits limits, in_effect;
    int64_t processing;
    char created_at[DB_TIME_TEXT], updated_at[DB_TIME_TEXT]; /* "" without limits of its own */
};
void db_queue_key_clear(struct db_queue_key *k);
/* Sets the key's own limits (DB_Q_CREATED when it had none). A limit of its own not set takes
 * the queue's for every key; a rate of its own replaces the queue's rate as a whole. */
enum db_status db_queue_key_put(struct db_pool *pool, const char *queue, const char *key,
                                const struct db_queue_limits *limits, struct db_queue_key *out,
                                enum db_queue_verdict *verdict, struct db_error *err);
/* Any key, with limits of its own or not. */
enum db_status db_queue_key_get(struct db_pool *pool, const char *queue, const char *key,
                                struct db_queue_key *out, enum db_queue_verdict *verdict,
                                struct db_error *err);
/* Drops the key's own limits (DB_Q_KEY_NOT_FOUND: it had none). */
enum db_status db_queue_key_delete(struct db_pool *pool, const char *queue, const char *key,
                                   enum db_queue_verdict *verdict, struct db_error *err);
/* The keys with limits of their own, after after (NULL: from the first) in key order. */
typedef void (*db_queue_key_each)(const struct db_queue_key *k, void *ctx);
enum db_status db_queue_keys_list(struct db_pool *pool, const char *queue, const char *after,
                                  int limit, db_queue_key_each each, void *ctx,
                                  enum db_queue_verdict *verdict, struct db_error *err);

/* A parent named by a job being enqueued: a job that exists (id), or another job of the same
 * batch (index, from 0, when id is 0). */
struct db_job_parent {
    int64_t id;
    int index;
};
/* Children a job may have, over every enqueue that names it a parent. */
#define DB_JOB_CHILDREN_MAX 10000

struct db_job_in {
    const char *payload;    /* JSON text */
    const char *dedupe_key; /* or NULL */
    const char *run_at;     /* timestamp text, or NULL */
    double delay_seconds;   /* used when run_at is NULL */
    int priority;           /* higher first */
    int max_attempts;       /* 0: the queue's */
    int dedupe_window; /* seconds its key is held (0: the queue's; DB_NO_DEDUPE_WINDOW: none) */
    const char *concurrency_key; /* or NULL: the key its queue's per-key limits count it under */
    /* its parents (none: nparents 0): the job waits until each has succeeded; a parent that
     * fails for good or is cancelled cancels it, or with run_on_parent_failure counts settled */
    const struct db_job_parent *parents;
    size_t nparents;
    int run_on_parent_failure;
};
#define DB_NO_DEDUPE_WINDOW (-1)

struct db_job_ref {
    int64_t id;
    enum db_queue_verdict verdict; /* DB_Q_CREATED or DB_Q_DUPLICATE */
    /* a duplicate's job: its state ("" when it could not be read), and whether it is still
     * kept (0: deleted as it ended, or purged; state is then how it ended, when known) */
    char state[DB_JOB_STATE_TEXT];
    int kept;
    int waiting; /* created waiting for a parent */
};

/* Why an enqueue with parents was refused: the parent, and its state (DB_Q_PARENT_FAILED). */
struct db_dep_refusal {
    int64_t parent;
    char state[DB_JOB_STATE_TEXT];
};

/* Enqueues n jobs in one transaction. out has n entries. */
enum db_status db_jobs_enqueue(struct db_pool *pool, const char *queue,
                               const struct db_job_in *jobs, size_t n, struct db_job_ref *out,
                               enum db_queue_verdict *verdict, struct db_error *err);
/* The same, and notify (NULL: none) is sent as a NOTIFY on DB_LISTENER_CHANNEL by that
 * transaction, leaving at its COMMIT (db_listener_inline says when), unless the database has a
 * synchronous standby: a NOTIFY holds the database-wide notify lock until its transaction ends,
 * and that would include the wait for the standby. *notified is 1 when the transaction
 * committed with it, else 0. */
/* With parents, the jobs are linked in the same transaction; a refusal (DB_Q_UNKNOWN_PARENT,
 * DB_Q_PARENT_FAILED, DB_Q_TOO_MANY_CHILDREN) rolls the whole enqueue back and says which parent
 * in *refusal (may be NULL). */
enum db_status db_jobs_enqueue_notify(struct db_pool *pool, const char *queue,
                                      const struct db_job_in *jobs, size_t n,
                                      struct db_job_ref *out, const char *notify, int *notified,
                                      struct db_dep_refusal *refusal,
                                      enum db_queue_verdict *verdict, struct db_error *err);

struct db_attempt {
    int64_t fence;
    int attempt;
    char owner[DB_OWNER_SIZE];
    char claimed_at[DB_TIME_TEXT], ended_at[DB_TIME_TEXT]; /* ended_at "" while running */
    char outcome[DB_JOB_STATE_TEXT];                       /* "" while running */
};

/* A job as read. Text members are owned by the struct: free with db_job_clear. */
struct db_job {
    int64_t id;
    char state[DB_JOB_STATE_TEXT];
    int priority, attempts, max_attempts;
    int64_t fence;
    char *owner; /* NULL when not processing */
    char lease_expires_at[DB_TIME_TEXT], run_at[DB_TIME_TEXT], created_at[DB_TIME_TEXT],
        updated_at[DB_TIME_TEXT], finished_at[DB_TIME_TEXT];
    char *dedupe_key;
    char *payload, *progress, *result, *last_error; /* JSON text or NULL */
    char *concurrency_key;                          /* or NULL */
    /* its dependencies: parents and children as PostgreSQL writes an array ("{1,2}"), NULL for
     * none; how many parents it still waits for; "cancel" or "run" ("" without parents) */
    char *parents, *children;
    int waiting_on;
    char on_parent_failure[8];
    struct db_attempt *history;
    size_t nhistory;
    struct db_queue_config queue; /* the queue's settings, read with it (also when not found) */
};
void db_job_clear(struct db_job *j);

enum db_status db_jobs_get(struct db_pool *pool, const char *queue, int64_t id, struct db_job *out,
                           enum db_queue_verdict *verdict, struct db_error *err);

/* A job's parents in the order it named them, after position after (1-based), at most limit:
 * each with its queue and state ("" for both once it was deleted), when it finished and its
 * result (JSON text or NULL). Borrowed for the call of each. A job of the queue without parents
 * has none; verdict DB_Q_JOB_NOT_FOUND when the queue has no such job. */
struct db_job_parent_row {
    int64_t position, id;
    const char *queue, *state, *finished_at, *result;
};
typedef void (*db_job_parent_each)(const struct db_job_parent_row *p, void *ctx);
enum db_status db_jobs_parents(struct db_pool *pool, const char *queue, int64_t id, int64_t after,
                               int limit, db_job_parent_each each, void *ctx,
                               enum db_queue_verdict *verdict, struct db_error *err);

/* db_jobs_enqueue in the caller's transaction, which it never commits: a refusal (verdict not
 * DB_Q_OK, or DB_ABORTED) leaves the caller to roll back. */
enum db_status db_jobs_enqueue_in(struct db_conn *c, const char *queue,
                                  const struct db_job_in *jobs, size_t n, struct db_job_ref *out,
                                  struct db_dep_refusal *refusal, enum db_queue_verdict *verdict,
                                  struct db_error *err);

/* Jobs of a queue with id > after, optionally in one state, in id order (no history): at most
 * limit, and no more than fit in budget bytes of JSON text (payload, progress, result and last
 * error together; 0: no bound), though always the first. The statement stops reading at the
 * first job past the budget, so PostgreSQL holds no more than the page either. *more is set
 * when the budget (not the limit) ended the page and another job follows. */
typedef void (*db_job_each)(const struct db_job *j, void *ctx);
enum db_status db_jobs_list(struct db_pool *pool, const char *queue, const char *state,
                            int64_t after, int limit, long long budget, db_job_each each, void *ctx,
                            int *more, enum db_queue_verdict *verdict, struct db_error *err);

/* Operator retry: a failed job becomes pending with a fresh set of attempts. */
enum db_status db_jobs_retry(struct db_pool *pool, const char *queue, int64_t id,
                             enum db_queue_verdict *verdict, struct db_error *err);
/* Cancel: an unfinished job becomes failed (a worker's later writes are refused as terminal),
 * or is deleted when its queue keeps no cancelled jobs (a worker's later writes: not found). */
enum db_status db_jobs_cancel(struct db_pool *pool, const char *queue, int64_t id,
                              enum db_queue_verdict *verdict, struct db_error *err);

/* Bulk operator actions: one page of a queue's jobs, in id order after a cursor, each page
 * one transaction and one statement (db/job_bulk.c). The filter: */
#define DB_JOB_PAGE_MAX 1000 /* jobs a page may take */
struct db_job_filter {
    const char *state;           /* one state the action applies to, or NULL: every one */
    const char *concurrency_key; /* or NULL: any key, none included */
    int64_t after;               /* jobs with ids above it (0: from the first) */
    int limit;                   /* at most this many, 1 to DB_JOB_PAGE_MAX */
};
/* What a page changed. */
struct db_job_page {
    int64_t *ids; /* the jobs changed, in id order; owned: db_job_page_clear */
    size_t n;
    int64_t deleted; /* cancel: how many of them were deleted (their queue keeps none) */
    int64_t next;    /* the cursor of the next page (its after), or 0: this was the last */
};
void db_job_page_clear(struct db_job_page *p);
/* Retries (as db_jobs_retry) the failed and cancelled jobs of the page: locked in id order, each
 * judged again on its latest version (one that changed meanwhile is left as it is). */
enum db_status db_jobs_retry_page(struct db_pool *pool, const char *queue,
                                  const struct db_job_filter *f, struct db_job_page *out,
                                  enum db_queue_verdict *verdict, struct db_error *err);
/* Cancels (as db_jobs_cancel) the pending and processing jobs of the page, likewise: a
 * processing job is cancelled only when its owner's settlement has not committed first, and
 * then its owner's settlement is refused. */
enum db_status db_jobs_cancel_page(struct db_pool *pool, const char *queue,
                                   const struct db_job_filter *f, struct db_job_page *out,
                                   enum db_queue_verdict *verdict, struct db_error *err);

struct db_claimed {
    int64_t id, fence;
    int attempt, priority;
    int reclaimed; /* taken over from an expired lease */
    char lease_expires_at[DB_TIME_TEXT];
    int lease_seconds;     /* the lease's length: what the claim asked for, else the queue's */
    char *payload;         /* JSON text, owned: db_claimed_clear */
    char *concurrency_key; /* or NULL; owned likewise */
};
void db_claimed_clear(struct db_claimed *c, size_t n);

/* Claims and settlements that arrive while another of the same queue runs in this process wait
 * for it and then run together, one transaction for all of them (db/combine.h): fewer
 * statements, COMMITs and WAL flushes, and claimers that no longer skip each other's locked
 * rows. Counts since the process started. */
struct db_leases_combined {
    unsigned long long claims, claim_transactions, settlements, settlement_transactions;
};
void db_leases_combined_get(struct db_leases_combined *out);

/* Jobs deleted as they ended because their queue keeps none of their final state (retention
 * 0), since the process started. */
struct db_jobs_deleted {
    unsigned long long succeeded, failed, cancelled;
};
void db_jobs_deleted_get(struct db_jobs_deleted *out);

/* 1 when this process has seen the queue limited (a concurrency or rate limit): a settlement
 * there may free a slot that a waiting claim can take. A hint, possibly stale. */
int db_queue_limited_hint(const char *queue);

/* Claims up to max_jobs claimable jobs for owner in one statement (pending and due, or
 * processing with an expired lease), highest priority first, then oldest. lease_seconds 0: the
 * queue's. budget: the claim takes no more jobs than their payloads' JSON text fits in budget
 * bytes (0: no bound), though always one when any is claimable; the jobs it leaves stay
 * claimable. out must hold max_jobs entries; *n gets how many were claimed. Claims combined with
 * others (above) leave out an expired lease without attempts left, which only its own owner
 * may re-claim: a claim that runs alone, or the janitor, takes it. */
enum db_status db_leases_claim(struct db_pool *pool, const char *queue, const char *owner,
                               int max_jobs, int lease_seconds, long long budget,
                               struct db_claimed *out, size_t *n, enum db_queue_verdict *verdict,
                               struct db_error *err);

/* A fenced write's identity of the lease. */
struct db_lease {
    int64_t job_id;
    const char *owner;
    int64_t fence;
};

/* Heartbeat: extends the lease by lease_seconds (0: the queue's) and stores progress (JSON text
 * or NULL to keep it). expires_at (DB_TIME_TEXT bytes) gets the new expiry. */
enum db_status db_leases_heartbeat(struct db_pool *pool, const char *queue,
                                   const struct db_lease *l, int lease_seconds,
                                   const char *progress, char *expires_at,
                                   enum db_queue_verdict *verdict, struct db_error *err);
enum db_status db_leases_complete(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  const char *result, enum db_queue_verdict *verdict,
                                  struct db_error *err);
/* Fail: back to pending after the backoff when retry is set and attempts are left, else
 * failed. new_state (DB_JOB_STATE_TEXT bytes) says which. */
enum db_status db_leases_fail(struct db_pool *pool, const char *queue, const struct db_lease *l,
                              const char *error, int retry, char *new_state,
                              enum db_queue_verdict *verdict, struct db_error *err);
/* Hand-back refunds the attempt; release spends it. Neither needs a live lease. */
enum db_status db_leases_handback(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  enum db_queue_verdict *verdict, struct db_error *err);
enum db_status db_leases_release(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                 char *new_state, enum db_queue_verdict *verdict,
                                 struct db_error *err);

struct db_settlement {
    struct db_lease lease;
    const char *result;            /* JSON text or NULL */
    enum db_queue_verdict verdict; /* out: DB_Q_OK or the refusal */
};
/* Completes n leases in one statement and one transaction, each fenced on its own. Concurrent
 * settlements of one queue may share that transaction (see db_leases_combined_get). */
enum db_status db_leases_complete_batch(struct db_pool *pool, const char *queue,
                                        struct db_settlement *items, size_t n,
                                        enum db_queue_verdict *verdict, struct db_error *err);

/* Janitor pass: expired leases without attempts left become failed (history: lease_expired),
 * found across all queues by one statement (repeated while a batch of batch rows comes back
 * full); then the queues whose purge is due (rowlock.upkeep) are claimed, FOR UPDATE SKIP
 * LOCKED so that processes share them, and their finished jobs past retention purged, at most
 * batch each, each queue in its own transaction and due again when it is next needed. A queue
 * whose purge fails is reported (failed set, with its error), due again at once, and the pass
 * goes on. each is called once per queue with expirations (visited 0) and once per queue
 * visited. Returns the status of the sweep and of the claims of due queues. */
struct db_queue_upkeep {
    const char *queue;
    int64_t expired, purged;
    int visited;                   /* a due queue's purge, not the expiry sweep */
    const struct db_error *failed; /* the purge failed: NULL when it did not */
};
typedef void (*db_queue_janitor_each)(const struct db_queue_upkeep *u, void *ctx);
enum db_status db_queues_janitor(struct db_pool *pool, int batch, db_queue_janitor_each each,
                                 void *ctx, struct db_error *err);
/* The queues' upkeep (db/upkeep.h), the purges db_queues_janitor runs: named by the family's
 * descriptor. */
struct db_upkeep;
extern const struct db_upkeep db_queues_upkeep;

/* For metrics: per queue counts of the first limit queues by name (ROWLOCK_METRICS_MAX_RESOURCES;
 * how many there are in all is db_resources_summary's), and the two things that slow every
 * Postgres queue. All in one statement; when that fails, each queue is read by its own: a queue
 * whose counts cannot be read is reported to each with s NULL (and its error), and the others are
 * still read. Returns the status of reading the queue list and the vacuum health. With budget_ms
 * above 0 the one statement may take that long at most: past it, each is not called, the vacuum
 * health is still set, and DB_ERR_TIMEOUT is returned. */
typedef void (*db_queue_stats_each)(const char *queue, const struct db_queue_stats *s,
                                    const struct db_error *failed, void *ctx);
enum db_status db_queues_stats(struct db_pool *pool, int limit, int budget_ms,
                               db_queue_stats_each each, void *ctx, int64_t *dead_tuples,
                               double *oldest_xact_age_seconds, struct db_error *err);

#endif
