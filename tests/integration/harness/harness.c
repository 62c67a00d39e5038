/* Integration-test harness (see harness.h): databases, the rowlock process, the HTTP client. */
#include "harness.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef ROWLOCK_BINARY
#error "ROWLOCK_BINARY must name the rowlock executable"
#endif

static const char *admin_url(void)
{
    const char *u = getenv("ROWLOCK_TEST_ADMIN_URL");
    if (u == NULL || u[0] == '\0') {
        fprintf(stderr, "ROWLOCK_TEST_ADMIN_URL is not set: run the suite with "
                        "deploy/local.sh test\n");
        exit(1);
    }
    return u;
}

PGconn *th_admin_pg(void)
{
    return th_pg(admin_url());
}

PGconn *th_pg(const char *url)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "cannot connect to %s: %s\n", url, PQerrorMessage(c));
        PQfinish(c);
        fail_msg("database connection failed");
    }
    return c;
}

PGresult *th_sql(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType t = PQresultStatus(r);
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK) {
        fprintf(stderr, "SQL failed: %s\n%s\n", sql, PQresultErrorMessage(r));
        PQclear(r);
        fail_msg("SQL failed");
    }
    return r;
}

void th_wait_lock_waiter(PGconn *observer, const char *what)
{
    for (int i = 0; i < 5000; i++) {
        PGresult *r = th_sql(observer, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                       "current_database() AND wait_event_type = 'Lock'");
        int waiting = atoi(PQgetvalue(r, 0, 0));
        PQclear(r);
        if (waiting > 0)
            return;
        usleep(2000);
    }
    fail_msg("no request came to wait on %s", what);
}

int th_db_create(const char *name, char *url, size_t urlsize)
{
    char sql[256];
    PGconn *c = th_admin_pg();
    PQclear(th_sql(c, "SET client_min_messages = warning"));
    snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS " TH_DB_PREFIX "%s WITH (FORCE)", name);
    PQclear(th_sql(c, sql));
    snprintf(sql, sizeof(sql), "CREATE DATABASE " TH_DB_PREFIX "%s", name);
    PQclear(th_sql(c, sql));
    /* same server and user as the admin URL, other database */
    PQconninfoOption *opts = PQconninfo(c);
    char *p = url;
    size_t left = urlsize;
    int n = snprintf(p, left, "dbname=" TH_DB_PREFIX "%s", name);
    for (PQconninfoOption *o = opts; o && o->keyword && n > 0 && (size_t)n < left; o++) {
        if (o->val == NULL || o->val[0] == '\0' || strcmp(o->keyword, "dbname") == 0)
            continue;
        if (strcmp(o->keyword, "host") != 0 && strcmp(o->keyword, "port") != 0 &&
            strcmp(o->keyword, "user") != 0 && strcmp(o->keyword, "password") != 0)
            continue;
        p += n;
        left -= (size_t)n;
        n = snprintf(p, left, " %s='%s'", o->keyword, o->val);
    }
    PQconninfoFree(opts);
    PQfinish(c);
    return (n > 0 && (size_t)n < left) ? 0 : -1;
}

/* ---- the rowlock process ---- */

/* Appends line (n bytes) to the window buf of size cap; when it does not fit, the older half of
 * the window is dropped first (from a line start), so the newest lines are always there. */
static void log_keep(char *buf, size_t cap, const char *line, size_t n)
{
    size_t have = strlen(buf);
    if (n >= cap / 2) { /* a line longer than half the window: its end alone */
        line += n - (cap / 2 - 1);
        n = cap / 2 - 1;
        have = 0;
    } else if (have + n >= cap) {
        const char *cut = strchr(buf + have / 2, '\n');
        size_t from = cut ? (size_t)(cut + 1 - buf) : have;
        memmove(buf, buf + from, have - from + 1);
        have -= from;
    }
    memcpy(buf + have, line, n);
    buf[have + n] = '\0';
}

