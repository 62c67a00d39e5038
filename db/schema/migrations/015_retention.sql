-- Migration 15: finished jobs are kept per queue and per final state, and a dedupe key can be
-- held for a window that outlives its job.
--
-- Retention: a queue's succeeded, failed and cancelled jobs are kept for their state's
-- retention, NULL meaning retention_seconds (what builds before this one set, and still read
-- as the retention of every final state). 0 means not kept: the statement that finishes the
-- job deletes it, with its body and attempt history, in the same transaction. A cancelled job
-- is a failed one whose last_error is {"cancelled": true}.
--
-- Dedupe windows: rowlock.job_dedupe holds a queue's dedupe key for a window from the enqueue
-- that took it (none for an enqueue without a window), whatever happens to its job meanwhile
-- (job_id names it; final_state is set when the job is deleted, so that a duplicate can still
-- say how it ended). A key is also held, as before, while a job with it is pending or processing
-- (jobs_dedupe). Every enqueue with a key takes the key's row with INSERT ... ON CONFLICT DO
-- UPDATE, which locks it: two enqueues of one key wait for each other, and a completion that
-- deletes the job leaves the row where it was. The janitor deletes rows whose window has passed
-- (job_dedupe_expiry). The primary key carries the queue's id (the distribution column,
-- docs/operations/sharding.md); no foreign key to the queue, whose delete removes its rows (a
-- build before this one leaves them until they expire: ids are never reused).
--
-- The purge of finished jobs is per state: jobs_finished becomes (queue_id, state,
-- finished_at), so that each state's expired jobs are one range.
--
-- Expand only: columns with defaults or NULL, a table and a trigger that builds of schema 12 to
-- 14 ignore, and an index they can still use (their purge and its next time scan the queue's
-- part of it); serves_from stays 12.
ALTER TABLE rowlock.queues
    ADD COLUMN succeeded_retention_seconds integer CHECK (succeeded_retention_seconds >= 0),
    ADD COLUMN failed_retention_seconds    integer CHECK (failed_retention_seconds >= 0),
    ADD COLUMN cancelled_retention_seconds integer CHECK (cancelled_retention_seconds >= 0),
    ADD COLUMN dedupe_window_seconds       integer NOT NULL DEFAULT 0
        CHECK (dedupe_window_seconds >= 0);

CREATE TRIGGER upkeep_update_retention AFTER UPDATE OF succeeded_retention_seconds,
    failed_retention_seconds, cancelled_retention_seconds ON rowlock.queues
    FOR EACH ROW WHEN (OLD.succeeded_retention_seconds IS DISTINCT FROM
                       NEW.succeeded_retention_seconds OR
                       OLD.failed_retention_seconds IS DISTINCT FROM NEW.failed_retention_seconds OR
                       OLD.cancelled_retention_seconds IS DISTINCT FROM
                       NEW.cancelled_retention_seconds)
    EXECUTE FUNCTION rowlock.upkeep_due('queues');

CREATE TABLE rowlock.job_dedupe (
    queue_id    bigint      NOT NULL,
    dedupe_key  text        NOT NULL,
    job_id      bigint      NOT NULL,
    expires_at  timestamptz NOT NULL,
    final_state text CHECK (final_state IN ('succeeded', 'failed', 'cancelled')),
    PRIMARY KEY (queue_id, dedupe_key)
) WITH (fillfactor = 80);
CREATE INDEX job_dedupe_expiry ON rowlock.job_dedupe (expires_at);

CREATE INDEX jobs_finished_state ON rowlock.jobs (queue_id, state, finished_at)
    WHERE finished_at IS NOT NULL;
DROP INDEX rowlock.jobs_finished;
