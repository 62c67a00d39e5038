/* HTTPS on the listener, with a CA and certificates made by the test: a request over TLS with
 * the CA trusted answers (the API, the dashboard, `rowlock --check-health https://...`), and one
 * that does not trust the CA is refused by the client; plain HTTP on the TLS port gets no HTTP
 * answer; TLS 1.0 and 1.1 and a CBC cipher are refused while TLS 1.2 and 1.3 negotiate AEAD
 * ciphers; a chunked body past the limit gets its 413 over TLS; a missing file, a key of another
 * certificate and half a configuration stop startup (exit 2) with a message naming the file and
 * the reason. SIGHUP with a new certificate in the files: a keep-alive connection opened before
 * it keeps answering on the same connection, a new connection is served the new certificate (its
 * serial), and a reload of a broken pair keeps the certificate in force. /metrics gives the
 * expiry of the certificate in force, moved by a rotation and not by a refused reload (and no
 * such series over plain HTTP). */
#include <curl/curl.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"
#include "harness_tls.h"

static struct th_tls tls;
static char ca[128], live_pem[128], live_key[128];

static int setup(void **state)
{
    if (th_tls_init(&tls) != 0 || th_tls_server(&tls, "first", "1a") != 0 ||
        th_tls_server(&tls, "second", "2b") != 0 || th_tls_server(&tls, "other", "3c") != 0 ||
        th_tls_server_days(&tls, "late", "4d", 30) != 0)
        return -1;
    th_tls_path(&tls, "ca.pem", ca, sizeof(ca));
    th_tls_path(&tls, "live.pem", live_pem, sizeof(live_pem));
    th_tls_path(&tls, "live.key", live_key, sizeof(live_key));
    return th_svc_db("tls");
}

static int teardown(void **state)
{
    th_tls_cleanup(&tls);
    return 0;
}

/* Starts svc with the live pair (first's unless the test copied another) on HTTPS, with one
 * more setting when extra is not NULL. */
static void start_https_with(struct th_service *svc, const char *extra)
{
    char cert_env[192], key_env[192];
    snprintf(cert_env, sizeof(cert_env), "ROWLOCK_TLS_CERT_FILE=%s", live_pem);
    snprintf(key_env, sizeof(key_env), "ROWLOCK_TLS_KEY_FILE=%s", live_key);
    const char *env[] = {cert_env, key_env, extra, NULL};
    assert_int_equal(th_service_start(svc, th_svc_dburl, env), 0);
    assert_true(th_service_logged(svc, "\"scheme\":\"https\""));
}

static void start_https(struct th_service *svc)
{
    start_https_with(svc, NULL);
}

static void use_pair(const char *name)
{
    char pem[64], key[64];
    snprintf(pem, sizeof(pem), "%s.pem", name);
    snprintf(key, sizeof(key), "%s.key", name);
    assert_int_equal(th_tls_copy(&tls, pem, "live.pem"), 0);
    assert_int_equal(th_tls_copy(&tls, key, "live.key"), 0);
}

/* A libcurl handle for https://127.0.0.1:port, trusting the test's CA unless ca_file is NULL. */
static CURL *https_client(const char *ca_file)
{
    CURL *c = curl_easy_init();
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, th_buf_write);
    if (ca_file != NULL)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca_file);
    return c;
}

