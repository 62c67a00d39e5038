/* The rowlock-cli tests' shared pieces (cli_run.h): the tokens file, running the CLI through sh
 * with files for its stdin and stderr, and a call on the service with a token. */
#include "cli_run.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char tokens_path[64];

int cli_run_start(const char *name, const char *tokens)
{
    char env_tokens[256];
    snprintf(tokens_path, sizeof(tokens_path), "/tmp/rowlock-cli-tokens-XXXXXX");
    int fd = mkstemp(tokens_path);
    if (fd < 0 || write(fd, tokens, strlen(tokens)) != (ssize_t)strlen(tokens))
        return -1;
    close(fd);
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, NULL};
    return th_svc_start(name, env);
}

int cli_run_teardown(void **state)
{
    if (tokens_path[0])
        unlink(tokens_path);
    return th_svc_teardown(state);
}

/* A new temporary file holding text; its name in path (a "/tmp/...XXXXXX" template). */
static void temp_file(char *path, const char *text)
{
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_true(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

/* Reads path into buf (size bytes, NUL-terminated) and removes it. */
static void slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
}

int cli_run(const char *env, const char *stdin_text, const char *args, char *out, size_t outsize,
            char *err, size_t errsize)
{
    char cmd[8192], inpath[] = "/tmp/rowlock-cli-in-XXXXXX",
                    errpath[] = "/tmp/rowlock-cli-err-XXXXXX";
    temp_file(inpath, stdin_text ? stdin_text : "");
    temp_file(errpath, "");
    snprintf(cmd, sizeof(cmd), "env ROWLOCK_URL=http://127.0.0.1:%d %s '%s' %s <%s 2>%s",
             th_svc.port, env ? env : "", ROWLOCK_CLI_BINARY, args, inpath, errpath);
    int rc = th_run(cmd, out, outsize);
    unlink(inpath);
    slurp(errpath, err, errsize);
    fprintf(stderr, "rowlock-cli %s -> %d: %s", args, rc, err);
    return rc;
}

json_t *cli_run_http(const char *token, const char *method, const char *path, const char *body,
                     long *status)
{
    char auth[512];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    const char *hdrs[] = {"Content-Type: application/json", token ? auth : NULL, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, method, path, hdrs, body, body ? strlen(body) : 0, &r),
                     0);
    *status = r.status;
    json_t *j = json_incref(r.json);
    th_response_free(&r);
    return j;
}
