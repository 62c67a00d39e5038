-- Leased work queues. The hot row (rowlock.jobs) holds only what claims and fenced writes touch;
-- payloads, results and progress live in rowlock.job_bodies, attempt history in
-- rowlock.job_attempts. claimable_at is the one column the claim index serves: run_at for a
-- pending job, lease_expires_at for a processing one, NULL once terminal.

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
    -- "owned" and "processing" are the same thing: an owned row is never pending
    CHECK ((owner IS NOT NULL) = (state = 'processing')),
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

-- No foreign key to rowlock.jobs: every statement that writes an attempt row holds its job's
-- row lock (the claim, the fenced writes, cancel, the janitor), so the job exists by
-- construction, and a per-row check (a KEY SHARE lock and a lookup for every claimed job) would
-- cost a sixth of a claim. The purge deletes a job's attempts with the job.
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