static void *log_reader(void *arg)
{
    struct th_proc *s = arg;
    FILE *f = fdopen(s->log_fd, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        fputs(line, stderr);
        pthread_mutex_lock(&s->mu);
        log_keep(s->log_tail, sizeof(s->log_tail), line, (size_t)n);
        if (strstr(line, "\"msg\":\"request\"") == NULL)
            log_keep(s->log_notes, sizeof(s->log_notes), line, (size_t)n);
        if (!s->ready && strstr(line, "\"msg\":\"listening\"") != NULL) {
            /* a JSON number; releases before 2026-12 wrote it as a string */
            const char *p = strstr(line, "\"port\":");
            s->port = p ? atoi(p + 7 + (p[7] == '"')) : 0;
            s->ready = 1;
        }
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    free(line);
    fclose(f);
    pthread_mutex_lock(&s->mu);
    s->exited = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Every process this program started (struct th_proc), newest first. */
static pthread_mutex_t procs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct th_proc *procs;
static pid_t procs_owner; /* a forked child that calls exit() leaves its parent's processes be */

/* At exit: kills what a failed test left running, reaps it, joins its reader, frees them all. */
static void procs_end(void)
{
    if (getpid() != procs_owner)
        return;
    pthread_mutex_lock(&procs_mu);
    struct th_proc *p = procs;
    procs = NULL;
    pthread_mutex_unlock(&procs_mu);
    while (p != NULL) {
        struct th_proc *next = p->next;
        if (!p->joined) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
            pthread_join(p->reader, NULL);
        }
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        p = next;
    }
}

/* Builds the child's environment: ours, with the harness defaults and then env overriding. */
static char **service_env(const char *dburl, const char *const *env)
{
    extern char **environ;
    size_t n = 0, extra = 0;
    while (environ[n])
        n++;
    while (env && env[extra])
        extra++;
    char **out = calloc(n + extra + 6, sizeof(char *));
    size_t k = 0;
    static char url[4096];
    snprintf(url, sizeof(url), "ROWLOCK_DATABASE_URL=%s", dburl);
    const char *defaults[] = {url, "ROWLOCK_PORT=0", "ROWLOCK_LISTEN_ADDRESS=127.0.0.1",
                              "ROWLOCK_DB_STARTUP_WAIT_S=20"};
    for (size_t i = 0; env && env[i]; i++)
        out[k++] = (char *)env[i];
    for (size_t i = 0; i < 4; i++) { /* getenv finds the first: a test's own value goes first */
        size_t klen = strcspn(defaults[i], "=") + 1;
        int shadowed = 0;
        for (size_t j = 0; env && env[j] && !shadowed; j++)
            shadowed = strncmp(env[j], defaults[i], klen) == 0;
        if (!shadowed)
            out[k++] = (char *)defaults[i];
    }
    for (size_t i = 0; i < n; i++) {
        size_t klen = strcspn(environ[i], "=");
        int shadowed = 0;
        for (size_t j = 0; j < k && !shadowed; j++)
            shadowed = strncmp(out[j], environ[i], klen + 1) == 0;
        if (!shadowed)
            out[k++] = environ[i];
    }
    out[k] = NULL;
    return out;
}

int th_service_start(struct th_service *s, const char *dburl, const char *const *env)
{
    return th_service_start_binary(s, ROWLOCK_BINARY, dburl, env);
}

int th_service_start_binary(struct th_service *s, const char *binary, const char *dburl,
                            const char *const *env)
{
    if (th_service_spawn_binary(s, binary, dburl, env) != 0)
        return -1;
    return th_service_await(s);
}

int th_service_spawn(struct th_service *s, const char *dburl, const char *const *env)
{
    return th_service_spawn_binary(s, ROWLOCK_BINARY, dburl, env);
}

/* Adds p to the list, arranging the exit-time cleanup on the first call. */
static void procs_add(struct th_proc *p)
{
    pthread_mutex_lock(&procs_mu);
    if (procs_owner == 0) {
        procs_owner = getpid();
        atexit(procs_end);
    }
    p->next = procs;
    procs = p;
    pthread_mutex_unlock(&procs_mu);
}

int th_service_spawn_binary(struct th_service *s, const char *binary, const char *dburl,
                            const char *const *env)
{
    memset(s, 0, sizeof(*s));
    struct th_proc *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->joined = 1; /* nothing to reap or join until both the process and its reader exist */
    s->proc = p;   /* an empty log for th_service_logged even when the spawn fails */
    procs_add(p);
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    char **envp = service_env(dburl, env);
    char *const argv[] = {(char *)binary, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execve(binary, argv, envp);
        _exit(127);
    }
    free(envp);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -1;
    }
    s->pid = p->pid = pid;
    p->log_fd = fds[0];
    p->joined = 0;
    pthread_create(&p->reader, NULL, log_reader, p);
    return 0;
}

