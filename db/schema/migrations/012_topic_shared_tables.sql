-- Migration 12: every topic's log and heads move into two shared tables keyed by the topic's id,
-- rowlock.topic_messages and rowlock.topic_heads, as queues keep their jobs in rowlock.jobs.
-- With a set of generated tables per topic (rowlock.messages_<id>,
-- rowlock.compaction_head_<id>), a request on a topic its backend had not planned lately parsed
-- and planned its statements and loaded the tables' catalog entries: producing to a random topic
-- of many was several times slower than to one topic, and backends grew with the number of
-- topics. On shared tables each statement is prepared once per connection whatever the topic
-- (tests/bench/resources.sh measures it).
--
-- Each topic keeps ONE relation of its own: its offset sequence, renamed from
-- rowlock.messages_<id>_offset to rowlock.topic_offsets_<id> (and no longer owned by the log
-- table, which is dropped), so that offsets stay per topic, keep their values (no offset is
-- drawn twice across the upgrade), commit out of order and leave holes that readers record, as
-- before. Statements take the sequence as a regclass parameter, the same statement for every
-- topic. Rows of a deleted topic go with its catalogue row (ON DELETE CASCADE); the produce's
-- foreign key check locks the topic row FOR KEY SHARE, which conflicts with that DELETE only.
--
-- A CONTRACT step: it drops the generated tables that the previous release reads and writes, so
-- serves_from rises to 12 (db/schema.c): builds of an older schema refuse to start on the
-- migrated database (the release before migrations compares rowlock.schema_version, now 12,
-- with its 6). Stop every older process before migrating. The copy runs in the migration's one
-- transaction, with every topic's tables locked: on a large log it takes as long as copying it.
CREATE TABLE rowlock.topic_messages (
    topic_id       bigint      NOT NULL REFERENCES rowlock.topics (id) ON DELETE CASCADE,
    "offset"       bigint      NOT NULL,
    hole           boolean     NOT NULL DEFAULT false,
    key            text,
    value          jsonb,
    producer       text,
    sequence       bigint,
    schema_version integer,
    rank           bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, "offset"),
    CHECK (hole OR (key IS NOT NULL AND schema_version IS NOT NULL AND rank IS NOT NULL))
);
CREATE UNIQUE INDEX topic_messages_sequence ON rowlock.topic_messages (topic_id, producer, sequence)
    WHERE sequence IS NOT NULL;

-- The compaction head: the one durable, lockable row of a key. A headless row (all three head
-- columns null) exists so that a key without a head can still be locked.
CREATE TABLE rowlock.topic_heads (
    topic_id        bigint      NOT NULL REFERENCES rowlock.topics (id) ON DELETE CASCADE,
    key             text        NOT NULL,
    head_id         bigint,
    schema_version  integer,
    compaction_rank bigint,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, key),
    CHECK ((head_id IS NULL) = (schema_version IS NULL)
           AND (head_id IS NULL) = (compaction_rank IS NULL))
) WITH (fillfactor = 80);
-- headless rows only: served to the janitor, its next due time and the headless metrics
CREATE INDEX topic_heads_headless ON rowlock.topic_heads (topic_id, updated_at)
    WHERE head_id IS NULL;

-- Every topic's rows copied, its sequence kept under its new name, its tables dropped.
DO $$
DECLARE
    t bigint;
BEGIN
    FOR t IN SELECT id FROM rowlock.topics ORDER BY id LOOP
        EXECUTE format('INSERT INTO rowlock.topic_messages (topic_id, "offset", hole, key, value, '
                       'producer, sequence, schema_version, rank, created_at) '
                       'SELECT $1, "offset", hole, key, value, producer, sequence, '
                       'schema_version, rank, created_at FROM rowlock.%I', 'messages_' || t)
            USING t;
        EXECUTE format('INSERT INTO rowlock.topic_heads (topic_id, key, head_id, schema_version, '
                       'compaction_rank, created_at, updated_at) '
                       'SELECT $1, key, head_id, schema_version, compaction_rank, created_at, '
                       'updated_at FROM rowlock.%I', 'compaction_head_' || t)
            USING t;
        EXECUTE format('ALTER SEQUENCE rowlock.%I OWNED BY NONE', 'messages_' || t || '_offset');
        EXECUTE format('ALTER SEQUENCE rowlock.%I RENAME TO %I', 'messages_' || t || '_offset',
                       'topic_offsets_' || t);
        EXECUTE format('DROP TABLE rowlock.%I', 'compaction_head_' || t);
        EXECUTE format('DROP TABLE rowlock.%I', 'messages_' || t);
    END LOOP;
END $$;

