/* A synchronous standby that never acknowledges, without a standby: the test server's
 * synchronous_standby_names set to a name no standby has, so that every COMMIT that writes a
 * commit record waits (ALTER SYSTEM + pg_reload_conf). The server is shared: reset it at a
 * test's start and in its teardown, always. Also turns synchronous_commit on for one database
 * (the test server runs with it off, which would skip the wait). For test_db_*.c. */
#ifndef TESTS_DB_SYNCREP_H
#define TESTS_DB_SYNCREP_H

/* Sets synchronous_standby_names to name ("" resets it) and waits until a new session sees it. */
void syncrep_set(const char *name);
/* ALTER DATABASE db SET synchronous_commit = on. */
void syncrep_database_on(const char *db);
/* The pid of a backend of database db waiting for the standby (wait event SyncRep), waiting up
 * to timeout_ms for one to appear; 0 when none did. */
int syncrep_waiting_backend(const char *db, int timeout_ms);
/* Terminates backend pid (pg_terminate_backend). */
void syncrep_terminate(int pid);
/* Rows of a query on database db (through the admin URL's server): the first value as a
 * number. */
long syncrep_count(const char *dburl, const char *sql);

#endif
