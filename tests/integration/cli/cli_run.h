/* What the rowlock-cli tests share: th_svc started with a tokens file of their own, rowlock-cli
 * run against it through sh (stdin given, stdout and stderr apart) and calls on th_svc with a
 * token. Each test's own checks stay in its file. */
#ifndef TESTS_CLI_RUN_H
#define TESTS_CLI_RUN_H

#include <stddef.h>

#include "harness_svc.h"

/* For a group setup: th_svc_start(name) with tokens (a tokens file's text, "TOKEN SCOPES\n" per
 * line) in a temporary file named by ROWLOCK_TOKENS_FILE. 0, or -1. */
int cli_run_start(const char *name, const char *tokens);
/* The group teardown of cli_run_start: removes the tokens file, then th_svc_teardown. */
int cli_run_teardown(void **state);

/* Runs `rowlock-cli ARGS` (ARGS: shell words) on th_svc, with env (NULL: none) more VAR=value
 * words of its environment (ROWLOCK_TOKEN=..., or a ROWLOCK_URL of another service) and
 * stdin_text on its stdin (NULL: empty); its stdout in out and its stderr in err (each
 * NUL-terminated, cut at its size; a command that writes more than out holds dies of SIGPIPE),
 * the call and its stderr logged. Returns its exit code, -1 when it was killed. */
int cli_run(const char *env, const char *stdin_text, const char *args, char *out, size_t outsize,
            char *err, size_t errsize);

/* method path on th_svc as token (NULL: none) with body (JSON text, NULL: none); the status in
 * *status. Returns the JSON answer (the caller's), NULL when it is not JSON. */
json_t *cli_run_http(const char *token, const char *method, const char *path, const char *body,
                     long *status);

#endif
