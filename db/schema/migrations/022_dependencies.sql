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

-- A parent that ends without succeeding settles its waiting children by their policy, in the
-- same transaction, whichever statement ended it (a fail, a release without attempts left, an
-- expiry, an operator's cancel, its queue's delete), and whichever build: the statements that
-- end jobs need not each carry the cascade, and a plain job pays for a trigger whose WHEN is
-- false (children is NULL). A success is settled by the completion's own statement
-- (db/deps_sql.h), which also gives the released jobs' queues their wake-up.
--
-- Level by level: the children of the jobs ended in the level before are read from those jobs'
-- latest versions (rows this transaction wrote, so held locked: a child linked to them is linked
-- before, and is in the array, or after this transaction, and is then refused by the link as
-- the parent is no longer unfinished). The waiting ones are locked in id order and judged on
-- their latest versions: "cancel" ones are cancelled (and their own children are the next
-- level), "run" ones count the parent settled (and become pending when it was their last).
-- The cancel's own trigger call returns at once: one call walks the whole cascade.
CREATE FUNCTION rowlock.deps_settle() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ended bigint[];   -- per edge: the parent that ended
    kids bigint[];    -- per edge: its child
    woken text[];     -- the queues of the jobs released, to wake their claims
BEGIN
    IF current_setting('rowlock.deps_settling', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('rowlock.deps_settling', 'on', true);
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(OLD.id), array_agg(k) INTO ended, kids FROM unnest(OLD.children) k;
    ELSE
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
            FROM lk WHERE j.id = lk.id AND lk.pol = 'cancel' AND j.state = 'waiting'
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
            WHERE j.id = lk.id AND lk.pol = 'run' AND j.state = 'waiting'
            RETURNING j.queue_id, j.state)
        SELECT (SELECT array_agg(c.id) FROM can c, unnest(c.children) k),
               (SELECT array_agg(k) FROM can c, unnest(c.children) k),
               (SELECT array_agg(r.n || ' queue:' || q.name) FROM (SELECT queue_id, count(*) AS n
                    FROM rel WHERE state = 'pending' GROUP BY queue_id) r
                    JOIN rowlock.queues q ON q.id = r.queue_id)
            INTO ended, kids, woken;
        -- the wake-up of every process's waiting claims, as the listener reads it
        -- ("<count> <channel>"; the queue family's channel is "queue:<name>")
        PERFORM pg_notify('rowlock_wake_all', w) FROM unnest(woken) w;
    END LOOP;
    PERFORM set_config('rowlock.deps_settling', '', true);
    RETURN NULL;
END $$;

CREATE TRIGGER jobs_deps_settle AFTER UPDATE OF state ON rowlock.jobs
    FOR EACH ROW
    WHEN (NEW.children IS NOT NULL AND NEW.state IN ('failed', 'cancelled')
        AND OLD.state IN ('waiting', 'pending', 'processing'))
    EXECUTE FUNCTION rowlock.deps_settle();
CREATE TRIGGER jobs_deps_gone AFTER DELETE ON rowlock.jobs
    FOR EACH ROW
    WHEN (OLD.children IS NOT NULL AND OLD.state IN ('waiting', 'pending', 'processing'))
    EXECUTE FUNCTION rowlock.deps_settle();
