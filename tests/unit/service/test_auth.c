/* Unit tests of service/auth.c on temporary token files: scopes granted per token (admin grants
 * all), read tokens forbidden for write, unknown / missing / non-Bearer headers,
 * token names (name=, or _line-<n>), their limits (rate=, burst=, long_polls=), and every file
 * error (short token, unknown scope, no scopes, bad or repeated name, empty or missing file) giving
 * NULL with a message naming the file and line. Loads expected to fail run in a child so a crash is
 * a clean failure. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service/auth.h"

#define READER "reader-token-0123456789"
#define WRITER "writer-token-0123456789"
#define WORKER "worker-token-0123456789"
#define ADMIN  "admin-token-0123456789ab"
#define EXACT  "exactly16chars!!"

/* Writes content to a new temporary file; its name goes to path (unlink it). */
static void write_tokens(char path[64], const char *content)
{
    snprintf(path, 64, "/tmp/rowlock-test-tokens-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(content);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
}

static struct svc_auth *load_ok(const char *content, char path[64])
{
    write_tokens(path, content);
    struct svc_auth *a = svc_auth_load(path, stderr);
    if (a == NULL)
        fail_msg("tokens file rejected: %s", content);
    return a;
}

/* clang-format off */
static const char valid_file[] =
    "# rowlock tokens\n"
    "\n"
    "   # indented comment\n"
    READER " read\n"
    WRITER "\tread,write\r\n"
    WORKER ",work\n"
    ADMIN " admin\n"
    EXACT " read , work\n";
/* clang-format on */

static void test_valid_file(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok(valid_file, path);
    assert_int_equal(svc_auth_count(a), 5);
    svc_auth_free(a);
    unlink(path);
}

static void assert_auth(const struct svc_auth *a, const char *header, enum svc_scope scope,
                        enum svc_auth_result want)
{
    enum svc_auth_result got = svc_auth_check(a, header, scope, NULL, NULL);
    if (got != want)
        fail_msg("check(\"%s\", scope %d) gave %d, expected %d", header ? header : "(null)",
                 (int)scope, (int)got, (int)want);
}

static void test_scopes(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok(valid_file, path);
    const char *r = "Bearer " READER, *w = "Bearer " WRITER, *k = "Bearer " WORKER;
    const char *e = "Bearer " EXACT;

    assert_auth(a, r, SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, r, SVC_SCOPE_OPS, SVC_AUTH_OK);
    assert_auth(a, r, SVC_SCOPE_WRITE, SVC_AUTH_FORBIDDEN);
    assert_auth(a, r, SVC_SCOPE_WORK, SVC_AUTH_FORBIDDEN);
    assert_auth(a, r, SVC_SCOPE_ADMIN, SVC_AUTH_FORBIDDEN);

    assert_auth(a, w, SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, w, SVC_SCOPE_WRITE, SVC_AUTH_OK);
    assert_auth(a, w, SVC_SCOPE_WORK, SVC_AUTH_FORBIDDEN);
    assert_auth(a, w, SVC_SCOPE_ADMIN, SVC_AUTH_FORBIDDEN);

    assert_auth(a, k, SVC_SCOPE_WORK, SVC_AUTH_OK);
    assert_auth(a, k, SVC_SCOPE_READ, SVC_AUTH_FORBIDDEN);
    assert_auth(a, k, SVC_SCOPE_OPS, SVC_AUTH_FORBIDDEN);
    assert_auth(a, k, SVC_SCOPE_WRITE, SVC_AUTH_FORBIDDEN);

    assert_auth(a, e, SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, e, SVC_SCOPE_WORK, SVC_AUTH_OK);
    assert_auth(a, e, SVC_SCOPE_WRITE, SVC_AUTH_FORBIDDEN);
    svc_auth_free(a);
    unlink(path);
}

static void test_admin_grants_all(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok(valid_file, path);
    const enum svc_scope all[] = {SVC_SCOPE_OPS, SVC_SCOPE_READ, SVC_SCOPE_WRITE, SVC_SCOPE_WORK,
                                  SVC_SCOPE_ADMIN};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        assert_auth(a, "Bearer " ADMIN, all[i], SVC_AUTH_OK);
    svc_auth_free(a);
    unlink(path);
}

static void test_bad_headers(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok(valid_file, path);
    assert_auth(a, NULL, SVC_SCOPE_READ, SVC_AUTH_MISSING);
    assert_auth(a, "Bearer no-such-token-0123456789", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    /* A prefix or an extension of a real token is a different token. */
    assert_auth(a, "Bearer reader-token-012345678", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer " READER "0", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer " READER "\tx", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    /* Whitespace after the value is not part of it (RFC 9110), and no token holds any. */
    assert_auth(a, "Bearer " READER " ", SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, "Bearer " READER "\t", SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, "Bearer " READER " \t ", SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, "Bearer \t", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    /* Scopes are not tokens. */
    assert_auth(a, "Bearer read", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    /* Other schemes and malformed headers. */
    assert_auth(a, "Basic " READER, SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Token " READER, SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, READER, SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer ", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer    ", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "Bearer" READER, SVC_SCOPE_READ, SVC_AUTH_INVALID);
    assert_auth(a, "", SVC_SCOPE_READ, SVC_AUTH_INVALID);
    /* The scheme is case-insensitive (RFC 7235) and extra spaces before the token are skipped. */
    assert_auth(a, "bearer " READER, SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, "Bearer   " READER, SVC_SCOPE_READ, SVC_AUTH_OK);
    svc_auth_free(a);
    unlink(path);
}

/* Loads a file holding content (or missing_path when content is NULL) in a child process and
 * expects NULL with an err message naming the file and holding frag1 and frag2 (when not NULL). */
static void expect_load_error(const char *content, const char *missing_path, const char *frag1,
                              const char *frag2)
{
    char path[64];
    if (content != NULL)
        write_tokens(path, content);
    else
        snprintf(path, sizeof(path), "%s", missing_path);
    FILE *err = tmpfile();
    assert_non_null(err);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka's handlers would resume the test runner in the child; crash for real. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGFPE, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        struct svc_auth *a = svc_auth_load(path, err);
        fflush(err);
        _exit(a == NULL ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char msg[512] = "";
    rewind(err);
    size_t n = fread(msg, 1, sizeof(msg) - 1, err);
    msg[n] = '\0';
    fclose(err);
    if (content != NULL)
        unlink(path);
    if (WIFSIGNALED(status))
        fail_msg("svc_auth_load crashed with signal %d on %s%s", WTERMSIG(status),
                 content ? "file content: " : "missing file ", content ? content : path);
    if (WEXITSTATUS(status) != 0)
        fail_msg("svc_auth_load accepted %s", content ? content : path);
    if (strstr(msg, path) == NULL)
        fail_msg("message \"%s\" does not name the file %s", msg, path);
    if (frag1 != NULL && strstr(msg, frag1) == NULL)
        fail_msg("message \"%s\" does not hold \"%s\"", msg, frag1);
    if (frag2 != NULL && strstr(msg, frag2) == NULL)
        fail_msg("message \"%s\" does not hold \"%s\"", msg, frag2);
}

static void test_file_short_token(void **state)
{
    expect_load_error("# comment\n\nshort read\n", NULL, "line 3", "16");
    expect_load_error(READER " read\n123456789012345 read\n", NULL, "line 2", "shorter");
}

static void test_file_exact_length_accepted(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok(EXACT " read\n", path);
    assert_int_equal(svc_auth_count(a), 1);
    assert_auth(a, "Bearer " EXACT, SVC_SCOPE_READ, SVC_AUTH_OK);
    svc_auth_free(a);
    unlink(path);
}

static void test_file_unknown_scope(void **state)
{
    expect_load_error(READER " read superuser\n", NULL, "line 1", "unknown scope");
    expect_load_error(READER " read\n" WRITER " Write\n", NULL, "line 2", "unknown scope");
}

static void test_file_no_scopes(void **state)
{
    expect_load_error(READER " read\n\n" WRITER "\n", NULL, "line 3", "without scopes");
    expect_load_error(WRITER " ,, \n", NULL, "line 1", "without scopes");
}

static void test_file_separator_only_line(void **state)
{
    /* A line of commas has no token at all: rejected like a short token, naming the line. */
    expect_load_error(READER " read\n,\n", NULL, "line 2", NULL);
    expect_load_error("\t, read\n", NULL, "line 1", NULL);
}

static void test_file_empty_or_missing(void **state)
{
    expect_load_error("", NULL, "no tokens", NULL);
    expect_load_error("# only a comment\n\n   \n", NULL, "no tokens", NULL);
    expect_load_error(NULL, "/nonexistent/rowlock-tokens", "cannot read", NULL);
}

/* The name a check reports: the line's name=, or _line-<n> without one; for a token refused
 * its scope too (a 403 names who was refused), and "" for an unknown token. */
static void assert_name(const struct svc_auth *a, const char *header, enum svc_scope scope,
                        const char *want)
{
    char name[SVC_AUTH_NAME_MAX + 1] = "stale";
    svc_auth_check(a, header, scope, name, NULL);
    if (strcmp(name, want) != 0)
        fail_msg("check(\"%s\") named \"%s\", expected \"%s\"", header ? header : "(none)", name,
                 want);
}

static void test_token_names(void **state)
{
    char path[64];
    struct svc_auth *a = load_ok("# named and not\n" READER " read name=dashboard\n" WRITER
                                 " name=deploy.bot-2,write\n" ADMIN " admin\n",
                                 path);
    assert_auth(a, "Bearer " WRITER, SVC_SCOPE_WRITE, SVC_AUTH_OK);
    assert_name(a, "Bearer " READER, SVC_SCOPE_READ, "dashboard");
    assert_name(a, "Bearer " READER, SVC_SCOPE_ADMIN, "dashboard");
    assert_name(a, "Bearer " WRITER, SVC_SCOPE_WRITE, "deploy.bot-2");
    assert_name(a, "Bearer " ADMIN, SVC_SCOPE_ADMIN, "_line-4");
    assert_name(a, "Bearer " WORKER, SVC_SCOPE_READ, "");
    assert_name(a, NULL, SVC_SCOPE_READ, "");
    svc_auth_free(a);
    unlink(path);
}

static void test_file_bad_names(void **state)
{
    expect_load_error(READER " read name=\n", NULL, "line 1", "bad token name");
    expect_load_error(READER " read name=_x\n", NULL, "line 1", "bad token name");
    expect_load_error(READER " read name=a/b\n", NULL, "line 1", "bad token name");
    expect_load_error(READER " read name=a name=b\n", NULL, "line 1", "two names");
    expect_load_error(READER " read name=" /* 65 characters */
                             "a123456789012345678901234567890123456789012345678901234567890123"
                             "4\n",
                      NULL, "line 1", "bad token name");
    expect_load_error(READER " name=alone\n", NULL, "line 1", "without scopes");
}

/* The limits of a token's line, -1 where it sets none (the settings' then); every token's
 * words in any order beside its scopes and name. */
static void test_token_limits(void **state)
{
    char path[64];
    struct svc_auth *a =
        load_ok(READER " read rate=100 name=dashboard burst=200 long_polls=4\n" WRITER
                       " long_polls=0,write rate=0\n" ADMIN " admin\n",
                path);
    struct svc_limit l;
    assert_int_equal(svc_auth_check(a, "Bearer " READER, SVC_SCOPE_READ, NULL, &l), SVC_AUTH_OK);
    assert_true(l.rate == 100 && l.burst == 200 && l.long_polls == 4);
    assert_int_equal(svc_auth_check(a, "Bearer " WRITER, SVC_SCOPE_READ, NULL, &l),
                     SVC_AUTH_FORBIDDEN);
    assert_true(l.rate == 0 && l.burst == -1 && l.long_polls == 0);
    svc_auth_check(a, "Bearer " ADMIN, SVC_SCOPE_ADMIN, NULL, &l);
    assert_true(l.rate == -1 && l.burst == -1 && l.long_polls == -1);
    l.rate = 7;
    svc_auth_check(a, "Bearer " WORKER, SVC_SCOPE_READ, NULL, &l);
    assert_true(l.rate == -1 && l.burst == -1 && l.long_polls == -1);
    svc_auth_free(a);
    unlink(path);
}

static void test_file_bad_limits(void **state)
{
    expect_load_error(READER " read\n" WRITER " write rate=-1\n", NULL, "line 2", "bad rate=");
    expect_load_error(READER " read rate=1000001\n", NULL, "line 1", "bad rate=");
    expect_load_error(READER " read rate=\n", NULL, "line 1", "bad rate=");
    expect_load_error(READER " read rate=+5\n", NULL, "line 1", "bad rate=");
    expect_load_error(READER " read rate=5/s\n", NULL, "line 1", "bad rate=");
    expect_load_error(READER " read rate=99999999999999999999\n", NULL, "line 1", "bad rate=");
    expect_load_error(READER " read burst=0\n", NULL, "line 1", "bad burst=");
    expect_load_error(READER " read long_polls=x\n", NULL, "line 1", "bad long_polls=");
    expect_load_error(READER " read burst=2 burst=3\n", NULL, "line 1", "given twice");
    expect_load_error(READER " read ratex=3\n", NULL, "line 1", "unknown scope");
}

static void test_null_safe(void **state)
{
    svc_auth_free(NULL);
    assert_int_equal(svc_auth_count(NULL), 0);
}

/* A reload that parses replaces the tokens: the new one is accepted, the old one no longer. */
static void test_reload_replaces_tokens(void **state)
{
    char path[64], why[256] = "";
    struct svc_auth *a = load_ok(READER " read\n", path);
    FILE *f = fopen(path, "w");
    fputs(WRITER " write\n" ADMIN " admin\n", f);
    fclose(f);
    assert_int_equal(svc_auth_reload(a, path, why, sizeof(why)), 0);
    assert_int_equal(svc_auth_count(a), 2);
    assert_auth(a, "Bearer " WRITER, SVC_SCOPE_WRITE, SVC_AUTH_OK);
    assert_auth(a, "Bearer " READER, SVC_SCOPE_READ, SVC_AUTH_INVALID);
    svc_auth_free(a);
    unlink(path);
}

/* A file that fails to parse, or has gone, changes nothing and says why (file, line, reason). */
static void test_reload_broken_file_keeps_old_tokens(void **state)
{
    char path[64], why[256] = "";
    struct svc_auth *a = load_ok(READER " read\n", path);
    FILE *f = fopen(path, "w");
    fputs(WRITER " write\nshort read\n", f);
    fclose(f);
    assert_int_equal(svc_auth_reload(a, path, why, sizeof(why)), -1);
    assert_non_null(strstr(why, path));
    assert_non_null(strstr(why, "line 2: token shorter than 16 characters"));
    assert_null(strchr(why, '\n'));
    assert_int_equal(svc_auth_count(a), 1);
    assert_auth(a, "Bearer " READER, SVC_SCOPE_READ, SVC_AUTH_OK);
    assert_auth(a, "Bearer " WRITER, SVC_SCOPE_WRITE, SVC_AUTH_INVALID);
    unlink(path);
    assert_int_equal(svc_auth_reload(a, path, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "cannot read tokens file"));
    assert_auth(a, "Bearer " READER, SVC_SCOPE_READ, SVC_AUTH_OK);
    svc_auth_free(a);
}

struct checker {
    struct svc_auth *a;
    int bad; /* a check that saw neither the old set nor the new one */
};

static void *check_loop(void *arg)
{
    struct checker *c = arg;
    for (int i = 0; i < 20000; i++) {
        enum svc_auth_result r = svc_auth_check(c->a, "Bearer " READER, SVC_SCOPE_READ, NULL, NULL);
        enum svc_auth_result w = svc_auth_check(c->a, "Bearer " ADMIN, SVC_SCOPE_READ, NULL, NULL);
        c->bad += r != SVC_AUTH_OK || w != SVC_AUTH_OK;
    }
    return NULL;
}

/* Checks on four threads while the main thread reloads 200 times between two files that both
 * accept READER and ADMIN: every check succeeds (no freed or half-made set is ever read; under
 * ThreadSanitizer, no data race). */
static void test_reload_while_checking(void **state)
{
    char one[64], two[64], why[256];
    struct svc_auth *a = load_ok(READER " read\n" ADMIN " admin\n", one);
    write_tokens(two, ADMIN " admin\n" WRITER " write\n" READER " read\n");
    struct checker c[4];
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        c[i] = (struct checker){a, 0};
        assert_int_equal(pthread_create(&t[i], NULL, check_loop, &c[i]), 0);
    }
    for (int i = 0; i < 200; i++)
        assert_int_equal(svc_auth_reload(a, i % 2 ? one : two, why, sizeof(why)), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(c[i].bad, 0);
    }
    svc_auth_free(a);
    unlink(one);
    unlink(two);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_admin_grants_all),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_file_short_token),
        cmocka_unit_test(test_file_exact_length_accepted),
        cmocka_unit_test(test_file_unknown_scope),
        cmocka_unit_test(test_file_no_scopes),
        cmocka_unit_test(test_file_separator_only_line),
        cmocka_unit_test(test_file_empty_or_missing),
        cmocka_unit_test(test_token_names),
        cmocka_unit_test(test_file_bad_names),
        cmocka_unit_test(test_null_safe),
        cmocka_unit_test(test_token_limits),
        cmocka_unit_test(test_file_bad_limits),
        cmocka_unit_test(test_reload_replaces_tokens),
        cmocka_unit_test(test_reload_broken_file_keeps_old_tokens),
        cmocka_unit_test(test_reload_while_checking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
