-- Migration 14: schedules, a family that enqueues one job into a queue at every tick of a cron
-- expression in a time zone (db/schedules.h). A schedule's row holds its next tick
-- (next_fire_at, NULL while paused or when the expression fires no more); the process that
-- fires a tick locks the row (FOR UPDATE SKIP LOCKED), enqueues the tick's job, records the
-- tick in rowlock.schedule_fires and moves next_fire_at on, all in one transaction. The
-- primary key of schedule_fires (schedule, tick) is the tick's identity: a second attempt at
-- the same tick is a duplicate, never a second job. The next tick itself is computed by the
-- service (db/cron.h) from the system's time-zone database.
--
-- A queue that schedules target cannot be deleted (the foreign key, ON DELETE RESTRICT): the
-- schedules are deleted or retargeted first.
--
-- Expand only: builds of schema 12 and 13 ignore these tables; serves_from stays 12.
CREATE TABLE rowlock.schedules (
    id                    bigserial   PRIMARY KEY,
    name                  text        NOT NULL UNIQUE,
    cron                  text        NOT NULL,
    time_zone             text        NOT NULL,
    queue_id              bigint      NOT NULL REFERENCES rowlock.queues (id) ON DELETE RESTRICT,
    payload               jsonb       NOT NULL,
    priority              integer     NOT NULL,
    max_attempts          integer     CHECK (max_attempts > 0),
    misfire               text        NOT NULL CHECK (misfire IN ('skip', 'catch_up')),
    catch_up_max          integer     NOT NULL CHECK (catch_up_max > 0),
    misfire_grace_seconds integer     NOT NULL CHECK (misfire_grace_seconds > 0),
    jitter_seconds        integer     NOT NULL CHECK (jitter_seconds >= 0),
    paused                boolean     NOT NULL,
    next_fire_at          timestamptz,
    last_fire_at          timestamptz,
    fired                 bigint      NOT NULL DEFAULT 0,
    skipped               bigint      NOT NULL DEFAULT 0,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now()
);
-- the due schedules, oldest tick first
CREATE INDEX schedules_due ON rowlock.schedules (next_fire_at) WHERE next_fire_at IS NOT NULL;
CREATE INDEX schedules_queue ON rowlock.schedules (queue_id);

-- The ticks a schedule fired (the newest few are kept: db/schedules.h) and the jobs they made;
-- a manual fire ("fire now") is recorded at the time it ran. A tick's identity is (schedule,
-- tick, false): a manual fire that happens to fall on a whole second is no tick.
CREATE TABLE rowlock.schedule_fires (
    schedule_id bigint      NOT NULL REFERENCES rowlock.schedules (id) ON DELETE CASCADE,
    fire_at     timestamptz NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    job_id      bigint      NOT NULL,
    manual      boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (schedule_id, fire_at, manual)
);

-- Upkeep (db/upkeep.h): trims each schedule's fire history.
CREATE TRIGGER upkeep_insert AFTER INSERT ON rowlock.schedules
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_due('schedules');
CREATE TRIGGER upkeep_delete AFTER DELETE ON rowlock.schedules
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_gone('schedules');
