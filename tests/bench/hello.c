/* bench_hello <port> <threads>: the baseline for tests/bench/http.sh. A libmicrohttpd server with
 * rowlock's daemon flags and options (service/http.c, svc_server_start) that answers every GET with
 * 200 {"status":"ok"} from one shared response over a persistent buffer; no routing, no logging.
 * Listens on 127.0.0.1; exits on SIGTERM or SIGINT. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rowlock's defaults (service/config.c) for what svc_server_start passes to MHD. */
#define CONNECTION_TIMEOUT_S    30u
#define CONNECTION_LIMIT        4096u
#define PER_IP_CONNECTION_LIMIT 2048u
#define URL_LIMIT               8192u
#define HEADER_LIMIT            16384u

static const char hello_body[] = "{\"status\":\"ok\"}";

struct hello {
    struct MHD_Response *ok;
    struct MHD_Response *not_allowed;
};

/* Marks the first call of a request, as rowlock answers only once the request is complete. */
static int first_call_marker;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct hello *h = cls;
    if (*con_cls == NULL) {
        *con_cls = &first_call_marker;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return MHD_queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, h->not_allowed);
    return MHD_queue_response(conn, MHD_HTTP_OK, h->ok);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    fputs("bench_hello: ", stderr);
    vfprintf(stderr, fmt, ap);
}

static long parse_arg(const char *s, long min, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return -1;
    return v;
}

int main(int argc, char **argv)
{
    long port = argc == 3 ? parse_arg(argv[1], 0, 65535) : -1;
    long threads = argc == 3 ? parse_arg(argv[2], 1, 256) : -1;
    if (port < 0 || threads < 0) {
        fprintf(stderr, "usage: bench_hello <port> <threads>\n");
        return 2;
    }

    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct hello h;
    h.ok = MHD_create_response_from_buffer(sizeof(hello_body) - 1, (void *)hello_body,
                                           MHD_RESPMEM_PERSISTENT);
    h.not_allowed = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (h.ok == NULL || h.not_allowed == NULL ||
        MHD_add_response_header(h.ok, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json") !=
            MHD_YES ||
        MHD_add_response_header(h.not_allowed, MHD_HTTP_HEADER_ALLOW, "GET") != MHD_YES) {
        fprintf(stderr, "bench_hello: cannot create the responses\n");
        return 1;
    }

    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t memory = (size_t)(URL_LIMIT + HEADER_LIMIT) * 2 + 32768;
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                     MHD_USE_TURBO;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &h, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)threads, MHD_OPTION_CONNECTION_TIMEOUT, CONNECTION_TIMEOUT_S,
        MHD_OPTION_CONNECTION_LIMIT, CONNECTION_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        PER_IP_CONNECTION_LIMIT, MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u,
        MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "bench_hello: cannot start the HTTP server on 127.0.0.1:%ld\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "bench_hello: listening on 127.0.0.1:%u with %ld threads\n",
            info ? info->port : 0u, threads);

    int sig;
    while (sigwait(&signals, &sig) != 0)
        ;
    MHD_stop_daemon(d);
    MHD_destroy_response(h.ok);
    MHD_destroy_response(h.not_allowed);
    return 0;
}
