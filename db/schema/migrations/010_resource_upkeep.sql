-- Migration 10: when each topic's and ledger's upkeep is next due, so that the janitor
-- claims what is due in one statement instead of visiting every resource on every pass, and
-- processes do not repeat each other's work. A row per resource, made by a trigger when the
-- resource is created (so the previous release, which knows nothing of it, keeps it complete),
-- made due at once when the setting that times the upkeep changes, and deleted with the resource.
-- The janitor claims due rows with FOR UPDATE SKIP LOCKED and moves due_at forward past the
-- claim, then sets it to when the resource's upkeep is next due (db/topics.c, db/ledger_upkeep.c).
-- Expand only: two tables, functions and triggers the previous release ignores (and the bounded
-- forms of the metrics functions at the end); serves_from stays 6.
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

-- The per-resource gauges of /metrics for at most lim resources (the first by name), so that a
-- scrape costs the same however many there are (ROWLOCK_METRICS_MAX_RESOURCES): the bounded
-- forms of rowlock.topics_headless(cap) and rowlock.ledgers_gauges(), which stay for the
-- previous release.
CREATE FUNCTION rowlock.topics_headless(cap integer, lim integer)
RETURNS TABLE (name text, headless_rows bigint, headless_oldest_age_seconds double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT id, topics.name AS tname FROM rowlock.topics ORDER BY topics.name LIMIT lim
    LOOP
        name := t.tname;
        BEGIN
            EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM rowlock.%I
                            WHERE head_id IS NULL LIMIT %s) s',
                           'compaction_head_' || t.id, cap) INTO headless_rows;
            EXECUTE format('SELECT coalesce(extract(epoch FROM now() - min(updated_at)), 0)
                            FROM rowlock.%I WHERE head_id IS NULL', 'compaction_head_' || t.id)
                INTO headless_oldest_age_seconds;
        EXCEPTION WHEN undefined_table THEN
            CONTINUE; -- dropped by a concurrent DELETE
        END;
        RETURN NEXT;
    END LOOP;
END $$;

CREATE FUNCTION rowlock.ledgers_gauges(lim integer)
RETURNS TABLE (name text, watermark bigint, tombstones bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
BEGIN
    FOR l IN SELECT id, ledgers.name AS lname FROM rowlock.ledgers ORDER BY ledgers.name LIMIT lim
    LOOP
        name := l.lname;
        watermark := rowlock.ledger_watermark(l.id);
        EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE deleted', 'objects_' || l.id)
            INTO tombstones;
        RETURN NEXT;
    END LOOP;
END $$;

-- Drops a ledger's generated tables (DELETE /ledgers/{ledger}, after its catalogue row; its
-- upkeep row goes with that row).
CREATE FUNCTION rowlock.ledger_drop_tables(ledger bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['objects_', 'displays_', 'transactions_', 'events_', 'checkpoints_']
    LOOP
        EXECUTE format('DROP TABLE IF EXISTS rowlock.%I', t || ledger);
    END LOOP;
END $$;
