-- Migration 10: when each topic's and ledger's upkeep is next due (issue 17), so that the janitor
-- claims what is due in one statement instead of visiting every resource on every pass, and
-- processes do not repeat each other's work. A row per resource, made by a trigger when the
-- resource is created (so the previous release, which knows nothing of it, keeps it complete),
-- made due at once when the setting that times the upkeep changes, and deleted with the resource.
-- The janitor claims due rows with FOR UPDATE SKIP LOCKED and moves due_at forward past the
-- claim, then sets it to when the resource's upkeep is next due (db/topics.c, db/ledger_upkeep.c).
-- Expand only: two tables, functions and triggers the previous release ignores; serves_from stays 6.
CREATE TABLE rowlock.topic_upkeep (
    topic_id bigint      PRIMARY KEY REFERENCES rowlock.topics (id) ON DELETE CASCADE,
    due_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX topic_upkeep_due ON rowlock.topic_upkeep (due_at);

CREATE TABLE rowlock.ledger_upkeep (
    ledger_id bigint      PRIMARY KEY REFERENCES rowlock.ledgers (id) ON DELETE CASCADE,
    due_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_upkeep_due ON rowlock.ledger_upkeep (due_at);

INSERT INTO rowlock.topic_upkeep (topic_id) SELECT id FROM rowlock.topics;
INSERT INTO rowlock.ledger_upkeep (ledger_id) SELECT id FROM rowlock.ledgers;

CREATE FUNCTION rowlock.topic_upkeep_due() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rowlock.topic_upkeep (topic_id) VALUES (NEW.id)
        ON CONFLICT (topic_id) DO UPDATE SET due_at = now();
    RETURN NULL;
END $$;
CREATE TRIGGER topic_upkeep_insert AFTER INSERT ON rowlock.topics
    FOR EACH ROW EXECUTE FUNCTION rowlock.topic_upkeep_due();
CREATE TRIGGER topic_upkeep_update AFTER UPDATE OF headless_ttl_seconds, retention_seconds,
    retention_ignores_consumers ON rowlock.topics
    FOR EACH ROW EXECUTE FUNCTION rowlock.topic_upkeep_due();

CREATE FUNCTION rowlock.ledger_upkeep_due() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rowlock.ledger_upkeep (ledger_id) VALUES (NEW.id)
        ON CONFLICT (ledger_id) DO UPDATE SET due_at = now();
    RETURN NULL;
END $$;
CREATE TRIGGER ledger_upkeep_insert AFTER INSERT ON rowlock.ledgers
    FOR EACH ROW EXECUTE FUNCTION rowlock.ledger_upkeep_due();
CREATE TRIGGER ledger_upkeep_update AFTER UPDATE OF tombstone_retention_seconds ON rowlock.ledgers
    FOR EACH ROW WHEN (OLD.tombstone_retention_seconds IS DISTINCT FROM
                       NEW.tombstone_retention_seconds)
    EXECUTE FUNCTION rowlock.ledger_upkeep_due();
