/* The common shape of a test program: one rowlock service on a database of its own for the whole
 * cmocka group, and the calls a test makes on it. Programs that run several services, another
 * binary or a service per test keep their own (harness.h has the pieces). */
#ifndef TESTS_HARNESS_SVC_H
#define TESTS_HARNESS_SVC_H

#include <stdint.h>

#include "harness.h"

/* The program's service, and the URL of its database (set by th_svc_start). */
extern struct th_service th_svc;
extern char th_svc_dburl[1024];

/* For a group setup: creates database rowlock_t_<name> and starts th_svc on it with extra
 * environment entries (NULL-terminated, may be NULL). 0, or -1. */
int th_svc_start(const char *name, const char *const *env);
/* A group teardown: closes th_svc_pg's session if one was opened, stops th_svc; 0 when it
 * stopped cleanly, else -1. */
int th_svc_teardown(void **state);

/* An SQL session on th_svc's database, opened on first use (fails the test when it cannot
 * connect), closed by th_svc_teardown; borrowed. */
PGconn *th_svc_pg(void);
/* The integer in the first column of the first row of sql, run on th_svc_pg (must succeed). */
int64_t th_svc_sql_int(const char *sql);

/* th_call on th_svc: body JSON text (NULL: none), the status asserted to be want; returns the
 * answer's JSON (the caller's), NULL when it is not JSON. */
json_t *th_svc_call(const char *method, const char *path, const char *body, long want);
/* GET path on th_svc, 200 asserted; returns the body (the caller's). */
json_t *th_svc_get(const char *path);
/* GET path on th_svc answers a problem+json of this status and code (cmocka-asserted). */
void th_svc_get_problem(const char *path, long status, const char *code);

#endif
