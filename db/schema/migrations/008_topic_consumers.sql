-- Migration 8: consumer cursors of topics. Expand only: the previous release never reads the new
-- table, the new column has a default, and a topic the previous release deletes takes its
-- consumers with it (ON DELETE CASCADE), so serves_from stays 6. During a rolling upgrade the
-- previous release's janitor compacts without looking at consumers.
--
-- A consumer's "offset" is the last log position it has processed (a page's `next`). Every
-- offset stored here is readable: at or below the log's readable end when it was written, which
-- only grows (log rows are never deleted; compaction turns them into holes).
ALTER TABLE rowlock.topics
    ADD COLUMN retention_ignores_consumers boolean NOT NULL DEFAULT false;

CREATE TABLE rowlock.topic_consumers (
    topic_id     bigint      NOT NULL REFERENCES rowlock.topics (id) ON DELETE CASCADE,
    name         text        NOT NULL,
    "offset"     bigint      NOT NULL CHECK ("offset" >= 0),
    created_at   timestamptz NOT NULL DEFAULT now(),
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (topic_id, name)
);

-- The readable end of topic's log at or after from_offset (an offset known to be readable): the
-- last offset of the run of rows (messages or holes) that starts at the log's beginning. A gap
-- in the run is an offset drawn by a transaction still running (the end stops before it) or by
-- one that rolled back: such offsets are recorded as holes, without waiting (lock_timeout 2 ms,
-- as the log reader does), and the run goes on. Starts from the highest committed consumer
-- offset of the topic when that is further, so the scan covers only what is new.
CREATE FUNCTION rowlock.topic_readable_end(topic bigint, from_offset bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    msgs   text := format('rowlock.%I', 'messages_' || topic);
    pos    bigint := greatest(from_offset, coalesce(
                 (SELECT max(c."offset") FROM rowlock.topic_consumers c WHERE c.topic_id = topic),
                 0));
    gap_at bigint;
    prev   bigint;
    lt     text := current_setting('lock_timeout');
BEGIN
    FOR round IN 1..16 LOOP
        EXECUTE format('SELECT s.o, s.p FROM (SELECT "offset" AS o, '
                       'lag("offset", 1, $1) OVER (ORDER BY "offset") AS p '
                       'FROM %s WHERE "offset" > $1) s WHERE s.o <> s.p + 1 '
                       'ORDER BY s.o LIMIT 1', msgs)
            INTO gap_at, prev USING pos;
        IF gap_at IS NULL THEN
            EXECUTE format('SELECT coalesce(max("offset"), $1) FROM %s WHERE "offset" > $1', msgs)
                INTO pos USING pos;
            RETURN pos;
        END IF;
        BEGIN
            PERFORM set_config('lock_timeout', '2ms', true);
            EXECUTE format('INSERT INTO %s ("offset", hole) SELECT g, true '
                           'FROM generate_series($1::bigint, $2::bigint) g '
                           'ON CONFLICT ("offset") DO NOTHING', msgs)
                USING prev + 1, gap_at - 1;
            PERFORM set_config('lock_timeout', lt, true);
        EXCEPTION WHEN lock_not_available THEN
            RETURN prev; -- in progress: it may still commit, so the end stays before it
        END;
        pos := prev;
    END LOOP;
    RETURN pos;
END $$;

-- Lag of every consumer of topic: offsets between its committed offset and the readable end
-- (holes count), and the age of the first message after it (0 when caught up).
CREATE FUNCTION rowlock.topic_consumers_lag(topic bigint)
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
        EXECUTE format('SELECT coalesce(extract(epoch FROM now() - (SELECT created_at FROM '
                       'rowlock.%I WHERE "offset" > $1 AND "offset" <= $2 AND NOT hole '
                       'ORDER BY "offset" LIMIT 1)), 0)', 'messages_' || topic)
            INTO lag_seconds USING c.coff, readable_end;
        lag_seconds := greatest(lag_seconds, 0);
        RETURN NEXT;
    END LOOP;
END $$;

-- The lag of every consumer of every topic in one round trip, for /metrics. A topic dropped by a
-- concurrent DELETE is left out.
CREATE FUNCTION rowlock.topics_consumers_lag()
RETURNS TABLE (topic text, consumer text, lag_messages bigint, lag_seconds double precision)
LANGUAGE plpgsql AS $$
DECLARE
    t record;
    l record;
BEGIN
    FOR t IN SELECT DISTINCT tp.id, tp.name AS tname FROM rowlock.topics tp
             JOIN rowlock.topic_consumers tc ON tc.topic_id = tp.id ORDER BY tp.name LOOP
        BEGIN
            FOR l IN SELECT * FROM rowlock.topic_consumers_lag(t.id) LOOP
                topic := t.tname;
                consumer := l.name;
                lag_messages := l.lag_messages;
                lag_seconds := l.lag_seconds;
                RETURN NEXT;
            END LOOP;
        EXCEPTION WHEN undefined_table THEN
            CONTINUE; -- dropped by a concurrent DELETE
        END;
    END LOOP;
END $$;