/* GET path on c; returns the status (0 when no answer: *rc says why), the body in b. */
static long https_get(CURL *c, int port, const char *path, struct th_buf *b, CURLcode *rc)
{
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    long status = 0;
    *rc = curl_easy_perform(c);
    if (*rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        fprintf(stderr, "GET %s: %s\n", url, curl_easy_strerror(*rc));
    return status;
}

/* What a GnuTLS client with this priority string negotiates with the service. */
struct handshake {
    int result; /* 0, or the GnuTLS error of the handshake */
    gnutls_protocol_t version;
    gnutls_cipher_algorithm_t cipher;
    char serial[64]; /* of the certificate served, in hex */
};

static void serial_of(gnutls_session_t s, char *out, size_t size)
{
    unsigned n = 0;
    const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
    gnutls_x509_crt_t crt;
    unsigned char serial[32];
    size_t len = sizeof(serial);
    out[0] = '\0';
    if (certs == NULL || n == 0 || gnutls_x509_crt_init(&crt) != 0)
        return;
    if (gnutls_x509_crt_import(crt, &certs[0], GNUTLS_X509_FMT_DER) == 0 &&
        gnutls_x509_crt_get_serial(crt, serial, &len) == 0)
        for (size_t i = 0; i < len && 2 * i + 2 < size; i++)
            snprintf(out + 2 * i, 3, "%02x", serial[i]);
    gnutls_x509_crt_deinit(crt);
}

static struct handshake handshake(int port, const char *priority)
{
    struct handshake h = {.result = GNUTLS_E_INTERNAL_ERROR};
    gnutls_session_t s;
    gnutls_certificate_credentials_t cred;
    assert_int_equal(gnutls_certificate_allocate_credentials(&cred), 0);
    assert_true(gnutls_certificate_set_x509_trust_file(cred, ca, GNUTLS_X509_FMT_PEM) > 0);
    assert_int_equal(gnutls_init(&s, GNUTLS_CLIENT), 0);
    assert_int_equal(gnutls_priority_set_direct(s, priority, NULL), 0);
    assert_int_equal(gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred), 0);
    gnutls_session_set_verify_cert(s, "localhost", 0);
    int fd = th_tcp_connect(port);
    gnutls_transport_set_int(s, fd);
    gnutls_handshake_set_timeout(s, 10000);
    do
        h.result = gnutls_handshake(s);
    while (h.result < 0 && gnutls_error_is_fatal(h.result) == 0);
    if (h.result == 0) {
        h.version = gnutls_protocol_get_version(s);
        h.cipher = gnutls_cipher_get(s);
        serial_of(s, h.serial, sizeof(h.serial));
        gnutls_bye(s, GNUTLS_SHUT_WR);
    }
    fprintf(stderr, "handshake with %s: %s %s %s serial %s\n", priority,
            h.result == 0 ? "ok" : gnutls_strerror(h.result),
            h.result == 0 ? gnutls_protocol_get_name(h.version) : "",
            h.result == 0 ? gnutls_cipher_get_name(h.cipher) : "", h.serial);
    close(fd);
    gnutls_deinit(s);
    gnutls_certificate_free_credentials(cred);
    return h;
}

