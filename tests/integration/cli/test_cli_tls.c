/* rowlock-cli against a service that serves HTTPS with a certificate of the test's own CA: with
 * the CA named (ROWLOCK_CA_FILE, or --ca-file) a command works over https://; without it the
 * certificate does not verify and the command exits 5 at once (a certificate that does not
 * verify is not retried), naming the TLS failure; a CA file that cannot be read is a usage
 * error (exit 2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"
#include "harness_tls.h"

static struct th_tls tls;
static char ca[128];

static int setup(void **state)
{
    char pem[128], key[128], cert_env[192], key_env[192];
    if (th_tls_init(&tls) != 0 || th_tls_server(&tls, "server", "5e") != 0)
        return -1;
    th_tls_path(&tls, "ca.pem", ca, sizeof(ca));
    snprintf(cert_env, sizeof(cert_env), "ROWLOCK_TLS_CERT_FILE=%s",
             th_tls_path(&tls, "server.pem", pem, sizeof(pem)));
    snprintf(key_env, sizeof(key_env), "ROWLOCK_TLS_KEY_FILE=%s",
             th_tls_path(&tls, "server.key", key, sizeof(key)));
    const char *env[] = {cert_env, key_env, NULL};
    return th_svc_start("clitls", env);
}

static int teardown(void **state)
{
    th_tls_cleanup(&tls);
    return th_svc_teardown(state);
}

/* Runs `env ROWLOCK_URL=https://127.0.0.1:<port> <env> rowlock-cli <args>`; its exit status,
 * its output and errors in out. */
static int cli(const char *env, const char *args, char *out, size_t size, double *seconds)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "env ROWLOCK_URL=https://127.0.0.1:%d %s '%s' %s 2>&1", th_svc.port,
             env, ROWLOCK_CLI_BINARY, args);
    double start = th_now();
    int rc = th_run(cmd, out, size);
    *seconds = th_now() - start;
    fprintf(stderr, "%s -> %d (%.2f s): %s\n", cmd, rc, *seconds, out);
    return rc;
}

static void https_with_the_ca_named(void **state)
{
    char out[4096], env[256], args[256];
    double s;
    snprintf(env, sizeof(env), "ROWLOCK_CA_FILE=%s", ca);
    assert_int_equal(cli(env, "schedules list", out, sizeof(out), &s), 0);
    assert_int_equal(cli(env, "schedules get nightly", out, sizeof(out), &s), 3);
    assert_non_null(strstr(out, "schedule_not_found")); /* the service's answer, over TLS */
    snprintf(args, sizeof(args), "--ca-file '%s' schedules list", ca);
    assert_int_equal(cli("", args, out, sizeof(out), &s), 0);
}

static void an_unverified_certificate_is_not_retried(void **state)
{
    char out[4096];
    double s;
    assert_int_equal(cli("ROWLOCK_CA_FILE=", "--retries 4 schedules list", out, sizeof(out), &s),
                     5);
    assert_non_null(strstr(out, "https://127.0.0.1:"));
    assert_true(strstr(out, "certificate") != NULL || strstr(out, "SSL") != NULL);
    assert_true(s < 3.5); /* four retries would sleep 3.75 s in back-offs alone */
}

static void an_unreadable_ca_file_is_a_usage_error(void **state)
{
    char out[4096];
    double s;
    assert_int_equal(cli("", "--ca-file /nonexistent/ca.pem schedules list", out, sizeof(out), &s),
                     2);
    assert_non_null(strstr(out, "CA file /nonexistent/ca.pem: No such file or directory"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(https_with_the_ca_named),
        cmocka_unit_test(an_unverified_certificate_is_not_retried),
        cmocka_unit_test(an_unreadable_ca_file_is_a_usage_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
