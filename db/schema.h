/* Schema management: the released baseline (db/schema/0*.sql, schema version 6) and the numbered
 * forward migrations after it (db/schema/migrations/NNN_name.sql), compiled into the binary,
 * each applied in its own transaction and recorded in rowlock.migrations. Startup applies or
 * checks them under an advisory lock; what a migration contains is in its SQL file. */
#ifndef DB_SCHEMA_H
#define DB_SCHEMA_H

#include "db/pool.h"

/* The first released schema: the baseline files, recorded as migration 6 ("baseline"). */
#define DB_SCHEMA_BASELINE 6
/* The number of the last migration this build knows: one per file of db/schema/migrations/,
 * numbered from 7 without a gap (the build counts them into DB_MIGRATION_FILES). */
#define DB_SCHEMA_VERSION (DB_SCHEMA_BASELINE + DB_MIGRATION_FILES)

/* One file db/schema/migrations/NNN_name.sql, compiled in (the build generates the list). */
struct db_migration_file {
    int number;
    const char *name; /* the file's name after NNN_, recorded with the migration */
    const char *sql;
};
/* Every migration file in number order: db_migration_files[i] is migration 7 + i. */
extern const struct db_migration_file db_migration_files[DB_MIGRATION_FILES];
/* What this build records when it applies migration number (the baseline included): the oldest
 * build schema version the data serves afterwards and the checksum (64 hex digits). 1, or 0 when
 * this build has no such migration. */
int db_schema_migration_record(int number, int *serves_from, char checksum[65]);

enum db_migrate_mode {
    DB_MIGRATE_AUTO, /* apply pending migrations (one process at a time), then check */
    DB_MIGRATE_CHECK /* apply nothing: refuse a database with pending migrations */
};

enum db_schema_verdict {
    DB_SCHEMA_CREATED,     /* an empty database got the baseline and every migration now */
    DB_SCHEMA_CURRENT,     /* nothing to do */
    DB_SCHEMA_MIGRATED,    /* pending migrations were applied now */
    DB_SCHEMA_NEWER,       /* the database is newer than this build and declares it serves it */
    DB_SCHEMA_PENDING,     /* refused: migrations are pending and the mode is check */
    DB_SCHEMA_TOO_NEW,     /* refused: the database is newer and no longer serves this build */
    DB_SCHEMA_CHANGED,     /* refused: an applied migration's checksum differs from this build's */
    DB_SCHEMA_INCOMPATIBLE /* refused: a partial rowlock schema, an unreleased version from
                            * before migrations, or a migration missing between applied ones */
};

struct db_schema_report {
    enum db_schema_verdict verdict;
    int found;        /* the database's schema version before (0: no rowlock schema) */
    int version;      /* the database's schema version after */
    int serves_from;  /* the oldest build schema version the database serves, after */
    int applied;      /* migrations this process applied (the baseline counts as one) */
    int adopted;      /* this process recorded a database built before migrations existed */
    long waited_ms;   /* time spent waiting while another process held the schema lock */
    char detail[512]; /* for a refusal: what is wrong and what to do; else empty */
};

/* True for the verdicts that must stop the process. */
int db_schema_refused(enum db_schema_verdict verdict);

/* Applies (DB_MIGRATE_AUTO) or checks the migrations on one connection of pool. In auto mode a
 * session advisory lock makes the processes starting at once take turns: the first applies what
 * is pending, the others wait (polling, at most lock_wait_ms) and then find nothing to do.
 * applied_by (borrowed) is recorded with each migration applied. DB_OK with *rep filled (a
 * refusal is DB_OK with its verdict and detail), or the failure status with err set;
 * DB_ERR_TIMEOUT when the lock stayed taken for lock_wait_ms. */
enum db_status db_schema_migrate(struct db_pool *pool, enum db_migrate_mode mode,
                                 const char *applied_by, long lock_wait_ms,
                                 struct db_schema_report *rep, struct db_error *err);

/* db_schema_migrate in auto mode, for tests: *verdict CREATED, CURRENT (also after migrating) or
 * INCOMPATIBLE (any refusal), *found the version found. */
enum db_status db_schema_apply(struct db_pool *pool, enum db_schema_verdict *verdict, int *found,
                               struct db_error *err);

/* Reads the legacy version row (since migration 7: the oldest build schema version the database
 * serves). DB_OK with *version set, or the failure status (a database without the schema
 * reports DB_ERR_HARD with SQLSTATE 42P01). */
enum db_status db_schema_version(struct db_pool *pool, int *version, struct db_error *err);

/* For readiness probes: the database's schema version (its last migration) and the oldest build
 * schema version it serves, read in a transaction whose COMMIT waits as a write's does (it
 * writes a WAL record): a database where commits do not complete (a synchronous standby that
 * does not answer) reports DB_ERR_OUTCOME_UNKNOWN or DB_ERR_UNAVAILABLE once the pool's deadline
 * has cut it, instead of hanging. A database without the migrations table is DB_ERR_HARD. */
enum db_status db_schema_ready(struct db_pool *pool, int *version, int *serves_from,
                               struct db_error *err);

/* True when a database at schema version `version` serving builds from `serves_from` on can be
 * served by this build: nothing pending, and not past a removal this build still needs. */
int db_schema_serves(int version, int serves_from);

#endif
