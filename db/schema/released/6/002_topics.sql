-- Compacted topics: the catalogue of topics and producers, and the functions that create, drop
-- and measure each topic's generated tables. Generated tables are named by the topic's id
-- (rowlock.messages_<id>, rowlock.compaction_head_<id>), never by its name.

CREATE TABLE rowlock.topics (
    id                     bigserial   PRIMARY KEY,
    name                   text        NOT NULL UNIQUE,
    headless_ttl_seconds   integer     NOT NULL CHECK (headless_ttl_seconds > 0),
    retention_seconds      integer     CHECK (retention_seconds > 0),
    default_schema_version integer     NOT NULL CHECK (default_schema_version > 0),
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE rowlock.producers (
    topic_id       bigint      NOT NULL REFERENCES rowlock.topics (id) ON DELETE CASCADE,
    name           text        NOT NULL,
    schema_version integer     NOT NULL CHECK (schema_version > 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, name)
);

-- The log: offsets from the topic's own sequence (they commit out of order). A hole is an offset
-- whose transaction rolled back, recorded by a reader so that no reader waits for it again and
-- no late writer can still take it. value NULL is a tombstone.
CREATE FUNCTION rowlock.topic_create_tables(topic bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    msgs  text := format('rowlock.%I', 'messages_' || topic);
    heads text := format('rowlock.%I', 'compaction_head_' || topic);
BEGIN
    EXECUTE format('CREATE TABLE %s (
        "offset"       bigint      PRIMARY KEY,
        hole           boolean     NOT NULL DEFAULT false,
        key            text,
        value          jsonb,
        producer       text,
        sequence       bigint,
        schema_version integer,
        rank           bigint,
        created_at     timestamptz NOT NULL DEFAULT now(),
        CHECK (hole OR (key IS NOT NULL AND schema_version IS NOT NULL AND rank IS NOT NULL))
    )', msgs);
    EXECUTE format('CREATE SEQUENCE rowlock.%I OWNED BY %s."offset"',
                   'messages_' || topic || '_offset', msgs);
    EXECUTE format('CREATE UNIQUE INDEX ON %s (producer, sequence) WHERE sequence IS NOT NULL',
                   msgs);
    -- The compaction head: the one durable, lockable row of a key. A headless row (all three
    -- head columns null) exists so that a key without a head can still be locked.
    EXECUTE format('CREATE TABLE %s (
        key             text        PRIMARY KEY,
        head_id         bigint,
        schema_version  integer,
        compaction_rank bigint,
        created_at      timestamptz NOT NULL DEFAULT now(),
        updated_at      timestamptz NOT NULL DEFAULT now(),
        CHECK ((head_id IS NULL) = (schema_version IS NULL)
               AND (head_id IS NULL) = (compaction_rank IS NULL))
    ) WITH (fillfactor = 80)', heads);
    -- headless rows only: served to the janitor and to the headless metrics
    EXECUTE format('CREATE INDEX %I ON %s (updated_at) WHERE head_id IS NULL',
                   'compaction_head_' || topic || '_headless', heads);
END $$;

CREATE FUNCTION rowlock.topic_drop_tables(topic bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS rowlock.%I', 'compaction_head_' || topic);
    EXECUTE format('DROP TABLE IF EXISTS rowlock.%I', 'messages_' || topic);
END $$;

-- Counts of one topic. headless_rows is capped (the partial index is scanned at most that far)
-- so that a scrape stays cheap whatever the backlog; messages counts the log without holes.
CREATE FUNCTION rowlock.topic_stats(topic bigint, cap integer,
                                    OUT messages bigint, OUT heads bigint,
                                    OUT headless_rows bigint,
                                    OUT headless_oldest_age_seconds double precision)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE NOT hole', 'messages_' || topic)
        INTO messages;
    EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE head_id IS NOT NULL',
                   'compaction_head_' || topic) INTO heads;
    EXECUTE format('SELECT count(*) FROM (SELECT 1 FROM rowlock.%I WHERE head_id IS NULL LIMIT %s) s',
                   'compaction_head_' || topic, cap) INTO headless_rows;
    EXECUTE format('SELECT coalesce(extract(epoch FROM now() - min(updated_at)), 0)
                    FROM rowlock.%I WHERE head_id IS NULL', 'compaction_head_' || topic)
        INTO headless_oldest_age_seconds;
END $$;

-- Headless counts of every topic in one round trip, for /metrics.
CREATE FUNCTION rowlock.topics_headless(cap integer)
RETURNS TABLE (name text, headless_rows bigint, headless_oldest_age_seconds double precision)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT id, topics.name AS tname FROM rowlock.topics ORDER BY topics.name LOOP
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
