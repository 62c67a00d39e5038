-- Migration 7: the migrations table, one row per migration applied (the baseline is recorded as
-- migration 6). Expand only: releases before it never read this table, and rowlock.schema_version
-- keeps holding 6 (see db/schema.c: it now holds the oldest schema version whose builds can
-- still serve this database), so the previous release keeps starting on a migrated database.
CREATE TABLE rowlock.migrations (
    number      integer     PRIMARY KEY CHECK (number > 0),
    name        text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    applied_by  text        NOT NULL,
    serves_from integer     NOT NULL CHECK (serves_from > 0 AND serves_from <= number)
);
