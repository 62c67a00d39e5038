/* `rowlock --check-health URL`: parses an http:// or https:// URL, connects with a deadline,
 * sends one GET and reads the status line, over the socket or over GnuTLS (no libcurl: the image
 * carries none). Nothing here touches the configuration or the database. */
#include "service/healthcheck.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/clock.h"

#define DEFAULT_TIMEOUT_MS 5000L

static void say(char *why, size_t why_size, const char *text)
{
    snprintf(why, why_size, "%s", text);
}

/* Copies [from, to) into dst (size dsize) unless empty or too long. 0 or -1. */
static int copy_part(char *dst, size_t dsize, const char *from, const char *to)
{
    size_t n = (size_t)(to - from);
    if (n == 0 || n >= dsize)
        return -1;
    memcpy(dst, from, n);
    dst[n] = '\0';
    return 0;
}

static int parse_port(const char *from, const char *to, char *out, size_t size)
{
    if (from == to || to - from > 5)
        return -1;
    long v = 0;
    for (const char *p = from; p < to; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return -1;
    snprintf(out, size, "%ld", v);
    return 0;
}

int svc_health_url_parse(const char *url, struct svc_health_url *u, char *why, size_t why_size)
{
    static const char http[] = "http://", https[] = "https://";
    const char *auth;
    if (strncmp(url, http, sizeof(http) - 1) == 0) {
        u->tls = 0;
        auth = url + sizeof(http) - 1;
    } else if (strncmp(url, https, sizeof(https) - 1) == 0) {
        u->tls = 1;
        auth = url + sizeof(https) - 1;
    } else {
        say(why, why_size, "the URL must start with http:// or https://");
        return -1;
    }
    const char *end = auth + strcspn(auth, "/?#");
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL) {
        say(why, why_size, "the URL must not carry user information");
        return -1;
    }
    const char *host_end, *port_at = NULL;
    if (*auth == '[') {
        host_end = memchr(auth, ']', (size_t)(end - auth));
        if (host_end == NULL || copy_part(u->host, sizeof(u->host), auth + 1, host_end) != 0) {
            say(why, why_size, "the URL has a malformed [IPv6] host");
            return -1;
        }
        if (host_end + 1 < end && host_end[1] != ':') {
            say(why, why_size, "the URL has text after its [IPv6] host");
            return -1;
        }
        port_at = host_end + 1 < end ? host_end + 2 : NULL;
    } else {
        host_end = memchr(auth, ':', (size_t)(end - auth));
        port_at = host_end ? host_end + 1 : NULL;
        if (copy_part(u->host, sizeof(u->host), auth, host_end ? host_end : end) != 0) {
            say(why, why_size, "the URL has no host");
            return -1;
        }
    }
    if (port_at == NULL)
        snprintf(u->port, sizeof(u->port), "%s", u->tls ? "443" : "80");
    else if (parse_port(port_at, end, u->port, sizeof(u->port)) != 0) {
        say(why, why_size, "the URL's port must be a number from 1 to 65535");
        return -1;
    }
    const char *path = *end == '/' ? end : NULL;
    int n = snprintf(u->path, sizeof(u->path), "%s%s", path ? "" : "/", path ? path : end);
    if (n < 0 || (size_t)n >= sizeof(u->path) || strpbrk(u->path, " \r\n\t") != NULL) {
        say(why, why_size, "the URL's path is too long or holds white space");
        return -1;
    }
    return 0;
}

int svc_health_status_line(const char *line, size_t len)
{
    /* "HTTP/1.x " then three digits, then a space or the end of the line */
    if (len < 12 || memcmp(line, "HTTP/1.", 7) != 0 || line[8] != ' ')
        return -1;
    int code = 0;
    for (int i = 9; i < 12; i++) {
        if (line[i] < '0' || line[i] > '9')
            return -1;
        code = code * 10 + (line[i] - '0');
    }
    if (code < 100 || (len > 12 && line[12] != ' ' && line[12] != '\r'))
        return -1;
    return code;
}

static long now_ms(void)
{
    return (long)(svc_now() * 1000.0);
}

