-- Ledgers: versioned objects fed by two ingestion paths (optimistic transactions and checkpoint
-- batches). Each ledger's tables are generated, named by its id: objects_<id> (live rows and
-- tombstones), displays_<id>, transactions_<id> (execution status: the row that makes each
-- transaction apply exactly once), events_<id> (a gap-safe log like a topic's) and
-- checkpoints_<id>.

CREATE TABLE rowlock.ledgers (
    id                          bigserial   PRIMARY KEY,
    name                        text        NOT NULL UNIQUE,
    tombstone_retention_seconds integer     NOT NULL CHECK (tombstone_retention_seconds > 0),
    horizon                     bigint      NOT NULL DEFAULT 0,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    updated_at                  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION rowlock.ledger_create_tables(ledger bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    suffix text := '_' || ledger;
BEGIN
    -- A deleted object keeps its row as a tombstone holding the deleting version, so an older
    -- write can never resurrect it. checkpoint: the checkpoint that carried this version, once
    -- known (tombstones are purged only below the ledger's horizon).
    EXECUTE format('CREATE TABLE rowlock.%I (
        object_id  text        PRIMARY KEY,
        version    bigint      NOT NULL CHECK (version >= 0),
        deleted    boolean     NOT NULL,
        type       text,
        data       jsonb,
        checkpoint bigint,
        updated_at timestamptz NOT NULL DEFAULT now(),
        CHECK (deleted OR type IS NOT NULL)
    )', 'objects' || suffix);
    EXECUTE format('CREATE INDEX %I ON rowlock.%I (checkpoint) WHERE deleted',
                   'objects' || suffix || '_tombstones', 'objects' || suffix);
    EXECUTE format('CREATE TABLE rowlock.%I (
        type       text        PRIMARY KEY,
        version    bigint      NOT NULL CHECK (version >= 0),
        data       jsonb       NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
    )', 'displays' || suffix);
    EXECUTE format('CREATE TABLE rowlock.%I (
        digest      text        PRIMARY KEY,
        executed    boolean     NOT NULL DEFAULT false,
        path        text        CHECK (path IN (''optimistic'', ''checkpoint'')),
        checkpoint  bigint,
        executed_at timestamptz,
        created_at  timestamptz NOT NULL DEFAULT now(),
        CHECK (executed = (path IS NOT NULL))
    )', 'transactions' || suffix);
    EXECUTE format('CREATE TABLE rowlock.%I (
        "offset"   bigint      PRIMARY KEY,
        hole       boolean     NOT NULL DEFAULT false,
        digest     text,
        index      integer,
        type       text,
        data       jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        CHECK (hole OR (digest IS NOT NULL AND type IS NOT NULL))
    )', 'events' || suffix);
    EXECUTE format('CREATE SEQUENCE rowlock.%I OWNED BY rowlock.%I."offset"',
                   'events' || suffix || '_offset', 'events' || suffix);
    EXECUTE format('CREATE TABLE rowlock.%I (
        sequence     bigint      PRIMARY KEY CHECK (sequence >= 1),
        transactions integer     NOT NULL,
        applied_at   timestamptz NOT NULL DEFAULT now()
    )', 'checkpoints' || suffix);
END $$;

-- Highest n such that checkpoints 1..n are all recorded (0 when checkpoint 1 is missing).
CREATE FUNCTION rowlock.ledger_watermark(ledger bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    w bigint;
BEGIN
    EXECUTE format('SELECT coalesce((SELECT min(c.sequence) FROM rowlock.%1$I c
                    WHERE NOT EXISTS (SELECT 1 FROM rowlock.%1$I d
                                      WHERE d.sequence = c.sequence + 1)), 0)',
                   'checkpoints_' || ledger) INTO w;
    IF w > 0 THEN
        EXECUTE format('SELECT CASE WHEN EXISTS (SELECT 1 FROM rowlock.%I WHERE sequence = 1)
                        THEN $1 ELSE 0 END', 'checkpoints_' || ledger) INTO w USING w;
    END IF;
    RETURN w;
END $$;

CREATE FUNCTION rowlock.ledger_counts(ledger bigint, OUT objects bigint, OUT tombstones bigint,
                                      OUT transactions bigint, OUT events bigint,
                                      OUT checkpoints bigint, OUT watermark bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    EXECUTE format('SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted)
                    FROM rowlock.%I', 'objects_' || ledger) INTO objects, tombstones;
    EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE executed', 'transactions_' || ledger)
        INTO transactions;
    EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE NOT hole', 'events_' || ledger)
        INTO events;
    EXECUTE format('SELECT count(*) FROM rowlock.%I', 'checkpoints_' || ledger) INTO checkpoints;
    watermark := rowlock.ledger_watermark(ledger);
END $$;

-- Watermark and tombstone count of every ledger in one round trip, for /metrics.
CREATE FUNCTION rowlock.ledgers_gauges()
RETURNS TABLE (name text, watermark bigint, tombstones bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    l record;
BEGIN
    FOR l IN SELECT id, ledgers.name AS lname FROM rowlock.ledgers ORDER BY ledgers.name LOOP
        name := l.lname;
        watermark := rowlock.ledger_watermark(l.id);
        EXECUTE format('SELECT count(*) FROM rowlock.%I WHERE deleted', 'objects_' || l.id)
            INTO tombstones;
        RETURN NEXT;
    END LOOP;
END $$;
