/* The lease protocol's predicates on rowlock.jobs as named SQL fragments, written once and
 * composed into every statement that needs them: the claims and fenced writes of db/leases.c and
 * the janitor's expiry sweep of db/queue_upkeep.c; only those two include it. */
#ifndef DB_LEASE_SQL_H
#define DB_LEASE_SQL_H

/* ---- the protocol's predicates (j is rowlock.jobs; $3 owner, $4 fence) ---- */

/* Claimable: due, and either pending or an expired lease that still has an attempt to give
 * (or is re-presented by the same owner, which spends none). claimable_at is run_at for
 * pending jobs and lease_expires_at for processing ones, so "due" is one indexed range: of
 * jobs_pending (migration 17) for pending jobs, in claim order, and of jobs_leased for expired
 * leases. A claim takes the two as two branches (CLAIM_LOCK in db/leases.c). */
#define LEASE_DUE     "j.claimable_at <= now()"
#define LEASE_PENDING "j.state = 'pending' AND " LEASE_DUE
#define LEASE_EXPIRED "j.state = 'processing' AND " LEASE_DUE
/* An expired lease any claimer may take over: it has an attempt left. */
#define LEASE_TAKEABLE "j.attempts < j.max_attempts"
/* ... or that owner may: its own expired lease, re-presented, spends no attempt. */
#define LEASE_TAKEABLE_BY(owner) LEASE_TAKEABLE " OR j.owner = " owner
/* Spent: a processing job whose last attempt is out; once due (its lease ran out) only the
 * janitor's expiry takes it, to failed. The partial index jobs_lease_final (migration 11) has
 * this predicate. */
#define LEASE_SPENT "j.state = 'processing' AND j.attempts >= j.max_attempts"
/* The attempt a claim by owner opens: the same one when owner re-presents its own expired
 * lease, else the next (r is the row as it was). */
#define LEASE_NEXT_ATTEMPT(r, owner)                                                               \
    "CASE WHEN " r ".state = 'processing' AND " r ".owner = " owner " THEN " r ".attempts "        \
    "ELSE " r ".attempts + 1 END"
/* Owned: this owner, this fence, still processing. Hand-back and release need only this: a
 * worker whose lease ran out may still give the job back (nobody else has claimed it, or the
 * fence would differ), and refusing it would only delay the job until the lease is taken over. */
#define LEASE_OWNED_BY(owner, fence)                                                               \
    "j.owner = " owner " AND j.fence = " fence " AND j.state = 'processing'"
#define LEASE_OWNED LEASE_OWNED_BY("$3", "$4")
/* Fenced writes (heartbeat, complete, fail) also need a live lease: at expiry a takeover is
 * already licensed, so the old owner must not win that race. Live is judged on the clock as the
 * write runs, not at its transaction's start: a claim of a limited queue counts a lease whose
 * expiry it saw pass as no longer holding its slot, and writes its row (db/leases.c,
 * CLAIM_LIMITED), so that a write that found the lease live before waits for that claim and
 * judges the row again, on a clock past the expiry. */
#define LEASE_LIVE_NOW              "j.lease_expires_at > clock_timestamp()"
#define LEASE_LIVE_BY(owner, fence) LEASE_OWNED_BY(owner, fence) " AND " LEASE_LIVE_NOW
#define LEASE_LIVE                  LEASE_LIVE_BY("$3", "$4")

/* The row as it is, for classifying a refusal (LEASE_AS_WAS: id, state, owner, fence, live). A
 * fenced write's update takes the row's lock itself, re-checking its predicate on the row's
 * latest version if another transaction held it; only when it refused does LEASE_REFUSED lock
 * the job and read it (made to run after the update w by reading it), so that the verdict is
 * judged on the row as it is once whoever held it committed. Locking first would write a
 * row-lock record and look the row up twice for every write that applies. */
#define LEASE_AS_WAS "j.id, j.state, j.owner, j.fence, " LEASE_LIVE_NOW " AS live"
#define LEASE_JOB    "j.id = $1 AND j.queue_id = $2"
#define LEASE_REFUSED_AFTER(done)                                                                  \
    "target AS (SELECT " LEASE_AS_WAS " FROM rowlock.jobs j "                                      \
    "WHERE " LEASE_JOB " AND NOT EXISTS (SELECT FROM " done ") FOR UPDATE)"
#define LEASE_REFUSED LEASE_REFUSED_AFTER("w")
/* One row: state, owner, fence, live (all NULL when applied, or when there is no such job),
 * applied, extra, deleted (done: the CTE of the row the write applied to, when it did; deleted:
 * SQL of whether the write deleted the job, its queue keeping none in the state it ended in). */
#define LEASE_RESULT_OF(done, extra, deleted)                                                      \
    "SELECT target.state, target.owner, target.fence, target.live, " done                          \
    ".id IS NOT NULL, " extra ", " deleted " FROM (SELECT) one LEFT JOIN " done                    \
    " ON true LEFT JOIN target ON true"
#define LEASE_RESULT(extra) LEASE_RESULT_OF("w", extra, "false")
/* A settlement that ends the job in a final state comes in two: kept (its update, w, when the
 * queue keeps jobs of that state) or deleted (gone, when it keeps none, with JOBS_GONE). done is
 * the one that applied. */
#define LEASE_DONE "done AS (SELECT id FROM w UNION ALL SELECT id FROM gone)"

/* Ends the job's latest attempt (recorded on its row, see the schema) with this outcome. */
#define ATTEMPT_END(outcome) "attempt_ended_at = now(), attempt_outcome = '" outcome "'"

#endif
