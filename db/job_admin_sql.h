/* An operator's retry and cancel of jobs as named SQL fragments, written once and composed into
 * the statements of one job (db/queues.c) and of a page of jobs (db/job_bulk.c); only those two
 * include it. The statements themselves, and what they return, stay in those files. */
#ifndef DB_JOB_ADMIN_SQL_H
#define DB_JOB_ADMIN_SQL_H

#include "db/queues_internal.h"

/* ---- retry (j is rowlock.jobs) ---- */

/* What an operator may retry: a job that failed for good or was cancelled. */
#define JOB_RETRYABLE "j.state IN ('failed', 'cancelled')"
/* The retry: pending and due now, with a fresh set of attempts. */
#define JOB_RETRY_SET                                                                              \
    "state = 'pending', attempts = 0, run_at = now(), claimable_at = now(), finished_at = NULL, "  \
    "updated_at = now()"

/* ---- cancel ---- */

/* What an operator may cancel: an unfinished job (pending, scheduled or retrying included). */
#define JOB_CANCELLABLE "j.state IN ('waiting', 'pending', 'processing')"
/* The CTE q: whether queue qid keeps no cancelled jobs (q.drop), so that a cancel deletes them. */
#define JOB_CANCEL_QUEUE(qid)                                                                      \
    "q AS (SELECT " QUEUE_RETENTION("q.", "cancelled") " = 0 AS drop FROM rowlock.queues q "       \
                                                       "WHERE q.id = " qid ")"
/* The cancel of the jobs of the CTE target (its id column: jobs locked FOR UPDATE, each then
 * cancelled when it is still cancellable on its latest version), after q. A job becomes
 * cancelled, with last_error {"cancelled": true} (as a cancel wrote before cancelled was a state
 * of its own), or is deleted when its queue keeps no cancelled jobs; its owner's next fenced
 * write is refused as cancelled (lease_verdict), or as not found. A running attempt ends as
 * failed; a pending job's last attempt has ended already. The CTEs w (kept: id, fence), b and
 * gone (deleted: id), with JOBS_GONE's. */
/* clang-format off */
#define JOBS_CANCEL \
    "w AS (UPDATE rowlock.jobs j SET state = 'cancelled', owner = NULL, lease_expires_at = NULL, " \
    "  claimable_at = NULL, finished_at = now(), updated_at = now(), " \
    "  attempt_ended_at = CASE WHEN j.state = 'processing' THEN now() ELSE j.attempt_ended_at " \
    "    END, " \
    "  attempt_outcome = CASE WHEN j.state = 'processing' THEN 'failed' ELSE j.attempt_outcome " \
    "    END FROM target, q " \
    "  WHERE j.id = target.id AND " JOB_CANCELLABLE " AND NOT (q.drop AND " JOB_CHILDLESS ") " \
    "  RETURNING j.id, j.fence), " \
    "b AS (UPDATE rowlock.job_bodies b SET last_error = '{\"cancelled\": true}' FROM w " \
    "  WHERE b.job_id = w.id), " \
    "gone AS (DELETE FROM rowlock.jobs j USING target, q WHERE j.id = target.id " \
    "  AND " JOB_CANCELLABLE " AND q.drop AND " JOB_CHILDLESS " " \
    "  RETURNING " JOBS_GONE_RETURNING("'cancelled'") "), " JOBS_GONE("gone")
/* clang-format on */

#endif
