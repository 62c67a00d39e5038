/* Fuzz target: the whole request path. Each input is the bytes one client sends on one TCP
 * connection to a real libmicrohttpd daemon running rowlock's HTTP layer (service/http.c with
 * main's route table, bearer tokens, limits, the strict header checks, the early 413/414
 * answers) in this process, started once for the session. The client sends the input, closes
 * its sending side (a half-close) and reads until the server ends the connection.
 *
 * There is no database: the pool points at a Unix socket that does not exist, so a handler that
 * needs one answers 503 database_unavailable at once (as when PostgreSQL is down), and what is
 * fuzzed is everything before and around it: parsing, routing (404/405), authentication
 * (401/403, a tokens file of FUZZ_TOKENS), body and JSON checks, problem+json.
 *
 * What must hold, besides no crash, leak or sanitizer report:
 *   - within FUZZ_DEADLINE_S of the half-close the connection has ended, or fallen quiet with no
 *     request in flight (no request is left hanging);
 *   - whatever came back is a sequence of whole HTTP/1.1 answers: "HTTP/1.1 DDD reason", header
 *     lines with a colon, exactly one Content-Length (none only for a 1xx) and that many bytes of
 *     body (none after a HEAD request), nothing after an answer that says Connection: close;
 *   - an answer of 400 or above is rowlock's problem+json (Content-Type application/problem+json;
 *     a JSON object whose status is the status line's, whose code is in the problem table with
 *     that status and title, whose type names the code and whose request_id is the X-Request-Id
 *     header), or one of libmicrohttpd's own fixed HTML pages for the requests it answers by
 *     itself (docs/architecture.md); never its "Internal server error" page, which means a
 *     handler returned without queueing an answer;
 *   - an application/json answer parses as JSON.
 * FUZZ_REQUEST_VERBOSE=1 in the environment prints each exchange (for a saved input). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "db/pool.h"
#include "service/app.h"
#include "service/auth.h"
#include "service/config.h"
#include "service/family.h"
#include "service/http.h"
#include "service/http_internal.h" /* the daemon, to see its connections released */
#include "service/log.h"
#include "service/metrics.h"
#include "service/problem.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The connection must have ended this long after the half-close: the request deadline
 * (--request-timeout-s below) cuts anything slower, with room to spare on a loaded machine and
 * within libFuzzer's -timeout of 10 s (deploy/local.sh). */
#define FUZZ_DEADLINE_S 8
/* After the half-close, a connection that has been quiet this long with no request in flight
 * is done with. libmicrohttpd 0.9.75 sometimes does not notice a client's half-close (or close)
 * that comes while it answers a request without a body, and keeps the connection until its
 * timeout (--connection-timeout-s): about one such GET in twenty here. */
#define FUZZ_QUIET_MS 30
/* Past this many bytes of answers (a pipeline of /openapi.json), the rest is not read. */
#define FUZZ_ANSWERS_MAX ((size_t)64 << 20)
/* JSON bodies larger than this are not parsed (the OpenAPI document, each time it is asked). */
#define FUZZ_JSON_PARSE_MAX ((size_t)64 << 10)

/* The tokens the seeds use: one per scope, and one limited to a request a second. */
#define FUZZ_TOKENS                                                                                \
    "fuzz-admin-token-0000 admin name=admin\n"                                                     \
    "fuzz-read-token-00000 read name=reader\n"                                                     \
    "fuzz-write-token-0000 write name=writer\n"                                                    \
    "fuzz-work-token-00000 work,read name=worker\n"                                                \
    "fuzz-slow-token-00000 admin name=slow rate=1 burst=2\n"

static struct svc_config cfg;
static struct svc_app app;
static struct svc_server *server;
static struct sockaddr_in addr;
static int verbose;

/* libmicrohttpd's own answers (src/microhttpd/connection.c of 0.9.75), which it writes for the
 * requests it refuses before or between rowlock's callbacks. */
