-- Migration 22: jobs that wait for their parents. A job enqueued with parents is "waiting" until
-- every parent has settled; the parents' completions release it (the last one makes it pending),
-- and a parent that fails for good or is cancelled settles it by its policy.
--
-- The graph lives on the job rows, not in an edge table: a parent's finishing UPDATE reads its
-- children from its own RETURNING, the row's latest version, so a child linked while that UPDATE
-- waited for the parent's row is never missed (an edge row would be invisible to the finishing
-- statement's snapshot).
--   parents            the parents as enqueued, in the order given; never changed
--   waiting_on         how many parents are not settled yet (the child's row lock orders the
--                      decrements of parents finishing at once)
--   children           every job that named this one a parent, appended as they are linked
--   on_parent_failure  what a parent that fails for good or is cancelled does to this job:
--                      cancel it, or count that parent settled and run it anyway
--   workflow_id        the jobs enqueued together with dependencies (the first one's id)
--
-- A plain job: five NULLs. A waiting job is in none of the claim indexes (jobs_pending and
-- jobs_leased are partial on other states) and in jobs_listed (listed and counted); its
-- claimable_at is its run_at, as a pending job's, so jobs_check5 holds as it is.
--
-- Expand only: builds of schema 17 to 21 never write the state or the columns, so serves_from
-- stays 17. The widened state check is added NOT VALID: every row meets it already (it admits one
-- more state), so the table is not scanned under its lock.
ALTER TABLE rowlock.jobs
    ADD COLUMN parents bigint[],
    ADD COLUMN waiting_on integer CHECK (waiting_on >= 0),
    ADD COLUMN children bigint[],
    ADD COLUMN on_parent_failure text CHECK (on_parent_failure IN ('cancel', 'run')),
    ADD COLUMN workflow_id bigint,
    DROP CONSTRAINT jobs_state_check,
    ADD CONSTRAINT jobs_state_check
        CHECK (state IN ('waiting', 'pending', 'processing', 'succeeded', 'failed', 'cancelled'))
        NOT VALID,
    ADD CONSTRAINT jobs_waiting_check CHECK (state <> 'waiting' OR waiting_on > 0) NOT VALID;

-- A workflow's jobs, across queues: its progress. Plain jobs have no entry.
CREATE INDEX jobs_workflow ON rowlock.jobs (workflow_id, id) WHERE workflow_id IS NOT NULL;
