/* One running job of `rowlock-cli work`, on its own thread: spawns COMMAND in a process group of
 * its own with the payload on stdin, reads its stdout (the result), the tail of its stderr and
 * its progress lines, heartbeats at a third of the lease, kills the group when the lease is lost,
 * the job times out or the shutdown grace is over, and settles: complete (batched when short),
 * fail, or hand back. The claim loop is in work.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/work.h"

#define STDOUT_MAX   (1024u * 1024u) /* the service's default body limit */
#define STDERR_TAIL  2048u
#define PROGRESS_MAX 65536u

extern char **environ;

struct run {
    pid_t pid;
    int fd[4]; /* stdin (write end), stdout, stderr, progress (read ends); -1 when closed */
    char *in;
    size_t in_len, in_off;
    char *out;
    size_t out_len;
    int out_overflow;
    char err[STDERR_TAIL];
    size_t err_len; /* bytes in err (a sliding tail) */
    char prog[PROGRESS_MAX];
    size_t prog_len;
    json_t *progress; /* latest complete progress line not yet sent (owned) */
    int status, reaped;
    double reaped_at;
    double lease_until; /* the lease surely holds until this monotonic time */
    double next_hb;
    int lost, timed_out, aborted;
    int cancelled;    /* an operator cancelled the job: SIGTERM, then SIGKILL (lost: no settle) */
    double term_sent; /* timeout or cancel: SIGTERM sent at, SIGKILL 2 s later */
};

/* Pipes for the child; the parent's ends are non-blocking, every end close-on-exec and above
 * low (so no dup2 of the child's file actions can overwrite another). */
static int pipe_high(int p[2], int low)
{
    int raw[2];
    if (pipe2(raw, O_CLOEXEC) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        p[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, low);
        close(raw[i]);
    }
    if (p[0] < 0 || p[1] < 0)
        return -1;
    return 0;
}

/* environ without the ROWLOCK_JOB_* variables, plus the job's. Returns a new array (free each
 * of the first four strings and the array). */
static char **job_env(const struct cli_job *j)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 5, sizeof(char *));
    if (!env)
        return NULL;
    if (asprintf(&env[0], "ROWLOCK_JOB_ID=%lld", j->id) < 0 ||
        asprintf(&env[1], "ROWLOCK_JOB_ATTEMPT=%lld", j->attempt) < 0 ||
        asprintf(&env[2], "ROWLOCK_JOB_FENCE=%lld", j->fence) < 0 ||
        asprintf(&env[3], "ROWLOCK_QUEUE=%s", j->wc->queue) < 0) {
        free(env);
        return NULL;
    }
    size_t k = 4;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "ROWLOCK_JOB_", 12) != 0 &&
            strncmp(environ[i], "ROWLOCK_QUEUE=", 14) != 0)
            env[k++] = environ[i];
    return env;
}

static void job_env_free(char **env)
{
    if (!env)
        return;
    for (int i = 0; i < 4; i++)
        free(env[i]);
    free(env);
}

/* Spawns COMMAND for j into r. 0, or -1 with errno-style detail in why. */
static int job_spawn(const struct cli_job *j, struct run *r, char *why, size_t whysize)
{
    int p[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
    int low = j->wc->progress_fd >= 10 ? j->wc->progress_fd + 1 : 10;
    int npipes = j->wc->progress_fd >= 0 ? 4 : 3, result = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t def, none;
    char **env = job_env(j);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    for (int i = 0; i < npipes; i++)
        if (pipe_high(p[i], low) != 0)
            goto done;
    posix_spawn_file_actions_adddup2(&fa, p[0][0], 0);
    posix_spawn_file_actions_adddup2(&fa, p[1][1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[2][1], 2);
    if (npipes == 4)
        posix_spawn_file_actions_adddup2(&fa, p[3][1], j->wc->progress_fd);
    sigemptyset(&none);
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGINT);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETSIGMASK);
    int rc =
        env ? posix_spawnp(&r->pid, j->wc->command[0], &fa, &attr, j->wc->command, env) : ENOMEM;
    if (rc != 0) {
        snprintf(why, whysize, "cannot run %s: %s", j->wc->command[0], strerror(rc));
        goto done;
    }
    r->fd[0] = p[0][1];
    p[0][1] = -1;
    for (int i = 1; i < npipes; i++) {
        r->fd[i] = p[i][0];
        p[i][0] = -1;
    }
    for (int i = 0; i < npipes; i++)
        fcntl(r->fd[i], F_SETFL, fcntl(r->fd[i], F_GETFL) | O_NONBLOCK);
    result = 0;
done:
    if (result != 0 && !why[0])
        snprintf(why, whysize, "cannot make pipes: %s", strerror(errno));
    for (int i = 0; i < 4; i++)
        for (int e = 0; e < 2; e++)
            if (p[i][e] >= 0)
                close(p[i][e]);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    job_env_free(env);
    return result;
}

