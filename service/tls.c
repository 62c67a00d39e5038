/* The listener's certificate and key (see tls.h): files read with a size bound, parsed and
 * checked as a pair by GnuTLS, published through one atomic pointer that the handshake callback
 * reads, and swapped on reload. Retired pairs are kept until the end: a handshake that took one
 * may still be signing with it. Nothing here knows HTTP or signals. */
#include "service/tls.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "service/log.h"

#define TLS_FILE_MAX  (1024 * 1024) /* a certificate chain or a key is a few KiB */
#define TLS_CHAIN_MAX 8             /* certificates in the chain file */

/* One certificate chain and its key, as GnuTLS takes them in a handshake. */
struct tls_pair {
    gnutls_pcert_st certs[TLS_CHAIN_MAX];
    unsigned ncerts;
    gnutls_privkey_t key;
    unsigned char digest[32]; /* of both files' bytes: a reload of the same files is no swap */
    time_t not_after;         /* the server certificate's, or (time_t)-1 when unreadable */
    struct tls_pair *retired; /* the pair this one replaced */
};

struct svc_tls {
    char *cert_file, *key_file;
    _Atomic(struct tls_pair *) current;
};

/* The listener's, for the callback (GnuTLS passes it no closure). Set once by svc_tls_load. */
static _Atomic(struct svc_tls *) tls_serving;

static void pair_free(struct tls_pair *p)
{
    while (p != NULL) {
        struct tls_pair *older = p->retired;
        for (unsigned i = 0; i < p->ncerts; i++)
            gnutls_pcert_deinit(&p->certs[i]);
        if (p->key != NULL)
            gnutls_privkey_deinit(p->key);
        free(p);
        p = older;
    }
}

/* Reads path whole into out (free out->data). what names the file in why. 0 or -1. */
static int read_file(const char *path, const char *what, gnutls_datum_t *out, char *why,
                     size_t whylen)
{
    out->data = NULL;
    out->size = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(why, whylen, "cannot read the TLS %s file %s: %s", what, path, strerror(errno));
        return -1;
    }
    unsigned char *buf = malloc(TLS_FILE_MAX + 1);
    size_t n = buf != NULL ? fread(buf, 1, TLS_FILE_MAX + 1, f) : 0;
    int bad = buf == NULL || ferror(f);
    int saved = errno;
    fclose(f);
    if (bad || n > TLS_FILE_MAX) {
        snprintf(why, whylen, "cannot read the TLS %s file %s: %s", what, path,
                 bad ? strerror(saved) : "larger than 1 MiB");
        free(buf);
        return -1;
    }
    out->data = buf;
    out->size = (unsigned)n;
    return 0;
}

/* The chain of the certificate file, leaf first. 0, or -1 with why. */
static int import_chain(struct tls_pair *p, const gnutls_datum_t *pem, const char *path, char *why,
                        size_t whylen)
{
    unsigned n = TLS_CHAIN_MAX;
    int r = gnutls_pcert_list_import_x509_raw(p->certs, &n, pem, GNUTLS_X509_FMT_PEM,
                                              GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED);
    if (r == GNUTLS_E_SHORT_MEMORY_BUFFER) {
        snprintf(why, whylen, "the TLS certificate file %s holds more than %d certificates", path,
                 TLS_CHAIN_MAX);
        return -1;
    }
    if (r < 0 || n == 0) {
        snprintf(why, whylen,
                 "the TLS certificate file %s holds no usable PEM certificate chain (the "
                 "server's certificate first, then each issuer): %s",
                 path, r < 0 ? gnutls_strerror(r) : "none found");
        return -1;
    }
    p->ncerts = n;
    return 0;
}

