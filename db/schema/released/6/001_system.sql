-- rowlock system schema baseline: the schema that holds everything rowlock creates, and the row
-- recording which baseline version built it. Pre-v1 there are no migrations: a database built by
-- another version must be recreated.
CREATE SCHEMA rowlock;

CREATE TABLE rowlock.schema_version (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer     NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
