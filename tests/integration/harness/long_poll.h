/* The two processes the long-poll tests (test_queue_long_poll, test_topic_long_poll) run on one
 * database, and what both check of them: lp_svc takes a crowd of waiters (connection limits
 * raised, a pool of LP_POOL_SIZE, waits up to 30 s); lp_quiet re-checks its waiters a minute
 * apart, so only the in-process wake answers them promptly. What is waited on stays in the
 * tests. */
#ifndef TESTS_LONG_POLL_H
#define TESTS_LONG_POLL_H

#include "harness.h"

#define LP_POOL_SIZE 16

extern struct th_service lp_svc, lp_quiet;

/* For a group setup: raises the open-file limit for waiters connections, creates the program's
 * database (th_svc_db) and starts lp_svc and lp_quiet on it. 0, or -1. */
int lp_start(const char *name, int waiters);
/* A group teardown: stops both; 0 when both stopped cleanly. */
int lp_teardown(void **state);
/* PUT path with {} on lp_svc answers 201 (the resource is in the database both share). */
void lp_create(const char *path);
/* Waits up to timeout_s for port's waiting long-polls to reach at least n; returns the last
 * count. */
double lp_await_waiting(int port, double n, double timeout_s);
/* While a crowd waits: /healthz on lp_svc answers 200 within a second, three times over a
 * second. */
void lp_assert_healthz_prompt(void);
/* Samples lp_svc's pool five times over a second (its size asserted LP_POOL_SIZE); returns the
 * most connections in use. */
double lp_pool_in_use_max(void);

#endif
