-- Leased work queues. The hot row (rowlock.jobs) holds only what claims and fenced writes touch;
-- payloads, results and progress live in rowlock.job_bodies. claimable_at is the one column the
-- claim index serves: run_at for a pending job, lease_expires_at for a processing one, NULL once
-- terminal.
--
-- Attempt history: a job's latest attempt (open or ended) is recorded on its own row, in the
-- attempt_* columns and fence, by the same update that claims or settles it; the claim that
-- opens the next attempt moves the superseded one into rowlock.job_attempts. A job done on its
-- first attempt, the common case, so writes no history row at all (an insert at the claim and an
-- update at the settlement cost more than a quarter of a queue's database time, and 16 claimers
-- inserting into one index's right-hand page contend for it). rowlock.job_attempt_history is
-- the whole history, both parts.

CREATE TABLE rowlock.queues (
    id                   bigserial   PRIMARY KEY,
    name                 text        NOT NULL UNIQUE,
    max_attempts         integer     NOT NULL CHECK (max_attempts > 0),
    lease_seconds        integer     NOT NULL CHECK (lease_seconds > 0),
    backoff_base_seconds double precision NOT NULL CHECK (backoff_base_seconds >= 0),
    backoff_max_seconds  double precision NOT NULL CHECK (backoff_max_seconds >= 0),
    retention_seconds    integer     NOT NULL CHECK (retention_seconds > 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rowlock.jobs (
    id               bigserial   PRIMARY KEY,
    queue_id         bigint      NOT NULL REFERENCES rowlock.queues (id) ON DELETE CASCADE,
    state            text        NOT NULL CHECK (state IN ('pending', 'processing', 'succeeded',
                                                           'failed')),
    priority         integer     NOT NULL DEFAULT 0,
    run_at           timestamptz NOT NULL DEFAULT now(),
    claimable_at     timestamptz,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL CHECK (max_attempts > 0),
    owner            text,
    fence            bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    dedupe_key       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    -- the latest attempt (fence is its fencing token; none while fence is 0)
    attempt_no         integer,
    attempt_owner      text,
    attempt_claimed_at timestamptz,
    attempt_ended_at   timestamptz,
    attempt_outcome    text CHECK (attempt_outcome IN ('completed', 'failed', 'handed_back',
                                                       'released', 'lease_expired')),
    -- "owned" and "processing" are the same thing: an owned row is never pending
    CHECK ((owner IS NOT NULL) = (state = 'processing')),
    -- the latest attempt is open exactly while the job is processing
    CHECK ((fence = 0) = (attempt_owner IS NULL)),
    CHECK (fence = 0 OR (state = 'processing') = (attempt_outcome IS NULL)),
    CHECK ((attempt_outcome IS NULL) = (attempt_ended_at IS NULL)),
    CHECK ((lease_expires_at IS NOT NULL) = (state = 'processing')),
    CHECK ((claimable_at IS NULL) = (state IN ('succeeded', 'failed')))
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01,
        autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0);

-- The claim index: one range, no OR.
CREATE INDEX jobs_claim ON rowlock.jobs (queue_id, priority DESC, claimable_at, id)
    WHERE claimable_at IS NOT NULL;
CREATE UNIQUE INDEX jobs_dedupe ON rowlock.jobs (queue_id, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('pending', 'processing');
CREATE INDEX jobs_listing ON rowlock.jobs (queue_id, state, id);
CREATE INDEX jobs_finished ON rowlock.jobs (queue_id, finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE rowlock.job_bodies (
    job_id     bigint PRIMARY KEY REFERENCES rowlock.jobs (id) ON DELETE CASCADE,
    payload    jsonb  NOT NULL,
    progress   jsonb,
    result     jsonb,
    last_error jsonb
) WITH (fillfactor = 80);

-- Superseded attempts. No foreign key to rowlock.jobs: the only statement that writes here is
-- the claim, which holds the job's row lock, so the job exists by construction, and a per-row
-- check (a KEY SHARE lock and a lookup) would cost a sixth of a claim. The purge deletes a
-- job's attempts with the job.
CREATE TABLE rowlock.job_attempts (
    job_id     bigint      NOT NULL,
    fence      bigint      NOT NULL,
    attempt    integer     NOT NULL,
    owner      text        NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    ended_at   timestamptz,
    outcome    text CHECK (outcome IN ('completed', 'failed', 'handed_back', 'released',
                                       'lease_expired')),
    PRIMARY KEY (job_id, fence)
) WITH (fillfactor = 80);

-- Every attempt of every job: the superseded ones, then each job's latest.
CREATE VIEW rowlock.job_attempt_history AS
    SELECT job_id, fence, attempt, owner, claimed_at, ended_at, outcome
    FROM rowlock.job_attempts
    UNION ALL
    SELECT id, fence, attempt_no, attempt_owner, attempt_claimed_at, attempt_ended_at,
           attempt_outcome
    FROM rowlock.jobs WHERE fence > 0;