static void https_answers_with_the_ca_trusted(void **state)
{
    use_pair("first");
    struct th_service svc;
    start_https(&svc);
    struct th_buf b = {0};
    CURLcode rc;
    CURL *c = https_client(ca);
    assert_int_equal(https_get(c, svc.port, "/healthz", &b, &rc), 200);
    assert_int_equal(https_get(c, svc.port, "/topics", &b, &rc), 200);
    assert_non_null(strstr(b.data, "\"topics\""));
    /* the dashboard comes over the same listener, and names no http:// of its own */
    free(b.data);
    b = (struct th_buf){0};
    assert_int_equal(https_get(c, svc.port, "/ui", &b, &rc), 200);
    assert_null(strstr(b.data, "http://"));
    curl_easy_cleanup(c);
    free(b.data);
    b = (struct th_buf){0};

    c = https_client(NULL); /* the system's CAs: not ours */
    assert_int_equal(https_get(c, svc.port, "/healthz", &b, &rc), 0);
    assert_int_equal(rc, CURLE_PEER_FAILED_VERIFICATION);
    curl_easy_cleanup(c);
    free(b.data);

    char cmd[512], out[1024];
    snprintf(cmd, sizeof(cmd), "'%s' --check-health https://127.0.0.1:%d/healthz 2>&1",
             ROWLOCK_BINARY, svc.port);
    if (th_run(cmd, out, sizeof(out)) != 0)
        fail_msg("%s: %s", cmd, out);
    snprintf(cmd, sizeof(cmd),
             "'%s' --check-health http://127.0.0.1:%d/healthz --timeout-ms=3000 2>&1",
             ROWLOCK_BINARY, svc.port);
    assert_int_equal(th_run(cmd, out, sizeof(out)), 1);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void plain_http_on_the_tls_port_gets_no_answer(void **state)
{
    use_pair("first");
    struct th_service svc;
    start_https(&svc);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char buf[4096];
    th_raw_exchange(svc.port, req, sizeof(req) - 1, buf, sizeof(buf), 3000);
    assert_null(strstr(buf, "HTTP/1."));
    /* a failed handshake is the client's doing: no warning per connection for anyone to flood
     * (looked for once a later request's access line is there: the log is written in order) */
    CURL *c = https_client(ca);
    struct curl_slist *h = curl_slist_append(NULL, "X-Request-Id: after-plain-http");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    struct th_buf b = {0};
    CURLcode rc;
    assert_int_equal(https_get(c, svc.port, "/healthz", &b, &rc), 200);
    for (int i = 0; i < 200 && !th_service_logged(&svc, "after-plain-http"); i++)
        usleep(10000);
    assert_true(th_service_logged(&svc, "after-plain-http"));
    assert_false(th_service_logged(&svc, "received handshake message"));
    free(b.data);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    /* and the service goes on serving HTTPS */
    assert_int_equal(handshake(svc.port, "NORMAL").result, 0);
    assert_int_equal(th_service_stop(&svc), 0);
}

static void only_tls_12_and_13_with_aead_ciphers(void **state)
{
    use_pair("first");
    struct th_service svc;
    start_https(&svc);
    const char *refused[] = {
        "NORMAL:-VERS-ALL:+VERS-TLS1.0",
        "NORMAL:-VERS-ALL:+VERS-TLS1.1",
        "NORMAL:-VERS-ALL:+VERS-TLS1.1:+VERS-TLS1.0",
        "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-CBC:+AES-256-CBC:-MAC-ALL:+SHA1:+"
        "SHA256",
    };
    int accepted = 0;
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (handshake(svc.port, refused[i]).result == 0) {
            fprintf(stderr, "the service accepted a handshake with %s\n", refused[i]);
            accepted++;
        }
    assert_int_equal(accepted, 0);
    struct handshake h12 = handshake(svc.port, "NORMAL:-VERS-ALL:+VERS-TLS1.2");
    assert_int_equal(h12.result, 0);
    assert_int_equal(h12.version, GNUTLS_TLS1_2);
    assert_true(h12.cipher == GNUTLS_CIPHER_AES_256_GCM ||
                h12.cipher == GNUTLS_CIPHER_AES_128_GCM ||
                h12.cipher == GNUTLS_CIPHER_CHACHA20_POLY1305);
    struct handshake h13 = handshake(svc.port, "NORMAL:-VERS-ALL:+VERS-TLS1.3");
    assert_int_equal(h13.result, 0);
    assert_int_equal(h13.version, GNUTLS_TLS1_3);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* A chunked body that grows past the limit is answered 413 before the rest is read, written by
 * rowlock itself rather than by libmicrohttpd: over HTTPS it must go through the TLS session (in
 * the clear on the socket, it broke the stream and the client saw a TLS error). */
static void an_early_413_arrives_over_tls(void **state)
{
    use_pair("first");
    struct th_service svc;
    start_https_with(&svc, "ROWLOCK_BODY_LIMIT=1024");
    char body[5000];
    memset(body, 'a', sizeof(body));
    struct curl_slist *h = curl_slist_append(NULL, "Transfer-Encoding: chunked");
    h = curl_slist_append(h, "Content-Type: application/json");
    CURL *c = https_client(ca);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)sizeof(body));
    struct th_buf b = {0};
    CURLcode rc;
    assert_int_equal(https_get(c, svc.port, "/queues/q/jobs", &b, &rc), 413);
    assert_non_null(strstr(b.data, "\"code\":\"payload_too_large\""));
    free(b.data);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* Starts the service with these two files and expects it to refuse: exit 2, and a log line
 * holding want. */
static void refused_at_start(const char *cert, const char *key, const char *want)
{
    char cert_env[192], key_env[192];
    snprintf(cert_env, sizeof(cert_env), "ROWLOCK_TLS_CERT_FILE=%s", cert);
    snprintf(key_env, sizeof(key_env), "ROWLOCK_TLS_KEY_FILE=%s", key);
    const char *env[] = {cert_env, key_env, NULL};
    struct th_service svc;
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), -1);
    assert_int_equal(svc.exit_code, 2);
    if (!th_service_logged(&svc, want))
        fail_msg("no line says \"%s\"", want);
}