/* Waits for events on fd until the deadline. 1 when ready, 0 on timeout, -1 on error. */
static int wait_fd(int fd, short events, long deadline)
{
    for (;;) {
        long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 1;
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Connects to one address before the deadline. Returns the socket or -1 (errno set). */
static int connect_one(const struct addrinfo *ai, long deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    if (errno == EINPROGRESS) {
        int r = wait_fd(fd, POLLOUT, deadline), soerr = 0;
        socklen_t sl = sizeof(soerr);
        if (r == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
            return fd;
        errno = r == 0 ? ETIMEDOUT : (soerr ? soerr : errno);
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* The connection: the socket, and the TLS session over it for https:// (else NULL). */
struct conn {
    int fd;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
};

/* The TLS handshake before the deadline, the certificate taken unverified (see healthcheck.h).
 * 0, or -1 with why. */
static int tls_start(struct conn *c, const char *host, long deadline, char *why, size_t why_size)
{
    unsigned char addr[16];
    int numeric = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (gnutls_certificate_allocate_credentials(&c->cred) < 0 ||
        gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NONBLOCK) < 0 ||
        gnutls_set_default_priority(c->tls) < 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) < 0 ||
        (!numeric && gnutls_server_name_set(c->tls, GNUTLS_NAME_DNS, host, strlen(host)) < 0)) {
        say(why, why_size, "cannot set up a TLS session");
        return -1;
    }
    gnutls_transport_set_int(c->tls, c->fd);
    for (;;) {
        int r = gnutls_handshake(c->tls);
        if (r == 0)
            return 0;
        if (gnutls_error_is_fatal(r)) {
            snprintf(why, why_size, "TLS handshake failed: %s", gnutls_strerror(r));
            return -1;
        }
        r = wait_fd(c->fd, gnutls_record_get_direction(c->tls) ? POLLOUT : POLLIN, deadline);
        if (r != 1) {
            say(why, why_size, r == 0 ? "no TLS handshake before the timeout" : "poll failed");
            return -1;
        }
    }
}

static void conn_close(struct conn *c)
{
    if (c->tls != NULL)
        gnutls_deinit(c->tls);
    if (c->cred != NULL)
        gnutls_certificate_free_credentials(c->cred);
    if (c->fd >= 0)
        close(c->fd);
}

/* Sends up to len bytes: the count, -1 on an error, -2 when the socket is not ready (the
 * direction to wait for in *events). */
static ssize_t conn_send(struct conn *c, const char *data, size_t len, short *events)
{
    *events = POLLOUT;
    if (c->tls == NULL) {
        ssize_t n = send(c->fd, data, len, MSG_NOSIGNAL);
        return n >= 0 ? n : errno == EAGAIN || errno == EINTR ? -2 : -1;
    }
    ssize_t n = gnutls_record_send(c->tls, data, len);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
        *events = gnutls_record_get_direction(c->tls) ? POLLOUT : POLLIN;
        return -2;
    }
    return n >= 0 ? n : -1;
}

/* Reads up to size bytes: the count, 0 at the end, -1 on an error, -2 when nothing is there
 * yet. */
static ssize_t conn_recv(struct conn *c, char *buf, size_t size)
{
    if (c->tls == NULL) {
        ssize_t n = recv(c->fd, buf, size, 0);
        return n >= 0 ? n : errno == EAGAIN || errno == EINTR ? -2 : -1;
    }
    ssize_t n = gnutls_record_recv(c->tls, buf, size);
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
        return -2;
    if (n == GNUTLS_E_PREMATURE_TERMINATION)
        return 0;
    return n >= 0 ? n : -1;
}

static int send_all(struct conn *c, const char *data, size_t len, long deadline)
{
    while (len > 0) {
        short events;
        ssize_t n = conn_send(c, data, len, &events);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n != -2 || wait_fd(c->fd, events, deadline) != 1) {
            return -1;
        }
    }
    return 0;
}

/* Reads until the end of the status line. Returns the status code, -1 (why says why). */
static int read_status(struct conn *c, long deadline, char *why, size_t why_size)
{
    char line[512];
    size_t have = 0;
    while (have < sizeof(line)) {
        /* TLS may hold bytes of a record already read from the socket */
        int r = c->tls != NULL && gnutls_record_check_pending(c->tls) > 0
                    ? 1
                    : wait_fd(c->fd, POLLIN, deadline);
        if (r != 1) {
            say(why, why_size, r == 0 ? "no answer before the timeout" : "poll failed");
            return -1;
        }
        ssize_t n = conn_recv(c, line + have, sizeof(line) - have);
        if (n == -2)
            continue;
        if (n <= 0) {
            say(why, why_size, "the connection closed before a status line");
            return -1;
        }
        have += (size_t)n;
        char *eol = memchr(line, '\n', have);
        if (eol != NULL) {
            int code = svc_health_status_line(line, (size_t)(eol - line));
            if (code < 0)
                say(why, why_size, "the answer is not HTTP/1.x");
            return code;
        }
    }
    say(why, why_size, "the status line is too long");
    return -1;
}

int svc_health_get(const struct svc_health_url *u, long timeout_ms, char *why, size_t why_size)
{
    long deadline = now_ms() + timeout_ms;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gai = getaddrinfo(u->host, u->port, &hints, &res);
    if (gai != 0) {
        snprintf(why, why_size, "cannot resolve %s: %s", u->host, gai_strerror(gai));
        return -1;
    }
    struct conn c = {.fd = -1};
    int err = 0;
    for (const struct addrinfo *ai = res; ai != NULL && c.fd < 0; ai = ai->ai_next) {
        c.fd = connect_one(ai, deadline);
        if (c.fd < 0)
            err = errno;
    }
    freeaddrinfo(res);
    if (c.fd < 0) {
        snprintf(why, why_size, "cannot connect to %s port %s: %s", u->host, u->port,
                 strerror(err));
        return -1;
    }
    char req[1600];
    int bracket = strchr(u->host, ':') != NULL;
    int len = snprintf(req, sizeof(req),
                       "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: rowlock-check-health\r\n"
                       "Accept: */*\r\nConnection: close\r\n\r\n",
                       u->path, bracket ? "[" : "", u->host, bracket ? "]" : "", u->port);
    int code = -1;
    if (len < 0 || (size_t)len >= sizeof(req))
        say(why, why_size, "the request is too long");
    else if (u->tls && tls_start(&c, u->host, deadline, why, why_size) != 0)
        code = -1; /* why says why */
    else if (send_all(&c, req, (size_t)len, deadline) != 0)
        snprintf(why, why_size, "cannot send the request: %s", strerror(errno));
    else
        code = read_status(&c, deadline, why, why_size);
    conn_close(&c);
    return code;
}

int svc_healthcheck_wanted(int argc, char **argv)
{
    return argc >= 2 &&
           (strcmp(argv[1], "--check-health") == 0 || strncmp(argv[1], "--check-health=", 15) == 0);
}

/* Reads `--check-health URL [--timeout-ms=N]`. Returns the URL, or NULL with why set. */
static const char *parse_args(int argc, char **argv, long *timeout_ms, char *why, size_t wsize)
{
    const char *url = strncmp(argv[1], "--check-health=", 15) == 0 ? argv[1] + 15 : NULL;
    int i = 2;
    if (url == NULL && argc > 2)
        url = argv[i++];
    if (url == NULL || *url == '\0') {
        say(why, wsize, "--check-health needs a URL");
        return NULL;
    }
    for (; i < argc; i++) {
        char *end = NULL;
        if (strncmp(argv[i], "--timeout-ms=", 13) != 0) {
            snprintf(why, wsize, "unknown argument to --check-health: %s", argv[i]);
            return NULL;
        }
        errno = 0;
        *timeout_ms = strtol(argv[i] + 13, &end, 10);
        if (errno != 0 || end == argv[i] + 13 || *end != '\0' || *timeout_ms < 1 ||
            *timeout_ms > 600000) {
            say(why, wsize, "--timeout-ms must be a number of milliseconds from 1 to 600000");
            return NULL;
        }
    }
    return url;
}

int svc_healthcheck_main(int argc, char **argv, FILE *out, FILE *err)
{
    char why[512] = "";
    long timeout_ms = DEFAULT_TIMEOUT_MS;
    struct svc_health_url u;
    const char *url = parse_args(argc, argv, &timeout_ms, why, sizeof(why));
    if (url == NULL || svc_health_url_parse(url, &u, why, sizeof(why)) != 0) {
        fprintf(err,
                "rowlock --check-health: %s\nusage: rowlock --check-health "
                "http[s]://HOST[:PORT]/PATH [--timeout-ms=N]\n",
                why);
        return 2;
    }
    int code = svc_health_get(&u, timeout_ms, why, sizeof(why));
    if (code == 200) {
        fprintf(out, "%s: 200\n", url);
        return 0;
    }
    if (code > 0)
        fprintf(err, "rowlock --check-health: %s answered %d\n", url, code);
    else
        fprintf(err, "rowlock --check-health: %s: %s\n", url, why);
    return 1;
}
