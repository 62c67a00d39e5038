-- Migration 16: a job's body goes with its job by one statement a deleting statement, not by a
-- foreign key's cascade.
--
-- rowlock.job_bodies referenced rowlock.jobs with ON DELETE CASCADE. PostgreSQL carries a
-- cascade out row by row: for every job deleted, a trigger runs its own DELETE of the body, and
-- for every body inserted, another locks the job's row (FOR KEY SHARE) to check that it exists.
-- On a queue that deletes its jobs as they end (succeeded retention 0), those per-row statements
-- were a tenth of PostgreSQL's CPU a job (tests/bench/queues.sh, system rowlock-deleted). The
-- foreign key is replaced by a statement-level trigger on rowlock.jobs: after any statement that
-- deletes jobs (a settlement of a queue that keeps none, the purge, a queue's delete through the
-- queues' own cascade, whichever build runs it) it deletes those jobs' bodies in one statement,
-- by the primary key of rowlock.job_bodies. The check at insert is not replaced: the only
-- statements that insert bodies (the enqueue, a schedule's fire) insert the job in the same
-- statement, and a job's id is never reused.
--
-- Expand only: builds of schema 12 to 15 delete jobs and find their bodies gone as before, and
-- never relied on the check; serves_from stays 12.
CREATE FUNCTION rowlock.job_bodies_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- an array of ids, so that the plan is always the primary key's, whatever the count
    DELETE FROM rowlock.job_bodies b WHERE b.job_id = ANY (ARRAY(SELECT id FROM gone_jobs));
    RETURN NULL;
END $$;

CREATE TRIGGER job_bodies_gone AFTER DELETE ON rowlock.jobs
    REFERENCING OLD TABLE AS gone_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION rowlock.job_bodies_gone();

ALTER TABLE rowlock.job_bodies DROP CONSTRAINT job_bodies_job_id_fkey;
