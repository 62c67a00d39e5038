/* `rowlock --check-health URL`: one HTTP GET with a deadline, over a plain socket or TLS, for
 * container health checks in an image that carries no curl. Exit 0 on a 200 answer, 1 on
 * anything else (refused, timed out, another status), 2 on a malformed command line. No libcurl,
 * no configuration or database: main calls it before anything else. */
#ifndef SERVICE_HEALTHCHECK_H
#define SERVICE_HEALTHCHECK_H

#include <stddef.h>
#include <stdio.h>

/* An http:// or https:// URL taken apart. host is a name, an IPv4 address or an IPv6 address
 * (written in brackets in the URL, kept here without them); path starts with '/'. */
struct svc_health_url {
    int tls; /* https:// */
    char host[256];
    char port[8];
    char path[1024];
};

/* Parses "http://host[:port][/path]" or "https://..." (port 80 or 443 when absent, path "/"
 * when absent). Returns 0, or -1 with the reason in why (a query or fragment is kept in path;
 * userinfo, other schemes and anything else are refused). */
int svc_health_url_parse(const char *url, struct svc_health_url *u, char *why, size_t why_size);

/* Parses the status code of an HTTP/1.x status line ("HTTP/1.1 200 OK"). Returns it, or -1. */
int svc_health_status_line(const char *line, size_t len);

/* GETs u within timeout_ms (name lookup excepted: it is numeric or /etc/hosts in a container).
 * Over https:// the TLS handshake does not verify the certificate: the check asks whether this
 * process answers, from beside it, where the certificate's name would not match the address
 * (as Kubernetes' HTTPS probes do). Returns the status code, or -1 with the reason in why. */
int svc_health_get(const struct svc_health_url *u, long timeout_ms, char *why, size_t why_size);

/* True when argv asks for the health check (argv[1] is --check-health or --check-health=URL). */
int svc_healthcheck_wanted(int argc, char **argv);

/* The whole command: `--check-health URL [--timeout-ms=N]` or `--check-health=URL ...`.
 * Writes one line to out on success, to err on failure. Returns the exit status (0, 1 or 2). */
int svc_healthcheck_main(int argc, char **argv, FILE *out, FILE *err);

#endif