static const char *const mhd_pages[] = {
    "<html><head><title>Request too big</title></head><body>Your HTTP header was too big for the "
    "memory constraints of this webserver.</body></html>",
    "<html><head><title>Request malformed</title></head><body>Your HTTP request was "
    "syntactically incorrect.</body></html>",
    "<html><head><title>Requested HTTP version is not supported</title></head><body>Requested "
    "HTTP version is too old and not supported.</body></html>",
    "<html><head><title>Requested HTTP version is not supported</title></head><body>Requested "
    "HTTP version is not supported.</body></html>",
    "<html><head><title>&quot;Host:&quot; header required</title></head><body>In HTTP 1.1, "
    "requests must include a &quot;Host:&quot; header, and your HTTP 1.1 request lacked such a "
    "header.</body></html>",
    "<html><head><title>Request content too large</title></head><body>Your HTTP request has too "
    "large value for <b>Content-Length</b> header.</body></html>",
    "<html><head><title>Request malformed</title></head><body>Your HTTP request has wrong value "
    "for <b>Content-Length</b> header.</body></html>",
    "<html><head><title>Request malformed</title></head><body>Your HTTP chunked encoding was "
    "syntactically incorrect.</body></html>",
    "<html><head><title>Request content too large</title></head><body>The chunk size used in "
    "your HTTP chunked encoded request is too large.</body></html>",
};

static const char *no_env(const char *name)
{
    (void)name;
    return NULL;
}

/* The pool's lines go through svc_log, so that the level set below keeps them quiet. */
static void db_log(void *ctx, enum db_log_level level, const char *msg, const char *const *fields)
{
    (void)ctx;
    (void)fields;
    svc_log(level >= DB_LOG_ERROR ? SVC_LOG_ERROR : SVC_LOG_WARN, msg, NULL);
}

/* The tokens file, written to a temporary file, loaded and removed. */
static struct svc_auth *load_tokens(void)
{
    char path[] = "/tmp/rowlock-fuzz-tokens-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    ssize_t n = write(fd, FUZZ_TOKENS, sizeof(FUZZ_TOKENS) - 1);
    close(fd);
    struct svc_auth *a = n == (ssize_t)sizeof(FUZZ_TOKENS) - 1 ? svc_auth_load(path, stderr) : NULL;
    unlink(path);
    return a;
}

/* What main's serve() does before the server starts: the families' routes, problem codes,
 * metrics and init, here with a pool that reaches no database. Never torn down: the daemon
 * lives as long as the fuzzing session. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    verbose = getenv("FUZZ_REQUEST_VERBOSE") != NULL;
    signal(SIGPIPE, SIG_IGN);
    char *args[] = {"fuzz_request",
                    "--port=0",
                    "--listen-address=127.0.0.1",
                    "--threads=1",
                    "--workers=2",
                    "--pool-size=2",
                    "--pool-acquire-timeout-ms=200",
                    "--request-timeout-s=2",
                    "--connection-timeout-s=2",
                    "--notify=false",
                    "--body-limit=4096",
                    "--url-limit=2048",
                    "--header-limit=4096",
                    "--json-max-depth=8",
                    "--max-wait-s=1",
                    "--database-url=host=/nonexistent/rowlock-fuzz port=1 dbname=fuzz user=fuzz",
                    verbose ? "--log-level=info" : "--log-level=error",
                    NULL};
    int nargs = (int)(sizeof(args) / sizeof(args[0])) - 1;
    if (svc_config_load(&cfg, nargs, args, no_env, stdout, stderr) != SVC_CONFIG_OK)
        abort();
    svc_log_set_level((enum svc_log_level)cfg.log_level);
    struct db_pool_config pc = {.conninfo = cfg.database_url,
                                .size = (int)cfg.pool_size,
                                .acquire_timeout_ms = (int)cfg.pool_acquire_timeout_ms,
                                .statement_timeout_ms = (int)cfg.statement_timeout_ms,
                                .connect_timeout_s = (int)cfg.db_connect_timeout_s,
                                .deadline_ms = (int)cfg.db_deadline_ms,
                                .statement_cache = (int)cfg.db_statement_cache,
                                .log = db_log};
    app = (struct svc_app){.config = &cfg,
                           .pool = db_pool_create(&pc),
                           .auth = load_tokens(),
                           .started_at = time(NULL),
                           .families = svc_families,
                           .nfamilies = svc_families_count};
    char why[256];
    size_t nroutes = 0;
    struct svc_route *routes = svc_families_routes(svc_families, svc_families_count, &nroutes);
    svc_metrics_set_series_limit(cfg.metrics_max_resources);
    if (app.pool == NULL || app.auth == NULL || routes == NULL ||
        svc_families_check(svc_families, svc_families_count, why, sizeof(why)) != 0 ||
        svc_families_register_problems(svc_families, svc_families_count) != 0 ||
        svc_metrics_init(routes, nroutes) != 0)
        abort();
    for (size_t f = 0; f < svc_families_count; f++)
        if (svc_families[f]->init != NULL && svc_families[f]->init(&app) != 0)
            abort();
    server = svc_server_start(&cfg, routes, nroutes, app.auth, &app);
    if (server == NULL)
        abort();
    app.server = server;
    addr.sin_family = AF_INET;
    addr.sin_port = htons(svc_server_port(server));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits until libmicrohttpd has freed the connection, which it does just after it has closed
 * it: the input's allocations are then all freed again, so that libFuzzer looks for a leak
 * (running the input twice more and LeakSanitizer) only where there may be one. */
