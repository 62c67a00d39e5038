-- Migration 20: "cancelled" is a state of its own. Before it a cancelled job was a failed one
-- with last_error {"cancelled": true}; the jobs so cancelled before this migration take the new
-- state (their last_error stays).
--
-- Expand only: the checks admit one more state, and builds of schema 17 to 19 never write it, so
-- serves_from stays 17. Such a build still cancels a job the old way during a rolling upgrade
-- (a failed job with that last_error): this build purges it with the cancelled jobs, and shows it
-- as it was written (docs/operations/upgrades.md). Its counts by state leave cancelled jobs out,
-- and its operator retry refuses them (409 job_not_failed).
ALTER TABLE rowlock.jobs
    DROP CONSTRAINT jobs_state_check,
    ADD CONSTRAINT jobs_state_check
        CHECK (state IN ('pending', 'processing', 'succeeded', 'failed', 'cancelled')),
    DROP CONSTRAINT jobs_check5,
    ADD CONSTRAINT jobs_check5
        CHECK ((claimable_at IS NULL) = (state IN ('succeeded', 'failed', 'cancelled')));

-- every failed job is read for it once (no index leads with the state)
UPDATE rowlock.jobs j SET state = 'cancelled'
    FROM rowlock.job_bodies b
    WHERE b.job_id = j.id AND j.state = 'failed' AND b.last_error = '{"cancelled": true}'::jsonb;
