-- Migration 19: a queue can be paused. While rowlock.queues.paused_at is set (when the queue
-- was paused), enqueues go on and claims hand out nothing; leases already held go on.
--
-- Expand only: a nullable column, NULL (running) for every queue. Builds of schema 17 and 18
-- ignore it, so serves_from stays 17; such a build still hands out jobs of a paused queue
-- (docs/operations/upgrades.md).
ALTER TABLE rowlock.queues ADD COLUMN paused_at timestamptz;
