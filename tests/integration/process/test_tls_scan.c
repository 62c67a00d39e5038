/* testssl.sh (Debian's testssl.sh package) against the HTTPS listener, with a certificate of the
 * test's own CA: SSL 2 and 3, TLS 1.0 and 1.1 not offered, TLS 1.2 and 1.3 offered; no NULL,
 * anonymous, export, low, 3DES/IDEA or CBC ("average") cipher; every cipher with forward
 * secrecy; and no finding of severity HIGH or CRITICAL about the listener. Findings about the
 * certificate itself (ids cert_*: a two-day throwaway without CRL or OCSP) are the test's
 * certificate, not the service's configuration, and are left out. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_svc.h"
#include "harness_tls.h"

static struct th_tls tls;

static int setup(void **state)
{
    if (th_tls_init(&tls) != 0 || th_tls_server(&tls, "server", "42") != 0)
        return -1;
    return th_svc_db("tls_scan");
}

static int teardown(void **state)
{
    th_tls_cleanup(&tls);
    return 0;
}

/* The finding of id in testssl's flat JSON list, or NULL. */
static const char *finding(json_t *list, const char *id)
{
    size_t i;
    json_t *f;
    json_array_foreach(list, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "id")), id) == 0)
            return json_string_value(json_object_get(f, "finding"));
    }
    return NULL;
}

/* Counts a finding of id that does not start with want, printing it. */
static int expect(json_t *list, const char *id, const char *want)
{
    const char *f = finding(list, id);
    if (f != NULL && strncmp(f, want, strlen(want)) == 0)
        return 0;
    fprintf(stderr, "testssl %s: \"%s\", expected \"%s...\"\n", id, f ? f : "(missing)", want);
    return 1;
}

static void testssl_finds_nothing_weak(void **state)
{
    char out[4096], cmd[1024], pem[128], key[128], ca[128], json[128], cert_env[192], key_env[192];
    if (th_run("command -v testssl", out, sizeof(out)) != 0)
        fail_msg(
            "testssl is not installed (Debian package testssl.sh; deploy/local.sh installs it)");
    snprintf(cert_env, sizeof(cert_env), "ROWLOCK_TLS_CERT_FILE=%s",
             th_tls_path(&tls, "server.pem", pem, sizeof(pem)));
    snprintf(key_env, sizeof(key_env), "ROWLOCK_TLS_KEY_FILE=%s",
             th_tls_path(&tls, "server.key", key, sizeof(key)));
    const char *env[] = {cert_env, key_env, NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    th_tls_path(&tls, "testssl.json", json, sizeof(json));
    snprintf(cmd, sizeof(cmd),
             "testssl --quiet --color 0 --warnings off --add-ca '%s' --jsonfile '%s' "
             "127.0.0.1:%d >/dev/null 2>&1",
             th_tls_path(&tls, "ca.pem", ca, sizeof(ca)), json, svc.port);
    int rc = th_run(cmd, out, sizeof(out));
    assert_int_equal(th_service_stop(&svc), 0);
    json_error_t err;
    json_t *list = json_load_file(json, 0, &err);
    if (list == NULL || !json_is_array(list))
        fail_msg("`%s` (status %d) wrote no JSON list: %s", cmd, rc, err.text);

    int bad = 0;
    const char *absent[] = {"SSLv2", "SSLv3", "TLS1", "TLS1_1"};
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        bad += expect(list, absent[i], "not offered");
    bad += expect(list, "TLS1_2", "offered");
    bad += expect(list, "TLS1_3", "offered");
    const char *weak[] = {"cipherlist_NULL", "cipherlist_aNULL",     "cipherlist_EXPORT",
                          "cipherlist_LOW",  "cipherlist_3DES_IDEA", "cipherlist_AVERAGE"};
    for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++)
        bad += expect(list, weak[i], "not offered");
    size_t i;
    json_t *f;
    json_array_foreach(list, i, f)
    {
        const char *id = json_string_value(json_object_get(f, "id"));
        const char *severity = json_string_value(json_object_get(f, "severity"));
        if (id == NULL || severity == NULL || strncmp(id, "cert", 4) == 0)
            continue;
        if (strcmp(severity, "HIGH") == 0 || strcmp(severity, "CRITICAL") == 0) {
            fprintf(stderr, "testssl %s %s: %s\n", severity, id,
                    json_string_value(json_object_get(f, "finding")));
            bad++;
        }
    }
    json_decref(list);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(testssl_finds_nothing_weak),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