static void fd_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A JSON value from text: JSON when it parses, else the text as a string; NULL when the text is
 * not UTF-8. */
static json_t *json_or_string(const char *text, size_t len)
{
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        len--;
    if (len == 0)
        return json_null();
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    return v ? v : json_stringn(text, len);
}

/* Takes complete progress lines out of r->prog; the last one becomes r->progress. */
static void progress_lines(struct run *r)
{
    char *nl;
    while ((nl = memchr(r->prog, '\n', r->prog_len))) {
        size_t n = (size_t)(nl - r->prog);
        json_t *v = n ? json_or_string(r->prog, n) : NULL;
        if (v) {
            json_decref(r->progress);
            r->progress = v;
        }
        memmove(r->prog, nl + 1, r->prog_len - n - 1);
        r->prog_len -= n + 1;
    }
    if (r->prog_len == sizeof(r->prog)) /* a line longer than the buffer: dropped */
        r->prog_len = 0;
}

/* Reads what fd i has; closes it at EOF. */
static void run_read(struct run *r, int i)
{
    char buf[16384];
    ssize_t n = read(r->fd[i], buf, sizeof(buf));
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        fd_close(&r->fd[i]);
        return;
    }
    if (n < 0)
        return;
    if (i == 1) {
        if (r->out_len + (size_t)n > STDOUT_MAX) {
            r->out_overflow = 1;
            return;
        }
        char *o = realloc(r->out, r->out_len + (size_t)n + 1);
        if (!o) {
            r->out_overflow = 1;
            return;
        }
        r->out = o;
        memcpy(r->out + r->out_len, buf, (size_t)n);
        r->out_len += (size_t)n;
    } else if (i == 2) {
        size_t keep = (size_t)n >= STDERR_TAIL ? 0 : STDERR_TAIL - (size_t)n;
        if (r->err_len > keep) {
            memmove(r->err, r->err + r->err_len - keep, keep);
            r->err_len = keep;
        }
        size_t take = (size_t)n > STDERR_TAIL ? STDERR_TAIL : (size_t)n;
        memcpy(r->err + r->err_len, buf + n - take, take);
        r->err_len += take;
    } else {
        for (ssize_t k = 0; k < n; k++) {
            if (r->prog_len < sizeof(r->prog))
                r->prog[r->prog_len++] = buf[k];
            if (buf[k] == '\n' || r->prog_len == sizeof(r->prog))
                progress_lines(r);
        }
    }
}

/* Writes more of the payload to the child's stdin; closes it when all is written or refused. */
static void run_write(struct run *r)
{
    ssize_t n = write(r->fd[0], r->in + r->in_off, r->in_len - r->in_off);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n < 0) {
        fd_close(&r->fd[0]);
        return;
    }
    r->in_off += (size_t)n;
    if (r->in_off == r->in_len)
        fd_close(&r->fd[0]);
}

