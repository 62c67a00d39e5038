/* Throwaway certificates for the TLS tests (see harness_tls.h), through the openssl command. */
#include "harness_tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Runs the shell command cmd in t's directory; prints it and its output when it fails. 0/-1. */
static int run_in(const struct th_tls *t, const char *cmd)
{
    char line[4096], out[8192];
    snprintf(line, sizeof(line), "cd '%s' && { %s; } 2>&1", t->dir, cmd);
    int rc = th_run(line, out, sizeof(out));
    if (rc != 0)
        fprintf(stderr, "th_tls: `%s` failed (%d): %s\n", cmd, rc, out);
    return rc == 0 ? 0 : -1;
}

int th_tls_init(struct th_tls *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/rowlock-tls-XXXXXX");
    if (mkdtemp(t->dir) == NULL) {
        perror("th_tls: mkdtemp");
        return -1;
    }
    return run_in(t, "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc "
                     "-keyout ca.key -out ca.pem -days 2 -subj '/CN=rowlock test CA'");
}

int th_tls_server(struct th_tls *t, const char *name, const char *serial_hex)
{
    return th_tls_server_days(t, name, serial_hex, 2);
}

int th_tls_server_days(struct th_tls *t, const char *name, const char *serial_hex, int days)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n"
             "keyUsage=critical,digitalSignature\\nextendedKeyUsage=serverAuth\\n' > %s.ext && "
             "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -noenc -keyout %s.key "
             "-out %s.csr -subj '/CN=%s' && "
             "openssl x509 -req -in %s.csr -CA ca.pem -CAkey ca.key -set_serial 0x%s -days %d "
             "-extfile %s.ext -out %s.pem && chmod 0600 %s.key",
             name, name, name, name, name, serial_hex, days, name, name, name);
    return run_in(t, cmd);
}

const char *th_tls_path(const struct th_tls *t, const char *file, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", t->dir, file);
    return out;
}

int th_tls_copy(const struct th_tls *t, const char *from, const char *to)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv -f '%s.new' '%s'", from, to, to, to);
    return run_in(t, cmd);
}

void th_tls_cleanup(struct th_tls *t)
{
    char cmd[256], out[256];
    if (t->dir[0] == '\0')
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
    th_run(cmd, out, sizeof(out));
    t->dir[0] = '\0';
}