-- A new topic's one relation of its own: its offset sequence.
CREATE OR REPLACE FUNCTION rowlock.topic_create_tables(topic bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE SEQUENCE rowlock.%I', 'topic_offsets_' || topic);
END $$;

-- After the topic's catalogue row is deleted (its rows went with it): its sequence.
CREATE OR REPLACE FUNCTION rowlock.topic_drop_tables(topic bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('DROP SEQUENCE IF EXISTS rowlock.%I', 'topic_offsets_' || topic);
END $$;

-- Counts of one topic. headless_rows is capped (the partial index is scanned at most that far)
-- so that a scrape stays cheap whatever the backlog; messages counts the log without holes.
CREATE OR REPLACE FUNCTION rowlock.topic_stats(topic bigint, cap integer,
                                               OUT messages bigint, OUT heads bigint,
                                               OUT headless_rows bigint,
                                               OUT headless_oldest_age_seconds double precision)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM rowlock.topic_messages m WHERE m.topic_id = topic AND NOT m.hole),
           (SELECT count(*) FROM rowlock.topic_heads h
            WHERE h.topic_id = topic AND h.head_id IS NOT NULL),
           (SELECT count(*) FROM (SELECT 1 FROM rowlock.topic_heads h
                                  WHERE h.topic_id = topic AND h.head_id IS NULL LIMIT cap) s),
           (SELECT coalesce(extract(epoch FROM now() - min(h.updated_at)), 0)::float8
            FROM rowlock.topic_heads h WHERE h.topic_id = topic AND h.head_id IS NULL)
$$;

-- The unbounded form served only the release before migration 10.
DROP FUNCTION rowlock.topics_headless(integer);

-- Headless counts of the first lim topics by name, for /metrics, in one statement: through the
-- partial index alone (the log is not counted).
CREATE OR REPLACE FUNCTION rowlock.topics_headless(cap integer, lim integer)
RETURNS TABLE (name text, headless_rows bigint, headless_oldest_age_seconds double precision)
LANGUAGE sql STABLE AS $$
    SELECT t.name,
           (SELECT count(*) FROM (SELECT 1 FROM rowlock.topic_heads h
                                  WHERE h.topic_id = t.id AND h.head_id IS NULL LIMIT cap) s),
           (SELECT coalesce(extract(epoch FROM now() - min(h.updated_at)), 0)::float8
            FROM rowlock.topic_heads h WHERE h.topic_id = t.id AND h.head_id IS NULL)
    FROM (SELECT id, topics.name FROM rowlock.topics ORDER BY topics.name LIMIT lim) t
    ORDER BY t.name
$$;

-- The readable end of topic's log at or after from_offset (an offset known to be readable): the
-- last offset of the run of rows (messages or holes) that starts at the log's beginning. A gap
-- in the run is an offset drawn by a transaction still running (the end stops before it) or by
-- one that rolled back: such offsets are recorded as holes, without waiting (lock_timeout 2 ms,
-- as the log reader does), and the run goes on. Starts from the highest committed consumer
-- offset of the topic when that is further, so the scan covers only what is new.
CREATE OR REPLACE FUNCTION rowlock.topic_readable_end(topic bigint, from_offset bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    pos    bigint := greatest(from_offset, coalesce(
                 (SELECT max(c."offset") FROM rowlock.topic_consumers c WHERE c.topic_id = topic),
                 0));
    gap_at bigint;
    prev   bigint;
    lt     text := current_setting('lock_timeout');
BEGIN
    FOR round IN 1..16 LOOP
        SELECT s.o, s.p INTO gap_at, prev FROM (
            SELECT m."offset" AS o, lag(m."offset", 1, pos) OVER (ORDER BY m."offset") AS p
            FROM rowlock.topic_messages m WHERE m.topic_id = topic AND m."offset" > pos) s
        WHERE s.o <> s.p + 1 ORDER BY s.o LIMIT 1;
        IF gap_at IS NULL THEN
            SELECT coalesce(max(m."offset"), pos) INTO pos FROM rowlock.topic_messages m
            WHERE m.topic_id = topic AND m."offset" > pos;
            RETURN pos;
        END IF;
        BEGIN
            PERFORM set_config('lock_timeout', '2ms', true);
            INSERT INTO rowlock.topic_messages (topic_id, "offset", hole)
            SELECT topic, g, true FROM generate_series(prev + 1, gap_at - 1) g
            ON CONFLICT (topic_id, "offset") DO NOTHING;
            PERFORM set_config('lock_timeout', lt, true);
        EXCEPTION WHEN lock_not_available THEN
            RETURN prev; -- in progress: it may still commit, so the end stops before it
        END;
        pos := prev;
    END LOOP;
    RETURN pos;
END $$;

-- Lag of every consumer of topic: offsets between its committed offset and the readable end
-- (holes count), and the age of the first message after it (0 when caught up).
CREATE OR REPLACE FUNCTION rowlock.topic_consumers_lag(topic bigint)
RETURNS TABLE (name text, "offset" bigint, readable_end bigint, lag_messages bigint,
               lag_seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    e bigint := rowlock.topic_readable_end(topic, 0);
    c record;
BEGIN
    FOR c IN SELECT tc.name AS cname, tc."offset" AS coff FROM rowlock.topic_consumers tc
             WHERE tc.topic_id = topic ORDER BY tc.name LOOP
        name := c.cname;
        "offset" := c.coff;
        readable_end := greatest(e, c.coff);
        lag_messages := readable_end - c.coff;
        SELECT coalesce(extract(epoch FROM now() - (
                   SELECT m.created_at FROM rowlock.topic_messages m
                   WHERE m.topic_id = topic AND m."offset" > c.coff
                   AND m."offset" <= readable_end AND NOT m.hole
                   ORDER BY m."offset" LIMIT 1)), 0)
            INTO lag_seconds;
        lag_seconds := greatest(lag_seconds, 0);
        RETURN NEXT;
    END LOOP;
END $$;

-- The lag of every consumer of every topic in one round trip, for /metrics.
CREATE OR REPLACE FUNCTION rowlock.topics_consumers_lag()
RETURNS TABLE (topic text, consumer text, lag_messages bigint, lag_seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    l record;
BEGIN
    FOR t IN SELECT DISTINCT tp.id, tp.name AS tname FROM rowlock.topics tp
             JOIN rowlock.topic_consumers tc ON tc.topic_id = tp.id ORDER BY tp.name LOOP
        FOR l IN SELECT * FROM rowlock.topic_consumers_lag(t.id) LOOP
            topic := t.tname;
            consumer := l.name;
            lag_messages := l.lag_messages;
            lag_seconds := l.lag_seconds;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END $$;