static void a_bad_pair_stops_startup(void **state)
{
    char first_pem[128], first_key[128], other_key[128], missing[128], garbage[160];
    th_tls_path(&tls, "first.pem", first_pem, sizeof(first_pem));
    th_tls_path(&tls, "first.key", first_key, sizeof(first_key));
    th_tls_path(&tls, "other.key", other_key, sizeof(other_key));
    th_tls_path(&tls, "missing.pem", missing, sizeof(missing));
    th_tls_path(&tls, "first.ext", garbage, sizeof(garbage)); /* a file, not PEM */
    char want[512];
    snprintf(want, sizeof(want), "cannot read the TLS certificate file %s: No such file", missing);
    refused_at_start(missing, first_key, want);
    snprintf(want, sizeof(want), "cannot read the TLS key file %s: No such file", missing);
    refused_at_start(first_pem, missing, want);
    snprintf(want, sizeof(want),
             "the TLS key file %s does not hold the private key of the certificate in %s",
             other_key, first_pem);
    refused_at_start(first_pem, other_key, want);
    snprintf(want, sizeof(want), "the TLS certificate file %s holds no usable PEM certificate",
             garbage);
    refused_at_start(garbage, first_key, want);

    char out[2048], cmd[512];
    snprintf(cmd, sizeof(cmd), "ROWLOCK_TLS_CERT_FILE='%s' '%s' 2>&1", first_pem, ROWLOCK_BINARY);
    assert_int_equal(th_run(cmd, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "go together"));
}

