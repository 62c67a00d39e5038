-- Migration 17: the claim and listing indexes of rowlock.jobs become partial by state, so that a
-- claim (pending to processing) writes an entry in one of them instead of two.
--
-- An update that cannot be HOT writes an entry in every index of the table whose predicate the
-- new row version meets. A claim writes the primary key's, jobs_claim's (the lease's expiry, so
-- that an expired lease can be taken over) and jobs_listing's (the new state). With these three,
-- a pending job has an entry in jobs_pending and jobs_listed, a processing one in jobs_leased
-- only, a finished one in jobs_listed (and jobs_finished_state): a claim writes the primary
-- key's and jobs_leased's, and the listing and the counts of processing jobs read jobs_leased,
-- whose rows are only the leases of the queue.
--   jobs_pending: the claim of pending jobs, in claim order (priority, due time, id).
--   jobs_leased:  the takeover of expired leases (a range of lease expiry), processing jobs
--                 counted, listed (sorted: there are as many as leases held) and locked.
--   jobs_listed:  every other state, listed in id order and counted.
--
-- Expand only: builds of schema 12 to 16 claim through jobs_claim and list through
-- jobs_listing, which stay until a later contract migration drops them. This build needs
-- neither (the planner may still choose jobs_claim for pending jobs while it exists);
-- serves_from stays 12. Each index is built in the migration's transaction, which holds off
-- writes to rowlock.jobs while it runs: on a large table, as long as three index builds of it
-- take.
CREATE INDEX jobs_pending ON rowlock.jobs (queue_id, priority DESC, claimable_at, id)
    WHERE state = 'pending';
-- jobs_leased's predicate names claimable_at, which a processing job always has (the table's
-- check), so that only a statement that says so can use it: every fenced write says
-- state = 'processing' of the rows it joins by id, and with that alone the planner may prefer
-- a scan of the whole index (every lease held) to the primary key's lookups.
CREATE INDEX jobs_leased ON rowlock.jobs (queue_id, claimable_at)
    WHERE state = 'processing' AND claimable_at IS NOT NULL;
CREATE INDEX jobs_listed ON rowlock.jobs (queue_id, state, id) WHERE state <> 'processing';
