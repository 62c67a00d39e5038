-- Migration 13: one table of upkeep for every resource family, rowlock.upkeep, keyed by the
-- family's name and the resource's id, instead of a table, a function and triggers copied for
-- each family. A family's resources get their rows from three triggers on its catalogue table,
-- each a call of the two functions below with the family's name: made when the resource is
-- created, due at once when a setting that times its upkeep changes, deleted with it. The
-- janitor claims a family's due rows with FOR UPDATE SKIP LOCKED and moves due_at on past the
-- claim, then sets it to when that resource's upkeep is next due (db/upkeep.h). The resources
-- summary of /metrics (how many of each family, how long the most overdue has waited) is one
-- statement over this table whatever the families.
--
-- Expand only: a table, two functions and triggers that builds of schema 10 to 12 ignore. Their
-- own tables (rowlock.topic_upkeep, ledger_upkeep, queue_upkeep) and triggers stay, so that
-- such a build still running during a rolling upgrade keeps its janitor working; a later
-- contract migration drops them. serves_from stays 12.
CREATE TABLE rowlock.upkeep (
    family      text        NOT NULL,
    resource_id bigint      NOT NULL,
    due_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (family, resource_id)
);
CREATE INDEX upkeep_due ON rowlock.upkeep (family, due_at);

INSERT INTO rowlock.upkeep (family, resource_id, due_at)
    SELECT 'topics', topic_id, due_at FROM rowlock.topic_upkeep
    UNION ALL SELECT 'ledgers', ledger_id, due_at FROM rowlock.ledger_upkeep
    UNION ALL SELECT 'queues', queue_id, due_at FROM rowlock.queue_upkeep;

-- FOR EACH ROW, AFTER INSERT or UPDATE of a catalogue table: the resource NEW.id of family
-- TG_ARGV[0] is due now.
CREATE FUNCTION rowlock.upkeep_due() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rowlock.upkeep (family, resource_id) VALUES (TG_ARGV[0], NEW.id)
        ON CONFLICT (family, resource_id) DO UPDATE SET due_at = now();
    RETURN NULL;
END $$;

-- FOR EACH ROW, AFTER DELETE of a catalogue table: the resource OLD.id has no upkeep any more.
CREATE FUNCTION rowlock.upkeep_gone() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM rowlock.upkeep WHERE family = TG_ARGV[0] AND resource_id = OLD.id;
    RETURN NULL;
END $$;

-- The families of this release, with the settings that time their upkeep.
CREATE TRIGGER upkeep_insert AFTER INSERT ON rowlock.topics
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_due('topics');
CREATE TRIGGER upkeep_update AFTER UPDATE OF headless_ttl_seconds, retention_seconds,
    retention_ignores_consumers ON rowlock.topics
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_due('topics');
CREATE TRIGGER upkeep_delete AFTER DELETE ON rowlock.topics
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_gone('topics');

CREATE TRIGGER upkeep_insert AFTER INSERT ON rowlock.ledgers
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_due('ledgers');
CREATE TRIGGER upkeep_update AFTER UPDATE OF tombstone_retention_seconds ON rowlock.ledgers
    FOR EACH ROW WHEN (OLD.tombstone_retention_seconds IS DISTINCT FROM
                       NEW.tombstone_retention_seconds)
    EXECUTE FUNCTION rowlock.upkeep_due('ledgers');
CREATE TRIGGER upkeep_delete AFTER DELETE ON rowlock.ledgers
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_gone('ledgers');

CREATE TRIGGER upkeep_insert AFTER INSERT ON rowlock.queues
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_due('queues');
CREATE TRIGGER upkeep_update AFTER UPDATE OF retention_seconds ON rowlock.queues
    FOR EACH ROW WHEN (OLD.retention_seconds IS DISTINCT FROM NEW.retention_seconds)
    EXECUTE FUNCTION rowlock.upkeep_due('queues');
CREATE TRIGGER upkeep_delete AFTER DELETE ON rowlock.queues
    FOR EACH ROW EXECUTE FUNCTION rowlock.upkeep_gone('queues');
