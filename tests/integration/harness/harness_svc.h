/* The set-up every test program shares: its database (one of its own, th_svc_dburl) and, for
 * most, one rowlock service on it (th_svc) for the whole cmocka group; and the calls a test makes
 * on them. A program that starts its services itself (several, another binary, one per test
 * with settings of its own) takes the database alone and starts them on th_svc_dburl with the
 * pieces of harness.h. */
#ifndef TESTS_HARNESS_SVC_H
#define TESTS_HARNESS_SVC_H

#include <stdint.h>

#include "harness.h"

/* The program's service, and the URL of its database (set by th_svc_start). */
extern struct th_service th_svc;
extern char th_svc_dburl[1024];

/* For a group setup (or a test that wants a fresh one): creates the program's database,
 * TH_DB_PREFIX<name>, its URL in th_svc_dburl. 0, or -1. */
int th_svc_db(const char *name);
/* Starts th_svc on th_svc_dburl with extra environment entries (NULL-terminated, may be NULL),
 * for a program that starts it per test with settings of its own. 0, or -1 (the process is
 * gone; th_svc's log and exit_code say why). */
int th_svc_run(const char *const *env);
/* For a group setup: th_svc_db, then th_svc_run. 0, or -1. */
int th_svc_start(const char *name, const char *const *env);
/* A group's (or a test's) teardown: closes th_svc_pg's session if one was opened, stops th_svc if
 * it is running; 0 when it stopped cleanly or was not running, else -1. */
int th_svc_teardown(void **state);

/* An SQL session on th_svc's database, opened on first use (fails the test when it cannot
 * connect), closed by th_svc_teardown; borrowed. */
PGconn *th_svc_pg(void);
/* The integer in the first column of the first row of sql, run on th_svc_pg (must succeed). */
int64_t th_svc_sql_int(const char *sql);
/* The same, of the SQL that the printf format fmt makes (at most 1023 bytes). */
int64_t th_svc_sql_intf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* th_call on th_svc: body JSON text (NULL: none), the status asserted to be want; returns the
 * answer's JSON (the caller's), NULL when it is not JSON. */
json_t *th_svc_call(const char *method, const char *path, const char *body, long want);
/* GET path on th_svc, 200 asserted; returns the body (the caller's). */
json_t *th_svc_get(const char *path);
/* GET path on th_svc answers a problem+json of this status and code (cmocka-asserted). */
void th_svc_get_problem(const char *path, long status, const char *code);

/* One keep-alive HTTP connection to th_svc, for a thread of its own: the racing tests' clients.
 * th_client_call asserts nothing, so any thread may call it. */
struct th_client {
    void *curl; /* its CURL easy handle */
    struct th_buf buf;
};
void th_client_init(struct th_client *c);
void th_client_free(struct th_client *c);
/* Sends method path with body (JSON text, NULL: none) on c; returns the HTTP status (-1 on a
 * transport error) and the parsed answer in *out (the caller's: json_decref), NULL when it is
 * not JSON. */
long th_client_call(struct th_client *c, const char *method, const char *path, const char *body,
                    json_t **out);
/* The same to the service listening on port (one of several a test started). */
long th_client_call_port(struct th_client *c, int port, const char *method, const char *path,
                         const char *body, json_t **out);

#endif
