-- Migration 22: jobs that wait for their parents. A job enqueued with parents is "waiting" until
-- every parent has settled: each parent's end is taken off its count (the last one makes it
-- pending), and a parent that fails for good or is cancelled settles it by its policy.
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
--
-- A plain job: four NULLs. A waiting job is in none of the claim indexes (jobs_pending and
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
    DROP CONSTRAINT jobs_state_check,
    ADD CONSTRAINT jobs_state_check
        CHECK (state IN ('waiting', 'pending', 'processing', 'succeeded', 'failed', 'cancelled'))
        NOT VALID,
    ADD CONSTRAINT jobs_waiting_check CHECK (state <> 'waiting' OR waiting_on > 0) NOT VALID;

-- A parent's end settles its waiting children, in the same transaction: the completions call
-- deps_settle_edges once a statement with the children of the jobs they ended (db/leases.c), the
-- trigger below calls it for every other end (a fail, a release without attempts left, an
-- expiry, an operator's cancel), whichever statement or build ended it, and a queue's delete
-- for the unfinished jobs it deletes. A plain job pays for none of it: the completions call
-- nothing without children, and the trigger's WHEN is false (children is NULL).
--
-- The function's statements take snapshots of their own, after the ending statement locked the
-- parents' rows: a child linked to a parent by a transaction that held that row (the link locks
-- its parents) committed before, so it is in the parent's children and its row is visible here.
-- (The ending statement's own snapshot, taken before it waited for the row, would not show it.)
--
-- Level by level, from edges (ended[i] is a parent of kids[i], read from the parents' latest
-- versions: rows this transaction wrote, held locked, so a child linked to them later finds
-- them ended): the waiting children are locked in id order and their counts taken down on their
-- latest versions (an UPDATE re-reads a row changed by a transaction committed after its
-- snapshot), so two parents ending at once take one each, in turn, and only the second makes
-- the child pending, after both committed. Parents that succeeded (ok) take themselves off each
-- child's count; parents that did not cancel their "cancel" children (whose own children are the
-- next level) and count as settled for their "run" children. The cascade's cancels fire the
-- trigger, which returns at once while rowlock.deps_settling is on: one call walks the whole
-- cascade. The queues of released jobs are notified on rowlock_wake_all, which every process's
-- listener delivers ("<count> queue:<name>"). Returns how many jobs it released.
CREATE FUNCTION rowlock.deps_settle_edges(ended bigint[], kids bigint[], ok boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    woken text[];     -- "<count> queue:<name>" of the queues whose jobs were released
    released integer := 0;
    n integer;
    guarded boolean := false;
BEGIN
    WHILE coalesce(cardinality(kids), 0) > 0 LOOP
        IF NOT ok AND NOT guarded
                AND coalesce(current_setting('rowlock.deps_settling', true), '') <> 'on' THEN
            PERFORM set_config('rowlock.deps_settling', 'on', true);
            guarded := true;
        END IF;
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
                    JOIN rowlock.queues q ON q.id = r.queue_id),
               (SELECT count(*) FROM rel WHERE state = 'pending')
            INTO ended, kids, woken, n;
        PERFORM pg_notify('rowlock_wake_all', w) FROM unnest(woken) w;
        released := released + n;
        ok := false; -- the next level's parents were cancelled
    END LOOP;
    IF guarded THEN
        PERFORM set_config('rowlock.deps_settling', '', true);
    END IF;
    RETURN released;
END $$;

-- The other ends of a job with children (a failure for good, a release without attempts left,
-- an expiry, an operator's cancel): its children settled as after a failure, whichever statement
-- and build ended it. Such a statement sets finished_at, and a claim never does, so a claim of a
-- plain job does not even test the WHEN. A job with children is never deleted as it ends (its
-- queue keeping none of that end keeps it all the same), so no end is a DELETE; inside a cascade
-- the trigger does nothing: the cascade goes on.
CREATE FUNCTION rowlock.deps_settle() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('rowlock.deps_settling', true), '') <> 'on' THEN
        PERFORM rowlock.deps_settle_edges(
            array_fill(NEW.id, ARRAY[cardinality(NEW.children)]), NEW.children, false);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_deps_settle AFTER UPDATE OF finished_at ON rowlock.jobs
    FOR EACH ROW
    WHEN (NEW.children IS NOT NULL AND NEW.state IN ('failed', 'cancelled')
        AND OLD.state IN ('waiting', 'pending', 'processing'))
    EXECUTE FUNCTION rowlock.deps_settle();

-- A queue's delete (migration 18) first settles the children of its unfinished jobs, in any
-- queue, as after a failure: the jobs' rows are locked by then (db_queues_delete locks them
-- before it deletes the queue), and this statement's snapshot sees every child linked before.
CREATE OR REPLACE FUNCTION rowlock.queue_jobs_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
BEGIN
    -- one queue at a time, its id a parameter the planner can estimate (as an array of ids it
    -- takes every job for a match and scans the table)
    FOR gone IN SELECT id FROM gone_queues LOOP
        PERFORM rowlock.deps_settle_edges(array_agg(j.id), array_agg(k.id), false)
            FROM rowlock.jobs j, unnest(j.children) k(id)
            WHERE j.queue_id = gone AND j.children IS NOT NULL
                AND j.state IN ('waiting', 'pending', 'processing')
            HAVING count(*) > 0;
        DELETE FROM rowlock.jobs j WHERE j.queue_id = gone AND j.state <> 'processing';
        DELETE FROM rowlock.jobs j WHERE j.queue_id = gone AND j.state = 'processing'
            AND j.claimable_at IS NOT NULL;
    END LOOP;
    RETURN NULL;
END $$;