int th_service_await(struct th_service *s)
{
    struct th_proc *p = s->proc;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&p->mu);
    while (!p->ready && !p->exited &&
           pthread_cond_timedwait(&p->cv, &p->mu, &deadline) != ETIMEDOUT)
        ;
    int ok = p->ready && p->port > 0;
    s->port = p->port;
    pthread_mutex_unlock(&p->mu);
    if (!ok) {
        kill(s->pid, SIGKILL);
        th_service_wait(s, 10);
        return -1;
    }
    return 0;
}

void th_service_signal(struct th_service *s, int sig)
{
    kill(s->pid, sig);
}

int th_service_wait(struct th_service *s, int timeout_s)
{
    int status = 0;
    for (int i = 0; i < timeout_s * 100; i++) {
        pid_t r = waitpid(s->pid, &status, WNOHANG);
        if (r == s->pid) {
            pthread_join(s->proc->reader, NULL);
            s->proc->joined = 1;
            s->pid = 0;
            s->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            return s->exit_code;
        }
        usleep(10000);
    }
    return -2;
}

int th_service_stop(struct th_service *s)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    int rc = th_service_wait(s, 60);
    if (rc == -2) {
        kill(s->pid, SIGKILL);
        th_service_wait(s, 10);
    }
    return rc;
}

int th_service_logged(struct th_service *s, const char *needle)
{
    struct th_proc *p = s->proc;
    pthread_mutex_lock(&p->mu);
    int found = strstr(p->log_tail, needle) != NULL || strstr(p->log_notes, needle) != NULL;
    pthread_mutex_unlock(&p->mu);
    return found;
}

/* ---- HTTP ---- */

size_t th_buf_write(char *data, size_t size, size_t n, void *arg)
{
    struct th_buf *g = arg;
    size_t add = size * n;
    char *p = realloc(g->data, g->len + add + 1);
    if (p == NULL)
        return 0;
    memcpy(p + g->len, data, add);
    g->len += add;
    p[g->len] = '\0';
    g->data = p;
    return add;
}

int th_http(int port, const char *method, const char *path, const char *const *headers,
            const char *body, size_t len, struct th_response *r)
{
    memset(r, 0, sizeof(*r));
    CURL *curl = curl_easy_init();
    struct curl_slist *hl = NULL;
    struct th_buf b = {0}, h = {0};
    char url[16384];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, th_buf_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, th_buf_write);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (body != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    hl = curl_slist_append(hl, "Expect:");
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hl);
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(curl, CURLINFO_TOTAL_TIME, &r->seconds);
    curl_slist_free_all(hl);
    curl_easy_cleanup(curl);
    r->body = b.data ? b.data : strdup("");
    r->len = b.len;
    r->headers = h.data ? h.data : strdup("");
    if (rc != CURLE_OK) {
        fprintf(stderr, "HTTP %s %s failed: %s\n", method, path, curl_easy_strerror(rc));
        return -1;
    }
    r->json = json_loadb(r->body, r->len, JSON_DECODE_ANY, NULL);
    return 0;
}

