-- Migration 21: concurrency and rate limits, per queue and per concurrency key.
--
-- A job may carry a concurrency key (a tenant, a customer, an API account). A queue may limit
-- how many of its jobs are processing at once (concurrency_limit) and how many it hands out per
-- period (rate_limit per rate_period_seconds, a token bucket of rate_burst), and the same per
-- key: key_concurrency_limit and key_rate_* are every key's, rowlock.queue_keys a key's own
-- (an override of either). NULL: no such limit.
--
-- A claim of a queue with a limit first locks the queue's row (FOR NO KEY UPDATE, which the
-- enqueue's FOR KEY SHARE does not wait for), then counts in a statement of its own, whose
-- snapshot sees every lease the claims before it committed: claims of a limited queue run one
-- after another, and never hand out a lease past a limit. rowlock.queue_limiter keeps each
-- bucket (key '' for the queue's own) and how many due jobs a limit held back.
--
-- jobs_leased_key counts a key's leases (a claim looks up the keys of its candidates only).
--
-- Expand only: a nullable column, tables and an index builds of schema 17 to 20 ignore; such a
-- build hands out jobs past a limit while it runs (docs/operations/upgrades.md). serves_from
-- stays 17.
ALTER TABLE rowlock.jobs ADD COLUMN concurrency_key text;

ALTER TABLE rowlock.queues
    ADD COLUMN concurrency_limit       integer CHECK (concurrency_limit > 0),
    ADD COLUMN key_concurrency_limit   integer CHECK (key_concurrency_limit > 0),
    ADD COLUMN rate_limit              integer CHECK (rate_limit > 0),
    ADD COLUMN rate_period_seconds     double precision CHECK (rate_period_seconds > 0),
    ADD COLUMN rate_burst              integer CHECK (rate_burst > 0),
    ADD COLUMN key_rate_limit          integer CHECK (key_rate_limit > 0),
    ADD COLUMN key_rate_period_seconds double precision CHECK (key_rate_period_seconds > 0),
    ADD COLUMN key_rate_burst          integer CHECK (key_rate_burst > 0),
    ADD CHECK ((rate_limit IS NULL) = (rate_period_seconds IS NULL)),
    ADD CHECK ((key_rate_limit IS NULL) = (key_rate_period_seconds IS NULL));

CREATE TABLE rowlock.queue_keys (
    queue_id            bigint      NOT NULL REFERENCES rowlock.queues (id) ON DELETE CASCADE,
    key                 text        NOT NULL CHECK (key <> ''),
    concurrency_limit   integer     CHECK (concurrency_limit > 0),
    rate_limit          integer     CHECK (rate_limit > 0),
    rate_period_seconds double precision CHECK (rate_period_seconds > 0),
    rate_burst          integer     CHECK (rate_burst > 0),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK ((rate_limit IS NULL) = (rate_period_seconds IS NULL)),
    PRIMARY KEY (queue_id, key)
);

CREATE TABLE rowlock.queue_limiter (
    queue_id    bigint           NOT NULL REFERENCES rowlock.queues (id) ON DELETE CASCADE,
    key         text             NOT NULL,
    tokens      double precision NOT NULL,
    refilled_at timestamptz      NOT NULL,
    -- due jobs a claim left because of each limit (key '' only)
    held_concurrency     bigint NOT NULL DEFAULT 0,
    held_key_concurrency bigint NOT NULL DEFAULT 0,
    held_rate            bigint NOT NULL DEFAULT 0,
    held_key_rate        bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (queue_id, key)
) WITH (fillfactor = 50);

CREATE INDEX jobs_leased_key ON rowlock.jobs (queue_id, concurrency_key)
    WHERE state = 'processing' AND claimable_at IS NOT NULL AND concurrency_key IS NOT NULL;
