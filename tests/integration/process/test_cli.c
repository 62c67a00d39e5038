/* The rowlock command line: --help lists every setting with its ROWLOCK_* variable, invalid
 * values exit 2 with a message naming the setting, and the README's configuration table is
 * exactly what --config-markdown prints (both come from the one configuration table). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"

/* Runs rowlock with args (and an environment prefix); returns its exit code, output in out. */
static int run(const char *env, const char *args, char *out, size_t outsize)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "env %s '%s' %s 2>&1", env ? env : "", ROWLOCK_BINARY, args);
    return th_run(cmd, out, outsize);
}

static void help_lists_every_setting(void **state)
{
    static char out[65536];
    assert_int_equal(run(NULL, "--help", out, sizeof(out)), 0);
    const char *vars[] = {"ROWLOCK_DATABASE_URL",
                          "ROWLOCK_LISTEN_ADDRESS",
                          "ROWLOCK_PORT",
                          "ROWLOCK_THREADS",
                          "ROWLOCK_POOL_SIZE",
                          "ROWLOCK_POOL_ACQUIRE_TIMEOUT_MS",
                          "ROWLOCK_STATEMENT_TIMEOUT_MS",
                          "ROWLOCK_BODY_LIMIT",
                          "ROWLOCK_CONNECTION_TIMEOUT_S",
                          "ROWLOCK_CONNECTION_LIMIT",
                          "ROWLOCK_PER_IP_CONNECTION_LIMIT",
                          "ROWLOCK_TOKENS_FILE",
                          "ROWLOCK_LOG_LEVEL",
                          NULL};
    for (size_t i = 0; vars[i]; i++) {
        if (strstr(out, vars[i]) == NULL)
            fail_msg("--help does not mention %s", vars[i]);
    }
}

static void invalid_values_exit_2(void **state)
{
    static char out[4096];
    assert_int_equal(run(NULL, "--port=99999", out, sizeof(out)), 2);
    assert_non_null(strstr(out, "port"));
    assert_non_null(strstr(out, "99999"));
    assert_int_equal(run("ROWLOCK_THREADS=many", "", out, sizeof(out)), 2);
    assert_non_null(strstr(out, "ROWLOCK_THREADS"));
    assert_int_equal(run("ROWLOCK_LOG_LEVEL=loud", "", out, sizeof(out)), 2);
    assert_non_null(strstr(out, "ROWLOCK_LOG_LEVEL"));
    assert_int_equal(run(NULL, "--no-such-flag=1", out, sizeof(out)), 2);
    assert_non_null(strstr(out, "unknown flag"));
    assert_int_equal(run(NULL, "--pool-size", out, sizeof(out)), 2);
    assert_int_equal(run("ROWLOCK_OPEN_OPS=maybe", "", out, sizeof(out)), 2);
}

static void readme_configuration_table_matches(void **state)
{
    static char table[65536], readme[262144];
    assert_int_equal(run(NULL, "--config-markdown", table, sizeof(table)), 0);
    FILE *f = fopen(ROWLOCK_SOURCE_DIR "/README.md", "r");
    assert_non_null(f);
    size_t n = fread(readme, 1, sizeof(readme) - 1, f);
    readme[n] = '\0';
    fclose(f);
    if (strstr(readme, table) == NULL)
        fail_msg("README.md's configuration table differs from `rowlock --config-markdown`; "
                 "paste its output into the README:\n%s",
                 table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_lists_every_setting),
        cmocka_unit_test(invalid_values_exit_2),
        cmocka_unit_test(readme_configuration_table_matches),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
