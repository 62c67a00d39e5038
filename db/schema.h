/* The schema baseline: the schema/ SQL files compiled into the binary, applied in one transaction
 * on an empty database, with a version row; a database built by another version is refused. */
#ifndef DB_SCHEMA_H
#define DB_SCHEMA_H

#include "db/pool.h"

/* Bump whenever any file in db/schema changes. */
#define DB_SCHEMA_VERSION 6

enum db_schema_verdict {
    DB_SCHEMA_CREATED,     /* the baseline was applied now */
    DB_SCHEMA_CURRENT,     /* the database already holds this version */
    DB_SCHEMA_INCOMPATIBLE /* another version (or a partial rowlock schema) is there */
};

/* Applies or checks the baseline. On DB_OK *verdict says which; for DB_SCHEMA_INCOMPATIBLE
 * *found is the version found (0 when the rowlock schema exists without a version row). */
enum db_status db_schema_apply(struct db_pool *pool, enum db_schema_verdict *verdict, int *found,
                               struct db_error *err);

/* Reads the version row. DB_OK with *version set, or the failure status (a database without
 * the schema reports DB_ERR_HARD with SQLSTATE 42P01). */
enum db_status db_schema_version(struct db_pool *pool, int *version, struct db_error *err);

/* db_schema_version in a transaction whose COMMIT waits as a write's does (it writes a WAL
 * record): a database where commits do not complete (a synchronous standby that does
 * not answer) reports DB_ERR_OUTCOME_UNKNOWN or DB_ERR_UNAVAILABLE once the pool's deadline
 * has cut it, instead of hanging. For readiness probes. */
enum db_status db_schema_ready(struct db_pool *pool, int *version, struct db_error *err);

#endif