/* Waits up to timeout_ms for the child's pipes and services them. */
static void run_pump(struct run *r, int timeout_ms)
{
    struct pollfd pf[4];
    int map[4], n = 0;
    for (int i = 0; i < 4; i++) {
        if (r->fd[i] < 0)
            continue;
        pf[n].fd = r->fd[i];
        pf[n].events = i == 0 ? POLLOUT : POLLIN;
        pf[n].revents = 0;
        map[n++] = i;
    }
    if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
        return;
    for (int k = 0; k < n; k++) {
        if (!pf[k].revents)
            continue;
        if (map[k] == 0)
            run_write(r);
        else
            run_read(r, map[k]);
    }
}

static int pipes_open(const struct run *r)
{
    return r->fd[1] >= 0 || r->fd[2] >= 0 || r->fd[3] >= 0;
}

/* Heartbeats j's lease. Returns 0 (extended), 1 (refused: the lease is lost), 2 (refused: an
 * operator cancelled the job) or -1 (no answer; try again soon). */
static int job_heartbeat(const struct cli_job *j, struct run *r, struct cli_http *http)
{
    char path[512];
    struct cli_reply rep;
    /* an answer is awaited a third of the lease, and never past the lease's end: the command
     * must not outlive it while a heartbeat hangs */
    double to = (double)j->lease_s / 3.0, left = r->lease_until - cli_work_now();
    to = left < to ? left : to;
    to = to < 0.1 ? 0.1 : to;
    json_t *body = json_pack("{s:s, s:I, s:I}", "owner", j->wc->owner, "fence",
                             (json_int_t)j->fence, "lease_seconds", (json_int_t)j->lease_s);
    if (r->progress) {
        json_object_set_new(body, "progress", r->progress);
        r->progress = NULL;
    }
    snprintf(path, sizeof(path), "/queues/%s/leases/%lld", j->wc->queue_esc, j->id);
    double sent = cli_work_now();
    int rc = cli_http_call(http, "PATCH", path, body, CLI_HTTP_ONCE, to, &rep);
    int result = -1;
    if (rc == 0 && rep.status == 200) {
        r->lease_until = sent + (double)j->lease_s;
        result = 0;
    } else if (rc == 0 && rep.status == 409 && strcmp(rep.code, "job_cancelled") == 0) {
        cli_errorf("work: job %lld: cancelled by an operator; stopping its command (SIGTERM, "
                   "then SIGKILL after 2 s)",
                   j->id);
        result = 2;
    } else if (rc == 0 && (rep.status == 409 || rep.status == 404)) {
        cli_errorf("work: job %lld: heartbeat refused (%s: %s); killing its command", j->id,
                   rep.code, rep.detail);
        result = 1;
    }
    cli_reply_clear(&rep);
    json_decref(body);
    return result;
}

/* Kills the child's process group. */
static void run_kill(struct run *r, int sig)
{
    if (!r->reaped)
        kill(-r->pid, sig);
}

/* The checks of one turn of the watch loop: heartbeat, lease, timeout, shutdown. */
static void job_checks(const struct cli_job *j, struct run *r, struct cli_http *http,
                       double started)
{
    const struct cli_work_conf *wc = j->wc;
    double now = cli_work_now(), third = (double)j->lease_s / 3.0;
    if (!r->lost && !r->reaped && now >= r->next_hb) {
        int hb = job_heartbeat(j, r, http);
        now = cli_work_now();
        r->next_hb = hb == 0 ? now + third : now + (third / 2 < 0.5 ? third / 2 : 0.5);
        if (hb == 1)
            r->lost = 1;
        if (hb == 2) {
            r->lost = r->cancelled = 1;
            r->term_sent = now;
            run_kill(r, SIGTERM);
        }
    }
    if (!r->lost && now >= r->lease_until) {
        cli_errorf("work: job %lld: lease ran out without a heartbeat answer; killing its command",
                   j->id);
        r->lost = 1;
    }
    if (r->lost && (!r->cancelled || now - r->term_sent >= 2.0))
        run_kill(r, SIGKILL);
    if (wc->timeout_s > 0 && !r->timed_out && now - started >= (double)wc->timeout_s) {
        r->timed_out = 1;
        r->term_sent = now;
        run_kill(r, SIGTERM);
    }
    if (r->timed_out && now - r->term_sent >= 2.0)
        run_kill(r, SIGKILL);
    long long stop = cli_work_stop_at_ms();
    if (stop && !r->aborted &&
        (cli_work_kill_now || now * 1000.0 >= (double)stop + (double)wc->grace_s * 1000.0)) {
        r->aborted = 1;
        run_kill(r, SIGKILL);
    }
}