int th_header(const struct th_response *r, const char *name, char *out, size_t outsize)
{
    size_t nlen = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *end = strstr(line, "\r\n");
        size_t llen = end ? (size_t)(end - line) : strlen(line);
        if (llen > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            while (*v == ' ')
                v++;
            snprintf(out, outsize, "%.*s", (int)(llen - (size_t)(v - line)), v);
            return 0;
        }
        line = end ? end + 2 : line + llen;
    }
    return -1;
}

const char *th_problem_code(const struct th_response *r)
{
    const char *code = json_string_value(json_object_get(r->json, "code"));
    return code ? code : "";
}

void th_response_free(struct th_response *r)
{
    free(r->body);
    free(r->headers);
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

void th_assert_problem(const struct th_response *r, long status, const char *code)
{
    char ct[128] = "";
    th_header(r, "Content-Type", ct, sizeof(ct));
    if (r->status != status || strcmp(th_problem_code(r), code) != 0 ||
        strcmp(ct, "application/problem+json") != 0)
        fprintf(stderr, "expected %ld %s, got %ld %s (%s): %s\n", status, code, r->status,
                th_problem_code(r), ct, r->body);
    assert_int_equal(r->status, status);
    assert_string_equal(ct, "application/problem+json");
    assert_string_equal(th_problem_code(r), code);
    assert_int_equal(json_integer_value(json_object_get(r->json, "status")), status);
    assert_non_null(json_string_value(json_object_get(r->json, "detail")));
    assert_non_null(json_string_value(json_object_get(r->json, "title")));
}

json_t *th_call(int port, const char *method, const char *path, const char *body, long want)
{
    static const char *const json_ct[] = {"Content-Type: application/json", NULL};
    struct th_response r;
    assert_int_equal(
        th_http(port, method, path, body ? json_ct : NULL, body, body ? strlen(body) : 0, &r), 0);
    if (r.status != want)
        fprintf(stderr, "%s %s %s: expected %ld, got %ld %s\n", method, path, body ? body : "",
                want, r.status, r.body);
    assert_int_equal(r.status, want);
    json_t *j = json_incref(r.json);
    th_response_free(&r);
    return j;
}

/* ---- raw HTTP over TCP ---- */

int th_tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

size_t th_raw_read(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t got = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (got + 1 < size && poll(&p, 1, timeout_ms) == 1) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        const char *end = strstr(buf, "\r\n\r\n");
        const char *cl = strcasestr(buf, "Content-Length: ");
        if (end != NULL && cl != NULL && (size_t)(buf + got - (end + 4)) >= (size_t)atol(cl + 16))
            break;
    }
    buf[got] = '\0';
    return got;
}

size_t th_raw_exchange(int port, const void *req, size_t len, char *buf, size_t size,
                       int timeout_ms)
{
    int fd = th_tcp_connect(port);
    assert_int_equal(write(fd, req, len), (ssize_t)len);
    size_t got = th_raw_read(fd, buf, size, timeout_ms);
    close(fd);
    return got;
}

/* ---- odds and ends ---- */

double th_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int th_raise_fd_limit(unsigned long want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (rl.rlim_cur >= want)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        fprintf(stderr, "the hard limit on open files (%lu) is below %lu\n",
                (unsigned long)rl.rlim_max, want);
        return -1;
    }
    rl.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &rl);
}

double th_metric(int port, const char *series)
{
    struct th_response r;
    double v = -1;
    char key[256];
    snprintf(key, sizeof(key), "\n%s ", series);
    if (th_http(port, "GET", "/metrics", NULL, NULL, 0, &r) == 0 && r.status == 200) {
        const char *p = strstr(r.body, key);
        if (p != NULL)
            v = atof(p + strlen(key));
    }
    th_response_free(&r);
    return v;
}

