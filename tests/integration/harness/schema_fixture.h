/* Fixtures of the schema tests: a database as the release before migrations built it (the frozen
 * schema of db/schema/released/6, with its version row), and small SQL helpers. Test-only. */
#ifndef TESTS_SCHEMA_FIXTURE_H
#define TESTS_SCHEMA_FIXTURE_H

#include <libpq-fe.h>
#include <stddef.h>

/* Creates database TH_DB_PREFIX<name> (see th_db_create) holding the released schema version 6
 * exactly as the release before migrations left it: no rowlock.migrations. 0 or -1. */
int tsf_create_released(const char *name, char *url, size_t urlsize);
/* The integer in the first column of the first row of sql (cmocka-asserts it runs). */
long tsf_int(PGconn *c, const char *sql);
/* Asserts that rowlock.migrations holds exactly the migrations from the baseline to
 * DB_SCHEMA_VERSION, once each, with a SHA-256 checksum and the version that applied them. */
void tsf_assert_all_recorded(PGconn *c);
/* Applies migrations 7 to last to a database of the released schema 6 and records them, exactly
 * as a build of schema version last left it (each in its own transaction, with the serves_from
 * of each): tsf_migrate_to(c, 11) is a database the last build before migration 12 served. */
void tsf_migrate_to(PGconn *c, int last);
/* The previous release's rowlock ($ROWLOCK_TEST_PREV_BINARY, built by deploy/local.sh test into
 * build-prev/ from the commit in db/schema/released/6/RELEASE), or NULL after saying on stderr
 * that it is not set to an executable. */
const char *tsf_prev_binary(void);

#endif