/* Runs the child to its end: pipes, heartbeats, kills. */
static void job_watch(const struct cli_job *j, struct run *r, struct cli_http *http)
{
    double started = cli_work_now();
    r->lease_until = j->lease_from + (double)j->lease_s;
    r->next_hb = started + (double)j->lease_s / 3.0;
    int nap = 1; /* with every pipe closed: waits for the exit, 1 ms doubling up to 50 */
    for (;;) {
        double now = cli_work_now();
        if (r->reaped && (!pipes_open(r) || now - r->reaped_at > 0.1))
            break;
        int ms = (int)((r->next_hb - now) * 1000.0);
        if (ms > 50)
            ms = 50;
        if (ms < 1 || r->reaped)
            ms = 1;
        if (pipes_open(r) || r->fd[0] >= 0) {
            run_pump(r, ms);
        } else {
            poll(NULL, 0, ms < nap ? ms : nap);
            nap = nap * 2 > 50 ? 50 : nap * 2;
        }
        if (!r->reaped && waitpid(r->pid, &r->status, WNOHANG) == r->pid) {
            r->reaped = 1;
            r->reaped_at = cli_work_now();
        }
        job_checks(j, r, http, started);
    }
}

/* The error stored by fail: how the command ended and the tail of its stderr. */
static json_t *job_error(const struct cli_job *j, const struct run *r)
{
    json_t *e = json_object();
    size_t skip = 0;
    if (r->timed_out)
        json_object_set_new(e, "timeout_seconds", json_integer(j->wc->timeout_s));
    if (r->out_overflow)
        json_object_set_new(e, "stdout_too_large", json_integer(STDOUT_MAX));
    if (WIFEXITED(r->status))
        json_object_set_new(e, "exit_status", json_integer(WEXITSTATUS(r->status)));
    else if (WIFSIGNALED(r->status))
        json_object_set_new(e, "signal", json_integer(WTERMSIG(r->status)));
    while (skip < r->err_len && ((unsigned char)r->err[skip] & 0xC0) == 0x80)
        skip++; /* the tail may start inside a UTF-8 sequence */
    json_t *tail = json_stringn(r->err + skip, r->err_len - skip);
    json_object_set_new(e, "stderr", tail ? tail : json_string("(stderr is not UTF-8)"));
    return e;
}

/* POSTs one lease write (complete, fail, handback) and logs a refusal. Returns the status. */
static long lease_write(const struct cli_work_conf *wc, struct cli_http *http, long long id,
                        const char *verb, json_t *body)
{
    char path[512];
    struct cli_reply rep;
    snprintf(path, sizeof(path), "/queues/%s/leases/%lld/%s", wc->queue_esc, id, verb);
    cli_http_call(http, "POST", path, body, CLI_HTTP_IDEMPOTENT, 30, &rep);
    long status = rep.status;
    if (status != 200)
        cli_errorf("work: job %lld: %s refused: %s: %s", id, verb,
                   rep.code[0] ? rep.code : "unavailable", rep.detail);
    cli_reply_clear(&rep);
    json_decref(body);
    return status;
}

void cli_job_handback(const struct cli_work_conf *wc, struct cli_http *http, long long id,
                      long long fence)
{
    lease_write(wc, http, id, "handback",
                json_pack("{s:s, s:I}", "owner", wc->owner, "fence", (json_int_t)fence));
}