json_t *th_sql_rows(PGconn *c, const char *sql)
{
    PGresult *r = th_sql(c, sql);
    json_t *rows = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *row = json_array();
        for (int k = 0; k < PQnfields(r); k++)
            json_array_append_new(row, PQgetisnull(r, i, k) ? json_null()
                                                            : json_string(PQgetvalue(r, i, k)));
        json_array_append_new(rows, row);
    }
    PQclear(r);
    return rows;
}

int th_http_json(int port, const char *method, const char *path, const json_t *body,
                 struct th_response *r)
{
    static const char *const json_ct[] = {"Content-Type: application/json", NULL};
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    int rc = th_http(port, method, path, text ? json_ct : NULL, text, text ? strlen(text) : 0, r);
    free(text);
    return rc;
}

json_t *th_get_json(int port, const char *path)
{
    struct th_response r;
    assert_int_equal(th_http(port, "GET", path, NULL, NULL, 0, &r), 0);
    if (r.status != 200)
        fail_msg("GET %s: %ld %s", path, r.status, r.body);
    json_t *j = json_incref(r.json);
    th_response_free(&r);
    return j;
}

void th_crowd_start(struct th_crowd *c, int n, const char *url,
                    void (*post_body)(int i, char *buf, size_t size))
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    c->w = calloc((size_t)n, sizeof(*c->w));
    CURLM *multi = curl_multi_init();
    c->multi = multi;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    c->headers = headers;
    curl_multi_setopt(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 0L);
    curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)n);
    for (int i = 0; i < n; i++) {
        struct th_crowd_waiter *w = &c->w[i];
        CURL *easy = curl_easy_init();
        w->easy = easy;
        curl_easy_setopt(easy, CURLOPT_URL, url);
        if (post_body != NULL) {
            char body[256];
            post_body(i, body, sizeof(body));
            curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
            curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body);
        }
        curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, th_buf_write);
        curl_easy_setopt(easy, CURLOPT_WRITEDATA, &w->body);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, (char *)w);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L);
        curl_multi_add_handle(multi, easy);
    }
}

void *th_crowd_run(void *crowd)
{
    struct th_crowd *c = crowd;
    int running = 1;
    double give_up = th_now() + 60;
    while (running > 0 && th_now() < give_up) {
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(c->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            struct th_crowd_waiter *w = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&w);
            w->done_at = th_now();
            w->result = m->data.result;
            curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &w->status);
            c->failed += m->data.result != CURLE_OK;
            c->done++;
        }
        if (running > 0)
            curl_multi_poll(c->multi, NULL, 0, 100, NULL);
    }
    return NULL;
}

void th_crowd_free(struct th_crowd *c)
{
    for (int i = 0; i < c->n; i++) {
        curl_multi_remove_handle(c->multi, c->w[i].easy);
        curl_easy_cleanup(c->w[i].easy);
        free(c->w[i].body.data);
    }
    curl_multi_cleanup(c->multi);
    curl_slist_free_all(c->headers);
    free(c->w);
}

/* Runs ctl (the $ROWLOCK_TEST_PGCTL executable) with action, its output to stderr or nowhere;
 * system()'s result. */
static int pgctl_run(const char *ctl, const char *action, int quiet)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' %s %s", ctl, action, quiet ? ">/dev/null 2>&1" : ">&2");
    return system(cmd);
}

void th_pgctl(const char *action, int quiet)
{
    const char *ctl = getenv("ROWLOCK_TEST_PGCTL");
    if (ctl == NULL || ctl[0] == '\0')
        fail_msg("ROWLOCK_TEST_PGCTL is not set: run the suite with deploy/local.sh test");
    assert_int_equal(pgctl_run(ctl, action, quiet), 0);
}

int th_pgctl_leave_running(void)
{
    const char *ctl = getenv("ROWLOCK_TEST_PGCTL");
    return pgctl_run(ctl ? ctl : "false", "start", 0) == 0 ? 0 : -1;
}

int th_run(const char *cmd, char *out, size_t outsize)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = fread(out, 1, outsize - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