/* Sends SIGHUP and waits for a line holding needle. */
static void hup_and_await(struct th_service *svc, const char *needle)
{
    th_service_signal(svc, SIGHUP);
    for (int i = 0; i < 500 && !th_service_logged(svc, needle); i++) {
        struct timespec nap = {0, 10 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    if (!th_service_logged(svc, needle))
        fail_msg("no line says \"%s\" after SIGHUP", needle);
}

/* GET /healthz on c, asserting 200 and whether it opened a new connection. */
static void get_on(CURL *c, int port, long new_connections)
{
    struct th_buf b = {0};
    CURLcode rc;
    long opened = -1;
    assert_int_equal(https_get(c, port, "/healthz", &b, &rc), 200);
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &opened);
    assert_int_equal(opened, new_connections);
    free(b.data);
}

static void sighup_rotates_without_dropping_connections(void **state)
{
    use_pair("first");
    struct th_service svc;
    start_https(&svc);
    CURL *kept = https_client(ca);
    get_on(kept, svc.port, 1);
    assert_string_equal(handshake(svc.port, "NORMAL").serial, "1a");

    use_pair("second");
    hup_and_await(&svc, "\"msg\":\"TLS certificate reloaded\"");
    assert_true(th_service_logged(&svc, "\"serial\":\"2b\""));
    get_on(kept, svc.port, 0); /* the connection of before the reload, reused */
    assert_string_equal(handshake(svc.port, "NORMAL").serial, "2b");
    assert_string_equal(handshake(svc.port, "NORMAL:-VERS-ALL:+VERS-TLS1.2").serial, "2b");

    /* a key of another certificate: refused, the certificate in force stays */
    assert_int_equal(th_tls_copy(&tls, "other.key", "live.key"), 0);
    hup_and_await(&svc, "TLS certificate not reloaded: the previous one stays in force");
    assert_true(th_service_logged(&svc, "does not hold the private key of the certificate"));
    assert_string_equal(handshake(svc.port, "NORMAL").serial, "2b");
    get_on(kept, svc.port, 0);

    /* the same files again: nothing to swap */
    use_pair("second");
    hup_and_await(&svc, "TLS certificate and key unchanged");
    assert_string_equal(handshake(svc.port, "NORMAL").serial, "2b");
    get_on(kept, svc.port, 0);
    curl_easy_cleanup(kept);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* The notAfter of the PEM certificate in t's file name, as Unix time. */
static double not_after_of(const char *name)
{
    char file[128];
    gnutls_datum_t pem = {NULL, 0};
    gnutls_x509_crt_t crt = NULL;
    assert_int_equal(gnutls_load_file(th_tls_path(&tls, name, file, sizeof(file)), &pem), 0);
    assert_int_equal(gnutls_x509_crt_init(&crt), 0);
    assert_int_equal(gnutls_x509_crt_import(crt, &pem, GNUTLS_X509_FMT_PEM), 0);
    time_t until = gnutls_x509_crt_get_expiration_time(crt);
    gnutls_x509_crt_deinit(crt);
    gnutls_free(pem.data);
    assert_true(until != (time_t)-1);
    return (double)until;
}

#define EXPIRY "rowlock_tls_certificate_expiry_timestamp_seconds"

/* The value of series in svc's /metrics, read over HTTPS; -1 when it has no such series. */
static double https_metric(struct th_service *svc, const char *series)
{
    CURL *c = https_client(ca);
    struct th_buf b = {0};
    CURLcode rc;
    assert_int_equal(https_get(c, svc->port, "/metrics", &b, &rc), 200);
    curl_easy_cleanup(c);
    char key[128];
    snprintf(key, sizeof(key), "\n%s ", series);
    const char *at = b.data != NULL ? strstr(b.data, key) : NULL;
    double v = at != NULL ? atof(at + strlen(key)) : -1;
    free(b.data);
    return v;
}

static void the_certificates_expiry_is_a_metric_that_follows_a_rotation(void **state)
{
    double first = not_after_of("first.pem"), late = not_after_of("late.pem");
    assert_true(late - first > 20 * 86400); /* two days, thirty days */
    use_pair("first");
    struct th_service svc;
    start_https(&svc);
    assert_true(https_metric(&svc, EXPIRY) == first);

    use_pair("late");
    hup_and_await(&svc, "\"serial\":\"4d\"");
    assert_true(https_metric(&svc, EXPIRY) == late);

    /* a pair refused by the reload: the certificate in force, and its expiry, stay */
    use_pair("first");
    assert_int_equal(th_tls_copy(&tls, "other.key", "live.key"), 0);
    hup_and_await(&svc, "TLS certificate not reloaded: the previous one stays in force");
    assert_true(https_metric(&svc, EXPIRY) == late);
    assert_int_equal(th_service_stop(&svc), 0);

    /* plain HTTP serves no certificate: no series */
    struct th_service plain;
    assert_int_equal(th_service_start(&plain, th_svc_dburl, NULL), 0);
    assert_true(th_metric(plain.port, "rowlock_http_connection_limit") > 0);
    assert_true(th_metric(plain.port, EXPIRY) == -1);
    assert_int_equal(th_service_stop(&plain), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(https_answers_with_the_ca_trusted),
        cmocka_unit_test(plain_http_on_the_tls_port_gets_no_answer),
        cmocka_unit_test(only_tls_12_and_13_with_aead_ciphers),
        cmocka_unit_test(an_early_413_arrives_over_tls),
        cmocka_unit_test(a_bad_pair_stops_startup),
        cmocka_unit_test(sighup_rotates_without_dropping_connections),
        cmocka_unit_test(the_certificates_expiry_is_a_metric_that_follows_a_rotation),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int failed = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return failed;
}