static void released(void)
{
    double give_up = now_s() + FUZZ_DEADLINE_S;
    for (;;) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(server->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (info == NULL || info->num_connections == 0)
            return;
        FUZZ_ASSERT(now_s() < give_up); /* a connection the server never lets go */
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

/* Sends data on a new connection, half-closes it and reads until the server ends it; the
 * answers in *out (malloc'd, NUL-terminated), their length returned. Fails the input when the
 * connection has not ended FUZZ_DEADLINE_S after the half-close. */
static size_t exchange(const uint8_t *data, size_t size, char **out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    FUZZ_ASSERT(fd >= 0);
    int rc = connect(fd, (const struct sockaddr *)&addr, sizeof(addr));
    FUZZ_ASSERT(rc == 0 || errno == EINPROGRESS);
    size_t cap = 65536, got = 0, sent = 0;
    char *buf = malloc(cap + 1);
    FUZZ_ASSERT(buf != NULL);
    int shut = 0, done = 0;
    double deadline = now_s() + FUZZ_DEADLINE_S;
    while (!done) {
        if (sent == size && !shut) {
            shutdown(fd, SHUT_WR);
            shut = 1;
            deadline = now_s() + FUZZ_DEADLINE_S;
        }
        double left = deadline - now_s();
        if (left <= 0) {
            fprintf(stderr,
                    "fuzz: the connection did not end %d s after the input (%zu of %zu "
                    "bytes sent, %zu bytes of answers)\n",
                    FUZZ_DEADLINE_S, sent, size, got);
            FUZZ_ASSERT(!"the connection ends soon after the client's half-close");
        }
        struct pollfd p = {.fd = fd, .events = POLLIN | (sent < size ? POLLOUT : 0)};
        int wait_ms = shut ? FUZZ_QUIET_MS : (int)(left * 1000) + 1;
        int ready = poll(&p, 1, wait_ms);
        if (ready == 0 && shut && svc_server_in_flight(server) == 0)
            break; /* quiet, nothing in flight: libmicrohttpd has not noticed the half-close */
        if (ready <= 0)
            continue;
        if (p.revents & POLLOUT) {
            ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                sent = size, shut = 1; /* the server has gone: read what it said */
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            if (got == cap) {
                if (cap >= FUZZ_ANSWERS_MAX)
                    break;
                cap *= 2;
                buf = realloc(buf, cap + 1);
                FUZZ_ASSERT(buf != NULL);
            }
            ssize_t n = recv(fd, buf + got, cap - got, 0);
            if (n > 0)
                got += (size_t)n;
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                done = 1; /* ended, or reset (what was read before stays) */
        }
    }
    /* ended with a reset, which libmicrohttpd notices at once, where a close may wait */
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    close(fd);
    buf[got] = '\0';
    *out = buf;
    released();
    return got;
}

/* True when the input holds a HEAD request line (at its start or after a LF): an answer to it
 * has a Content-Length but no body. */
static int asks_head(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i + 5 <= size; i++)
        if ((i == 0 || data[i - 1] == '\n') && memcmp(data + i, "HEAD ", 5) == 0)
            return 1;
    return 0;
}

/* One answer's head, as read. */
struct answer {
    int status;
    const char *ctype, *request_id;
    size_t ctype_len, request_id_len;
    long long length; /* Content-Length, -1 when absent */
    int lengths, close;
};

/* The value of header line [line, end) when its name is name, else NULL. */
static const char *header_value(const char *line, const char *end, const char *name, size_t *len)
{
    size_t n = strlen(name);
    if ((size_t)(end - line) <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
        return NULL;
    const char *v = line + n + 1;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    *len = (size_t)(end - v);
    return v;
}

/* Reads the head at s (up to end) into *a; returns where the body starts. */
static const char *read_head(const char *s, const char *end, struct answer *a)
{
    FUZZ_ASSERT(end - s >= 15 && memcmp(s, "HTTP/1.1 ", 9) == 0);
    FUZZ_ASSERT(isdigit((unsigned char)s[9]) && isdigit((unsigned char)s[10]) &&
                isdigit((unsigned char)s[11]) && s[12] == ' ');
    a->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    FUZZ_ASSERT(a->status >= 100);
    const char *line = memchr(s, '\n', (size_t)(end - s));
    FUZZ_ASSERT(line != NULL && line[-1] == '\r'); /* a whole status line */
    a->ctype = a->request_id = NULL;
    a->length = -1;
    a->lengths = a->close = 0;
    for (line++;;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        FUZZ_ASSERT(eol != NULL && eol > line && eol[-1] == '\r'); /* a whole header block */
        if (eol - 1 == line)
            return eol + 1; /* the empty line */
        const char *e = eol - 1, *v;
        size_t len;
        FUZZ_ASSERT(memchr(line, ':', (size_t)(e - line)) != NULL);
        if ((v = header_value(line, e, "Content-Length", &len)) != NULL) {
            char *stop;
            a->length = strtoll(v, &stop, 10);
            FUZZ_ASSERT(len > 0 && stop == v + len && a->length >= 0);
            a->lengths++;
        } else if ((v = header_value(line, e, "Content-Type", &len)) != NULL) {
            FUZZ_ASSERT(a->ctype == NULL);
            a->ctype = v, a->ctype_len = len;
        } else if ((v = header_value(line, e, "X-Request-Id", &len)) != NULL) {
            a->request_id = v, a->request_id_len = len;
        } else if ((v = header_value(line, e, "Connection", &len)) != NULL) {
            a->close = len == 5 && strncasecmp(v, "close", 5) == 0;
        }
        FUZZ_ASSERT(header_value(line, e, "Transfer-Encoding", &len) == NULL);
        line = eol + 1;
    }
}

static int is_mhd_page(const char *body, size_t len)
{
    for (size_t i = 0; i < sizeof(mhd_pages) / sizeof(mhd_pages[0]); i++)
        if (strlen(mhd_pages[i]) == len && memcmp(mhd_pages[i], body, len) == 0)
            return 1;
    return 0;
}

static int ctype_is(const struct answer *a, const char *type)
{
    return a->ctype != NULL && a->ctype_len == strlen(type) &&
           strncasecmp(a->ctype, type, a->ctype_len) == 0;
}

/* An answer of 400 or above: rowlock's problem document, or one of libmicrohttpd's pages. */
static void check_error(const struct answer *a, const char *body, size_t len)
{
    if (a->ctype == NULL && is_mhd_page(body, len))
        return;
    if (!ctype_is(a, "application/problem+json"))
        fprintf(stderr, "fuzz: a %d answer that is not problem+json: %.*s\n", a->status,
                (int)(len < 300 ? len : 300), body);
    FUZZ_ASSERT(ctype_is(a, "application/problem+json"));
    json_error_t err;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
    FUZZ_ASSERT(json_is_object(doc));
    FUZZ_ASSERT(json_integer_value(json_object_get(doc, "status")) == a->status);
    const char *code = json_string_value(json_object_get(doc, "code"));
    const char *title = json_string_value(json_object_get(doc, "title"));
    const char *type = json_string_value(json_object_get(doc, "type"));
    const char *rid = json_string_value(json_object_get(doc, "request_id"));
    FUZZ_ASSERT(code != NULL && title != NULL && type != NULL && rid != NULL);
    FUZZ_ASSERT(json_is_string(json_object_get(doc, "detail")));
    size_t plen = strlen(SVC_PROBLEM_TYPE_PREFIX);
    FUZZ_ASSERT(strncmp(type, SVC_PROBLEM_TYPE_PREFIX, plen) == 0 &&
                strcmp(type + plen, code) == 0);
    const struct svc_problem_info *row = NULL;
    for (size_t i = 0; i < svc_problem_count() && row == NULL; i++)
        if (strcmp(svc_problem_at(i)->code, code) == 0)
            row = svc_problem_at(i);
    FUZZ_ASSERT(row != NULL && row->status == a->status && strcmp(row->title, title) == 0);
    FUZZ_ASSERT(a->request_id != NULL && strlen(rid) == a->request_id_len &&
                memcmp(rid, a->request_id, a->request_id_len) == 0);
    json_decref(doc);
}

/* True when p is where an answer may end: the end of what came, or the next answer. */
static int at_answer(const char *p, const char *end)
{
    return p == end || (end - p >= 9 && memcmp(p, "HTTP/1.1 ", 9) == 0);
}

/* Checks the answers in buf[0..len) to the input. */
static void check_answers(const char *buf, size_t len, int head)
{
    const char *s = buf, *end = buf + len;
    while (s < end) {
        struct answer a;
        const char *body = read_head(s, end, &a);
        if (a.status < 200) {
            FUZZ_ASSERT(a.status == 100 && a.lengths == 0);
            s = body;
            continue;
        }
        FUZZ_ASSERT(a.lengths == 1);
        size_t blen = (size_t)a.length;
        /* after a HEAD request the body is left out: the next answer, or the end, follows */
        int whole = a.length <= end - body && at_answer(body + blen, end);
        /* libmicrohttpd's answer to a Content-Length it cannot read: its status line and headers
         * twice, then its page (docs/architecture.md), the page left out after a HEAD */
        size_t hlen = (size_t)(body - s);
        if (!whole && a.ctype == NULL && (a.status == 400 || a.status == 413) &&
            (size_t)(end - body) >= hlen && memcmp(body, s, hlen) == 0) {
            s = body;
            continue;
        }
        if (head && !whole && at_answer(body, end)) {
            /* its head only: a problem's still says so, or libmicrohttpd's says nothing */
            FUZZ_ASSERT(a.status < 400 || a.ctype == NULL ||
                        ctype_is(&a, "application/problem+json"));
            s = body;
            FUZZ_ASSERT(!a.close || s == end);
            continue;
        }
        FUZZ_ASSERT(blen <= (size_t)(end - body)); /* the whole body came */
        if (a.status >= 400)
            check_error(&a, body, blen);
        else if (ctype_is(&a, "application/json") && blen <= FUZZ_JSON_PARSE_MAX && blen > 0) {
            json_t *doc = json_loadb(body, blen, JSON_DECODE_ANY, NULL);
            FUZZ_ASSERT(doc != NULL);
            json_decref(doc);
        }
        s = body + blen;
        FUZZ_ASSERT(!a.close || s == end); /* nothing after the last answer */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *answers = NULL;
    size_t len = exchange(data, size, &answers);
    if (verbose)
        fprintf(stderr, "---- %zu bytes sent, %zu bytes back:\n%s\n----\n", size, len, answers);
    check_answers(answers, len, asks_head(data, size));
    free(answers);
    return 0;
}