/* The key of the key file, and GnuTLS's check that it belongs to the certificate. 0 or -1. */
static int import_key(struct tls_pair *p, const gnutls_datum_t *cert, const gnutls_datum_t *key,
                      const char *cert_file, const char *key_file, char *why, size_t whylen)
{
    int r = gnutls_privkey_init(&p->key);
    if (r >= 0)
        r = gnutls_privkey_import_x509_raw(p->key, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (r < 0) {
        snprintf(why, whylen,
                 "the TLS key file %s holds no usable PEM private key (an encrypted key is not "
                 "supported): %s",
                 key_file, gnutls_strerror(r));
        return -1;
    }
    gnutls_certificate_credentials_t check = NULL;
    r = gnutls_certificate_allocate_credentials(&check);
    if (r >= 0)
        r = gnutls_certificate_set_x509_key_mem2(check, cert, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (check != NULL)
        gnutls_certificate_free_credentials(check);
    if (r == GNUTLS_E_CERTIFICATE_KEY_MISMATCH) {
        snprintf(why, whylen,
                 "the TLS key file %s does not hold the private key of the certificate in %s",
                 key_file, cert_file);
        return -1;
    }
    if (r < 0) {
        snprintf(why, whylen, "GnuTLS refuses the certificate %s with the key %s: %s", cert_file,
                 key_file, gnutls_strerror(r));
        return -1;
    }
    return 0;
}

/* The end of the validity period of p's server certificate (its notAfter), or (time_t)-1. */
static time_t leaf_not_after(const struct tls_pair *p)
{
    gnutls_x509_crt_t crt = NULL;
    time_t until = (time_t)-1;
    if (gnutls_x509_crt_init(&crt) == 0 &&
        gnutls_x509_crt_import(crt, &p->certs[0].cert, GNUTLS_X509_FMT_DER) == 0)
        until = gnutls_x509_crt_get_expiration_time(crt);
    if (crt != NULL)
        gnutls_x509_crt_deinit(crt);
    return until;
}

/* A new pair from the two files. NULL with why. */
static struct tls_pair *pair_read(const char *cert_file, const char *key_file, char *why,
                                  size_t whylen)
{
    gnutls_datum_t cert = {NULL, 0}, key = {NULL, 0};
    struct tls_pair *p = calloc(1, sizeof(*p));
    int ok = p != NULL && read_file(cert_file, "certificate", &cert, why, whylen) == 0 &&
             read_file(key_file, "key", &key, why, whylen) == 0 &&
             import_chain(p, &cert, cert_file, why, whylen) == 0 &&
             import_key(p, &cert, &key, cert_file, key_file, why, whylen) == 0;
    if (ok) {
        p->not_after = leaf_not_after(p);
        gnutls_hash_hd_t h = NULL;
        ok = gnutls_hash_init(&h, GNUTLS_DIG_SHA256) == 0;
        if (ok) {
            gnutls_hash(h, cert.data, cert.size);
            gnutls_hash(h, key.data, key.size);
            gnutls_hash_deinit(h, p->digest);
        } else {
            snprintf(why, whylen, "GnuTLS has no SHA-256");
        }
    } else if (p == NULL) {
        snprintf(why, whylen, "out of memory");
    }
    if (key.data != NULL)
        gnutls_memset(key.data, 0, key.size);
    free(cert.data);
    free(key.data);
    if (!ok) {
        pair_free(p);
        return NULL;
    }
    return p;
}

/* Logs msg with the subject, serial and expiry of p's certificate (a warning when it is out of
 * its validity period: served all the same, as clients will say). */
static void pair_log(const struct tls_pair *p, const char *cert_file, const char *msg)
{
    gnutls_x509_crt_t crt = NULL;
    gnutls_datum_t dn = {NULL, 0};
    unsigned char serial[64];
    size_t slen = sizeof(serial);
    char hex[2 * sizeof(serial) + 1] = "", after[32] = "", chain[8];
    time_t now = time(NULL), from = 0, until = 0;
    if (gnutls_x509_crt_init(&crt) == 0 &&
        gnutls_x509_crt_import(crt, &p->certs[0].cert, GNUTLS_X509_FMT_DER) == 0) {
        gnutls_x509_crt_get_dn3(crt, &dn, 0);
        if (gnutls_x509_crt_get_serial(crt, serial, &slen) == 0)
            for (size_t i = 0; i < slen; i++)
                snprintf(hex + 2 * i, 3, "%02x", serial[i]);
        from = gnutls_x509_crt_get_activation_time(crt);
        until = gnutls_x509_crt_get_expiration_time(crt);
        struct tm tm;
        if (until != (time_t)-1 && gmtime_r(&until, &tm) != NULL)
            strftime(after, sizeof(after), "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    snprintf(chain, sizeof(chain), "%u", p->ncerts);
    const char *subject = dn.data != NULL ? (const char *)dn.data : "";
    svc_log(SVC_LOG_INFO, msg, "file", cert_file, "subject", subject, "serial", hex, "not_after",
            after, SVC_NUM("chain"), chain, NULL);
    if (until != (time_t)-1 && until != 0 && now > until)
        svc_log(SVC_LOG_WARN, "the TLS certificate has expired: clients will refuse it", "file",
                cert_file, "not_after", after, NULL);
    else if (from != (time_t)-1 && now < from)
        svc_log(SVC_LOG_WARN, "the TLS certificate is not valid yet: clients will refuse it",
                "file", cert_file, NULL);
    gnutls_free(dn.data);
    if (crt != NULL)
        gnutls_x509_crt_deinit(crt);
}

struct svc_tls *svc_tls_load(const char *cert_file, const char *key_file, char *why, size_t whylen)
{
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS) ||
        !MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK)) {
        snprintf(why, whylen,
                 "this libmicrohttpd was built without TLS (or without its certificate "
                 "callback): HTTPS is not available; unset the TLS files to serve plain HTTP");
        return NULL;
    }
    struct svc_tls *t = calloc(1, sizeof(*t));
    struct tls_pair *p = NULL;
    if (t == NULL || (t->cert_file = strdup(cert_file)) == NULL ||
        (t->key_file = strdup(key_file)) == NULL) {
        snprintf(why, whylen, "out of memory");
        goto fail;
    }
    p = pair_read(cert_file, key_file, why, whylen);
    if (p == NULL)
        goto fail;
    atomic_store(&t->current, p);
    struct svc_tls *none = NULL;
    if (!atomic_compare_exchange_strong(&tls_serving, &none, t)) {
        snprintf(why, whylen, "a TLS certificate is already in use in this process");
        goto fail;
    }
    pair_log(p, cert_file, "TLS certificate loaded");
    return t;
fail:
    svc_tls_free(t);
    return NULL;
}

int svc_tls_reload(struct svc_tls *t, char *why, size_t whylen)
{
    struct tls_pair *old = atomic_load(&t->current);
    struct tls_pair *p = pair_read(t->cert_file, t->key_file, why, whylen);
    if (p == NULL)
        return -1;
    if (memcmp(p->digest, old->digest, sizeof(p->digest)) == 0) {
        pair_free(p);
        return 0;
    }
    p->retired = old;
    atomic_store_explicit(&t->current, p, memory_order_release);
    pair_log(p, t->cert_file, "TLS certificate reloaded");
    return 1;
}

void svc_tls_free(struct svc_tls *t)
{
    if (t == NULL)
        return;
    struct svc_tls *self = t;
    atomic_compare_exchange_strong(&tls_serving, &self, NULL);
    pair_free(atomic_load(&t->current));
    free(t->cert_file);
    free(t->key_file);
    free(t);
}

int svc_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                     const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                     gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey)
{
    struct svc_tls *t = atomic_load_explicit(&tls_serving, memory_order_acquire);
    struct tls_pair *p = t != NULL ? atomic_load_explicit(&t->current, memory_order_acquire) : NULL;
    if (p == NULL)
        return -1;
    *pcert = p->certs;
    *pcert_length = p->ncerts;
    *pkey = p->key;
    return 0;
}

int svc_tls_not_after(double *out)
{
    struct svc_tls *t = atomic_load(&tls_serving);
    struct tls_pair *p = t != NULL ? atomic_load_explicit(&t->current, memory_order_acquire) : NULL;
    if (p == NULL || p->not_after == (time_t)-1)
        return 0;
    *out = (double)p->not_after;
    return 1;
}