static void count(struct cli_work_state *ws, long long *counter)
{
    pthread_mutex_lock(&ws->mu);
    (*counter)++;
    pthread_mutex_unlock(&ws->mu);
}

/* Completes, fails or hands back j after its command ended. */
static void job_settle(const struct cli_job *j, struct run *r, struct cli_http *http)
{
    const struct cli_work_conf *wc = j->wc;
    struct cli_work_state *ws = j->ws;
    json_t *result = NULL;
    if (r->lost) {
        count(ws, &ws->lost);
        return;
    }
    if (r->aborted) {
        cli_job_handback(wc, http, j->id, j->fence);
        count(ws, &ws->handed_back);
        return;
    }
    int ok =
        WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0 && !r->timed_out && !r->out_overflow;
    if (ok && !(result = json_or_string(r->out ? r->out : "", r->out_len))) {
        snprintf(r->err, sizeof(r->err), "stdout is neither JSON nor UTF-8 text");
        r->err_len = strlen(r->err);
        ok = 0;
    }
    if (ok && r->lease_until - cli_work_now() > 2.0 && r->out_len < 65536) {
        cli_settler_add(ws->settler, j->id, j->fence, result, r->lease_until - 1.0);
        return;
    }
    if (ok) {
        json_t *body = json_pack("{s:s, s:I, s:o}", "owner", wc->owner, "fence",
                                 (json_int_t)j->fence, "result", result);
        count(ws, lease_write(wc, http, j->id, "complete", body) == 200 ? &ws->succeeded
                                                                        : &ws->refused);
        return;
    }
    json_t *body = json_pack("{s:s, s:I, s:o, s:b}", "owner", wc->owner, "fence",
                             (json_int_t)j->fence, "error", job_error(j, r), "retry", 1);
    if (wc->verbose || WIFSIGNALED(r->status) || r->timed_out)
        cli_errorf("work: job %lld attempt %lld: command failed", j->id, j->attempt);
    count(ws, lease_write(wc, http, j->id, "fail", body) == 200 ? &ws->failed : &ws->refused);
}

/* Runs one job: spawn, watch, settle. */
static void job_run(struct cli_job *j, struct cli_http *http)
{
    struct run *r = calloc(1, sizeof(*r));
    char why[256] = "";
    if (!r)
        return;
    for (int i = 0; i < 4; i++)
        r->fd[i] = -1;
    char *text = json_dumps(j->payload, JSON_COMPACT | JSON_ENCODE_ANY);
    if (text && asprintf(&r->in, "%s\n", text) < 0)
        r->in = NULL; /* the payload and a newline, so `read` in a shell sees a whole line */
    free(text);
    r->in_len = r->in ? strlen(r->in) : 0;
    if (job_spawn(j, r, why, sizeof(why)) != 0) {
        /* COMMAND cannot run at all: the worker is misconfigured, not the job broken, so the
         * job goes back with its attempt refunded and the worker stops */
        cli_errorf("work: %s; handing job %lld back and stopping", why, j->id);
        cli_job_handback(j->wc, http, j->id, j->fence);
        count(j->ws, &j->ws->handed_back);
        cli_work_fail(CLI_EXIT_USAGE);
    } else {
        if (!r->in_len)
            fd_close(&r->fd[0]);
        job_watch(j, r, http);
        job_settle(j, r, http);
    }
    for (int i = 0; i < 4; i++)
        fd_close(&r->fd[i]);
    json_decref(r->progress);
    free(r->in);
    free(r->out);
    free(r);
}

void *cli_job_thread(void *arg)
{
    struct cli_job *j = arg;
    struct cli_work_state *ws = j->ws;
    struct cli_http *http = cli_http_new(j->wc->conf);
    if (http)
        job_run(j, http);
    cli_http_free(http);
    json_decref(j->payload);
    free(j);
    pthread_mutex_lock(&ws->mu);
    ws->running--;
    pthread_cond_broadcast(&ws->cv);
    pthread_mutex_unlock(&ws->mu);
    return NULL;
}
