-- Migration 18: the contract half of migration 17. The claim and listing indexes over every
-- state go, and so does the jobs' foreign key to their queue, whose cascade needs one.
--
-- jobs_claim (pending and processing jobs in claim order) and jobs_listing (every job by state
-- and id) are replaced by migration 17's jobs_pending, jobs_leased and jobs_listed, which the
-- builds of schema 17 on use alone. Without them a claim writes two index entries (the primary
-- key's and jobs_leased's) instead of four, and a settlement one fewer.
--
-- rowlock.jobs referenced rowlock.queues with ON DELETE CASCADE. PostgreSQL carries a cascade
-- out as one DELETE per queue row with queue_id = $1, which no index covers once none holds a
-- queue's jobs whatever their state: a sequential scan of every job of every queue. The cascade
-- is replaced by a statement-level trigger on rowlock.queues that deletes the deleted queues'
-- jobs by the two partial indexes that together hold them all, jobs_listed (every state but
-- processing) and jobs_leased (processing); their bodies go by job_bodies_gone (migration 16).
-- The check at insert is not replaced: the statements that insert jobs lock their queue's row
-- (the enqueue, FOR KEY SHARE, from schema 17 on) or hold a row that keeps the queue from being
-- deleted (a schedule's fire: the schedules' foreign key to their queue is ON DELETE RESTRICT,
-- and the fire inserts into schedule_fires, whose foreign key locks the schedule), so no job can
-- be added to a queue whose delete has committed.
--
-- A contract: builds of schema 12 to 16 claim through jobs_claim and check enqueues by the
-- foreign key, so they no longer serve the database once it ran (serves_from 17, db/schema.c).
DROP INDEX rowlock.jobs_claim;
DROP INDEX rowlock.jobs_listing;

CREATE FUNCTION rowlock.queue_jobs_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
BEGIN
    -- one queue at a time, its id a parameter the planner can estimate (as an array of ids it
    -- takes every job for a match and scans the table)
    FOR gone IN SELECT id FROM gone_queues LOOP
        DELETE FROM rowlock.jobs j WHERE j.queue_id = gone AND j.state <> 'processing';
        DELETE FROM rowlock.jobs j WHERE j.queue_id = gone AND j.state = 'processing'
            AND j.claimable_at IS NOT NULL;
    END LOOP;
    RETURN NULL;
END $$;

CREATE TRIGGER queue_jobs_gone AFTER DELETE ON rowlock.queues
    REFERENCING OLD TABLE AS gone_queues
    FOR EACH STATEMENT EXECUTE FUNCTION rowlock.queue_jobs_gone();

ALTER TABLE rowlock.jobs DROP CONSTRAINT jobs_queue_id_fkey;
