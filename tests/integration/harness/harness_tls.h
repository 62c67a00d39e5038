/* Throwaway certificates for the TLS tests, made at test time with the openssl command (Debian's
 * openssl package): a CA and server certificates it signs, for 127.0.0.1 and localhost, each
 * with a serial of the test's choosing so that a client can tell which one it was served. */
#ifndef TESTS_HARNESS_TLS_H
#define TESTS_HARNESS_TLS_H

#include <stddef.h>

struct th_tls {
    char dir[64]; /* a private temporary directory: ca.pem, ca.key, and what th_tls_server made */
};

/* Makes the directory and the CA in it (ECDSA P-256, valid two days). 0, or -1 after printing
 * what failed. */
int th_tls_init(struct th_tls *t);
/* Makes <name>.pem (the certificate, signed by the CA, serial serial_hex, subject CN=<name>,
 * names 127.0.0.1 and localhost, valid two days) and <name>.key (its unencrypted key) in t's
 * directory. 0, or -1 after printing what failed. */
int th_tls_server(struct th_tls *t, const char *name, const char *serial_hex);
/* The same, valid days days from now (th_tls_server: 2). */
int th_tls_server_days(struct th_tls *t, const char *name, const char *serial_hex, int days);
/* The path of file in t's directory, written to out (size bytes); returns out. */
const char *th_tls_path(const struct th_tls *t, const char *file, char *out, size_t size);
/* Copies file from to file to in t's directory (atomically: a new file renamed over the old).
 * 0 or -1. */
int th_tls_copy(const struct th_tls *t, const char *from, const char *to);
/* Removes the directory and everything in it. */
void th_tls_cleanup(struct th_tls *t);

#endif
