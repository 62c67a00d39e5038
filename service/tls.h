/* HTTPS on the listener: the certificate and key files read and checked as a pair with GnuTLS,
 * handed to libmicrohttpd's certificate callback, and swapped for a new pair on SIGHUP. How the
 * daemon is started belongs to http.c, when a reload happens to process.c. */
#ifndef SVC_TLS_H
#define SVC_TLS_H

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stddef.h>

/* The GnuTLS priority string of the listener: TLS 1.3 and 1.2 only; in TLS 1.2 only ECDHE key
 * exchange (forward secrecy) with AEAD ciphers (AES-GCM, ChaCha20-Poly1305), no CBC, RSA key
 * exchange, DHE, SHA-1 signatures or compression; the server's order of preference wins. */
#define SVC_TLS_PRIORITIES                                                                         \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+CHACHA20-POLY1305:"      \
    "+AES-128-GCM:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-SIGN-RSA-SHA1:-SIGN-ECDSA-SHA1:" \
    "-SIGN-DSA-SHA1:%SERVER_PRECEDENCE"

struct svc_tls;

/* Reads the PEM certificate file (the server's certificate first, then its intermediates) and
 * the PEM private key file (unencrypted), checks that the key belongs to the certificate, and
 * makes the pair the one the listener serves (one struct svc_tls serves a process). Returns it
 * (the caller's: svc_tls_free), or NULL with why naming the file and the reason: missing,
 * unreadable, not PEM, a chain out of order, a key that does not match, or a libmicrohttpd
 * built without TLS. Logs the certificate's subject, serial and expiry. */
struct svc_tls *svc_tls_load(const char *cert_file, const char *key_file, char *why, size_t whylen);

/* Reads both files again. A good new pair is swapped in atomically: handshakes from then on
 * present it, while connections already open keep going (those with a handshake in progress
 * finish it with the old pair, which stays in memory until svc_tls_free). A pair that fails a
 * check leaves the old one in force. Returns 1 (swapped, logged), 0 (the files are unchanged:
 * nothing to do), or -1 with why. Main thread only. */
int svc_tls_reload(struct svc_tls *t, char *why, size_t whylen);

/* The end of the validity period (notAfter) of the certificate the listener serves now, as
 * seconds since the Unix epoch, into *out: 1, or 0 when it serves none (plain HTTP) or its date
 * could not be read. A reload that swaps the pair changes it. Any thread. */
int svc_tls_not_after(double *out);

/* Releases t and every pair it served; only once no connection can handshake (the daemon
 * stopped). NULL is a no-op. */
void svc_tls_free(struct svc_tls *t);

/* libmicrohttpd's MHD_OPTION_HTTPS_CERT_CALLBACK (a gnutls_certificate_retrieve_function2),
 * called by GnuTLS in each handshake: hands it the pair in force, borrowed. GnuTLS gives the
 * callback no closure, so it reads the one svc_tls that svc_tls_load made the listener's.
 * Returns 0, or -1 (the handshake fails) when there is none. */
int svc_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                     const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                     gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *pkey);

#endif
