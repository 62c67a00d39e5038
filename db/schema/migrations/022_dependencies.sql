-- Migration 22: jobs that wait for their parents. A job enqueued with parents is "waiting" until
-- every parent has settled: the trigger below takes each parent's end off its count (the last
-- one makes it pending), and a parent that fails for good or is cancelled settles it by its
-- policy.
--
-- The graph lives on the job rows, not in an edge table: the parent's row, locked by whatever
-- ends it, holds its children, so a child linked while the end waited for that row is never
-- missed.
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

-- A parent's end settles its waiting children, in the same transaction, whichever statement
-- ended it (a completion, a fail, a release without attempts left, an expiry, an operator's
-- cancel, its queue's delete), and whichever build. A plain job pays for a trigger whose WHEN is
-- false (children is NULL).
--
-- The trigger's statements take snapshots of their own, after the ending statement locked the
-- parent's row: a child linked to the parent by a transaction that held that row (the link locks
-- its parents) committed before, so it is in the parent's children and visible here. (The
-- ending statement's own snapshot, taken before it waited, would not see the child's row.)
--
-- Level by level: the children of the jobs ended in the level before are read from those jobs'
-- latest versions (rows this transaction wrote, held locked: a child linked to them later finds
-- them ended). The waiting ones are locked in id order and their counts taken down on their
-- latest versions (an UPDATE re-reads a row changed by a transaction committed after its
-- snapshot), so two parents ending at once take one each, in turn, and only the second makes
-- the child pending, after both committed. A parent that succeeded takes itself off each child's
-- count; one that did not cancels its "cancel" children (whose own children are the next level)
-- and is counted settled by its "run" children. The cancels' own trigger calls return at once:
-- one call walks the whole cascade. The queues of released jobs are notified on
-- rowlock_wake_all, which every process's listener delivers ("<count> queue:<name>").
CREATE FUNCTION rowlock.deps_settle() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ended bigint[];   -- per edge: the parent that ended
    kids bigint[];    -- per edge: its child
    ok boolean;       -- the level's parents succeeded
    woken text[];     -- "<count> queue:<name>" of the queues whose jobs were released
BEGIN
    IF current_setting('rowlock.deps_settling', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('rowlock.deps_settling', 'on', true);
    IF TG_OP = 'DELETE' THEN
        ok := false;
        SELECT array_agg(OLD.id), array_agg(k) INTO ended, kids FROM unnest(OLD.children) k;
    ELSE
        ok := NEW.state = 'succeeded';
        SELECT array_agg(NEW.id), array_agg(k) INTO ended, kids FROM unnest(NEW.children) k;
    END IF;
    WHILE coalesce(cardinality(kids), 0) > 0 LOOP
        WITH e AS (SELECT * FROM unnest(ended, kids) e(parent, child)),
        kid AS (SELECT child AS id, count(*) AS n, min(parent) AS cause FROM e GROUP BY child),
        lk AS (SELECT j.id, j.on_parent_failure AS pol FROM rowlock.jobs j
            WHERE j.id = ANY (ARRAY(SELECT id FROM kid)) AND j.state = 'waiting'
            ORDER BY j.id FOR NO KEY UPDATE OF j),
        can AS (UPDATE rowlock.jobs j SET state = 'cancelled', claimable_at = NULL,
                finished_at = now(), updated_at = now()
            FROM lk WHERE j.id = lk.id AND NOT ok AND lk.pol = 'cancel' AND j.state = 'waiting'
            RETURNING j.id, j.children),
        body AS (UPDATE rowlock.job_bodies b
            SET last_error = jsonb_build_object('cancelled', true, 'parent_failed', kid.cause)
            FROM can JOIN kid ON kid.id = can.id WHERE b.job_id = can.id),
        rel AS (UPDATE rowlock.jobs j SET waiting_on = greatest(j.waiting_on - kid.n, 0),
                state = CASE WHEN j.waiting_on <= kid.n THEN 'pending' ELSE 'waiting' END,
                claimable_at = CASE WHEN j.waiting_on <= kid.n THEN greatest(j.run_at, now())
                    ELSE j.claimable_at END,
                updated_at = now()
            FROM lk JOIN kid ON kid.id = lk.id
            WHERE j.id = lk.id AND (ok OR lk.pol = 'run') AND j.state = 'waiting'
            RETURNING j.queue_id, j.state)
        SELECT (SELECT array_agg(c.id) FROM can c, unnest(c.children) k),
               (SELECT array_agg(k) FROM can c, unnest(c.children) k),
               (SELECT array_agg(r.n || ' queue:' || q.name) FROM (SELECT queue_id, count(*) AS n
                    FROM rel WHERE state = 'pending' GROUP BY queue_id) r
                    JOIN rowlock.queues q ON q.id = r.queue_id)
            INTO ended, kids, woken;
        PERFORM pg_notify('rowlock_wake_all', w) FROM unnest(woken) w;
        ok := false; -- the next level's parents were cancelled
    END LOOP;
    PERFORM set_config('rowlock.deps_settling', '', true);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_deps_settle AFTER UPDATE OF state ON rowlock.jobs
    FOR EACH ROW
    WHEN (NEW.children IS NOT NULL AND NEW.state IN ('succeeded', 'failed', 'cancelled')
        AND OLD.state IN ('waiting', 'pending', 'processing'))
    EXECUTE FUNCTION rowlock.deps_settle();
CREATE TRIGGER jobs_deps_gone AFTER DELETE ON rowlock.jobs
    FOR EACH ROW
    WHEN (OLD.children IS NOT NULL AND OLD.state IN ('waiting', 'pending', 'processing'))
    EXECUTE FUNCTION rowlock.deps_settle();
