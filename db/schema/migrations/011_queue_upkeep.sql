-- Migration 11: the queue janitor follows what is due, as migration 10 made the topic
-- and ledger janitors do, instead of running two statements for every queue on every pass.
-- A queue's upkeep has two kinds of work, found two ways:
-- - finished jobs past the queue's retention: rowlock.queue_upkeep keeps when each queue's purge
--   is next due (the oldest finished job's time plus the retention, at most an hour on), made by
--   a trigger when the queue is created (so the previous release, which knows nothing of it,
--   keeps it complete), due at once when the retention changes, deleted with the queue. The
--   janitor claims due rows with FOR UPDATE SKIP LOCKED, as for topics (db/queues.c).
-- - expired leases without attempts left: their moment is a lease expiry, set by every claim and
--   heartbeat, which no upkeep row could follow without a write on the claim's path. They are
--   found across all queues by one statement a pass, on jobs_lease_final: an index of only the
--   jobs that are processing their last attempt (with the default of 5 attempts, none of the
--   jobs most claims take), ordered by lease expiry, so a pass reads only the expired ones.
-- Expand only: a table, a function, triggers and an index the previous release ignores (its
-- claims and settlements keep the index, its janitor still visits every queue); serves_from
-- stays 6. The index is built while rowlock.jobs is locked against writes (a migration runs in
-- one transaction): on a table of millions of jobs that takes seconds.
CREATE TABLE rowlock.queue_upkeep (
    queue_id bigint      PRIMARY KEY REFERENCES rowlock.queues (id) ON DELETE CASCADE,
    due_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX queue_upkeep_due ON rowlock.queue_upkeep (due_at);

INSERT INTO rowlock.queue_upkeep (queue_id) SELECT id FROM rowlock.queues;

CREATE FUNCTION rowlock.queue_upkeep_due() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rowlock.queue_upkeep (queue_id) VALUES (NEW.id)
        ON CONFLICT (queue_id) DO UPDATE SET due_at = now();
    RETURN NULL;
END $$;
CREATE TRIGGER queue_upkeep_insert AFTER INSERT ON rowlock.queues
    FOR EACH ROW EXECUTE FUNCTION rowlock.queue_upkeep_due();
CREATE TRIGGER queue_upkeep_update AFTER UPDATE OF retention_seconds ON rowlock.queues
    FOR EACH ROW WHEN (OLD.retention_seconds IS DISTINCT FROM NEW.retention_seconds)
    EXECUTE FUNCTION rowlock.queue_upkeep_due();

CREATE INDEX jobs_lease_final ON rowlock.jobs (claimable_at)
    WHERE state = 'processing' AND attempts >= max_attempts;
