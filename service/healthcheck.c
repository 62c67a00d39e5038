/* `rowlock --check-health URL`: parses an http:// URL, connects with a deadline, sends one GET and
 * reads the status line. Plain sockets only (no libcurl, no TLS): the service listens in plain
 * HTTP and the check runs beside it. Nothing here touches the configuration or the database. */
#include "service/healthcheck.h"

#include <errno.h>
#include <fcntl.h>
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
    static const char scheme[] = "http://";
    if (strncmp(url, scheme, sizeof(scheme) - 1) != 0) {
        say(why, why_size, "the URL must start with http:// (the service speaks plain HTTP)");
        return -1;
    }
    const char *auth = url + sizeof(scheme) - 1;
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
        snprintf(u->port, sizeof(u->port), "80");
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

static int send_all(int fd, const char *data, size_t len, long deadline)
{
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        } else if (wait_fd(fd, POLLOUT, deadline) != 1) {
            return -1;
        }
    }
    return 0;
}

/* Reads until the end of the status line. Returns the status code, -1 (why says why). */
static int read_status(int fd, long deadline, char *why, size_t why_size)
{
    char line[512];
    size_t have = 0;
    while (have < sizeof(line)) {
        int r = wait_fd(fd, POLLIN, deadline);
        if (r != 1) {
            say(why, why_size, r == 0 ? "no answer before the timeout" : "poll failed");
            return -1;
        }
        ssize_t n = recv(fd, line + have, sizeof(line) - have, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
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
    int fd = -1, err = 0;
    for (const struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = connect_one(ai, deadline);
        if (fd < 0)
            err = errno;
    }
    freeaddrinfo(res);
    if (fd < 0) {
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
    else if (send_all(fd, req, (size_t)len, deadline) != 0)
        snprintf(why, why_size, "cannot send the request: %s", strerror(errno));
    else
        code = read_status(fd, deadline, why, why_size);
    close(fd);
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
                "http://HOST[:PORT]/PATH [--timeout-ms=N]\n",
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
