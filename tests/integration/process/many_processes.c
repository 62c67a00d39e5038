/* test_many_processes' ways in (see many_processes.h): haproxy on the shipped configuration,
 * and the resending client. Nothing here knows the workloads. */
#include "many_processes.h"

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int mp_ports[MP_TARGETS];
atomic_long mp_resent, mp_unexpected;

static const char *find_haproxy(void)
{
    static char path[512];
    const char *p = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/usr/local/sbin", p ? p : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof(path), "%s/haproxy", d);
        if (access(path, X_OK) == 0)
            return path;
    }
    return NULL;
}

int mp_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int mp_haproxy_start(pid_t *pid)
{
    const char *exe = find_haproxy();
    if (exe == NULL) {
        fprintf(stderr, "haproxy is not installed (deploy/local.sh test installs it)\n");
        return -1;
    }
    char env[MP_TARGETS][64];
    mp_ports[0] = mp_free_port();
    snprintf(env[0], sizeof(env[0]), "ROWLOCK_LB_BIND=127.0.0.1:%d", mp_ports[0]);
    for (int i = 1; i < MP_TARGETS; i++)
        snprintf(env[i], sizeof(env[i]), "ROWLOCK_SERVER_%d=127.0.0.1:%d", i, mp_ports[i]);
    *pid = fork();
    if (*pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* not left behind by a test killed on its timeout */
        FILE *log = freopen("many_processes_haproxy.log", "w", stdout);
        (void)log;
        for (int i = 0; i < MP_TARGETS; i++)
            putenv(env[i]);
        execl(exe, exe, "-db", "-f", ROWLOCK_SOURCE_DIR "/deploy/haproxy/rowlock.cfg", NULL);
        _exit(127);
    }
    /* up once a request goes through to a ready process */
    for (double give_up = th_now() + 20; th_now() < give_up; usleep(100000)) {
        struct th_response r;
        int ok = th_http(mp_ports[0], "GET", "/readyz", NULL, NULL, 0, &r) == 0 && r.status == 200;
        th_response_free(&r);
        if (ok)
            return *pid;
    }
    fprintf(stderr, "haproxy did not pass requests on within 20 s\n");
    return -1;
}

void mp_haproxy_stop(pid_t *pid)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    int status;
    for (int i = 0; i < 500 && waitpid(*pid, &status, WNOHANG) == 0; i++)
        usleep(10000);
    if (kill(*pid, 0) == 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, &status, 0);
    }
    *pid = 0;
}

/* ---- a client that resends what may not have arrived ---- */

void mp_client_init(struct mp_client *c, int target)
{
    memset(c, 0, sizeof(*c));
    c->target = target;
    c->curl = curl_easy_init();
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, th_buf_write);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->buf);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 40L);
    curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
}

void mp_client_free(struct mp_client *c)
{
    curl_easy_cleanup(c->curl);
    free(c->buf.data);
}

static long client_try(struct mp_client *c, const char *method, const char *url, const char *text,
                       struct curl_slist *hl)
{
    c->buf.len = 0;
    curl_easy_setopt(c->curl, CURLOPT_URL, url);
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, text == NULL ? 1L : 0L);
    curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    if (text != NULL) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, text);
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
    }
    curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hl);
    long status = -1;
    if (curl_easy_perform(c->curl) == CURLE_OK)
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* Sends body (stolen, may be NULL) as ct (NULL: JSON) and resends the same bytes after a
 * transport error, 502, 503 or 504 for up to MP_RETRY_S. Returns the last status (-1: no answer),
 * *out the answer's JSON (the caller's, may be NULL), *resent 1 when a try before it failed (an
 * earlier try may have been applied). */
long mp_call(struct mp_client *c, const char *method, const char *path, json_t *body,
             const char *ct, json_t **out, int *resent)
{
    char url[512], hdr[96];
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", mp_ports[c->target], path);
    snprintf(hdr, sizeof(hdr), "Content-Type: %s", ct ? ct : "application/json");
    struct curl_slist *hl = curl_slist_append(curl_slist_append(NULL, hdr), "Expect:");
    long st = -1;
    *resent = 0;
    for (double give_up = th_now() + MP_RETRY_S;; usleep(100000)) {
        st = client_try(c, method, url, text, hl);
        if ((st != -1 && st != 502 && st != 503 && st != 504) || th_now() > give_up)
            break;
        if (!*resent)
            atomic_fetch_add(&mp_resent, 1);
        *resent = 1;
    }
    curl_slist_free_all(hl);
    free(text);
    *out = st > 0 && c->buf.data ? json_loadb(c->buf.data, c->buf.len, 0, NULL) : NULL;
    return st;
}

void mp_unexpected_answer(const char *what, long st, json_t *j)
{
    if (atomic_fetch_add(&mp_unexpected, 1) < 20) {
        char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
        fprintf(stderr, "unexpected answer to %s: %ld %s\n", what, st, t ? t : "");
        free(t);
    }
}

/* A call that must end in a 2xx; anything else counts as unexpected. */
json_t *mp_call_ok(struct mp_client *c, const char *method, const char *path, json_t *body,
                   const char *ct)
{
    json_t *j = NULL;
    int resent;
    long st = mp_call(c, method, path, body, ct, &j, &resent);
    if (st < 200 || st > 299) {
        mp_unexpected_answer(path, st, j);
        json_decref(j);
        return NULL;
    }
    return j;
}
