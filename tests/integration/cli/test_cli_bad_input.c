/* rowlock-cli facing bad input and a bad service: --help and -h print the help and exit 0, an
 * unknown command exits 2; an unknown queue or topic exits 3 with the problem code on one line;
 * a bad token exits 1 with `unauthorized`, a token without the scope with `forbidden`, and a
 * token with the work scope alone runs a worker; a service answering 503 is retried, honouring
 * Retry-After, then exit 5, and so is a port where nothing listens; a malformed NDJSON line is
 * reported by its number, the lines before it are sent and nothing after it (all but it with
 * --skip-bad); a worker whose COMMAND cannot run exits 2 and hands its job back. pause and resume
 * set and clear a queue's pause (a read token is forbidden, an unknown queue exits 3). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"

#define ADMIN_TOKEN "cli-admin-token-0123456789"
#define READ_TOKEN  "cli-read-token-0123456789"
#define WORK_TOKEN  "cli-work-token-0123456789"

static char tokens_path[] = "/tmp/rowlock-cli-tokens-XXXXXX";
static char token_file[] = "/tmp/rowlock-cli-token-XXXXXX";

static int setup(void **state)
{
    char env_tokens[256];
    int fd = mkstemp(tokens_path), tf = mkstemp(token_file);
    const char *text = ADMIN_TOKEN " admin\n" READ_TOKEN " read\n" WORK_TOKEN " work\n";
    if (fd < 0 || tf < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) ||
        write(tf, ADMIN_TOKEN "\n", strlen(ADMIN_TOKEN) + 1) != (ssize_t)strlen(ADMIN_TOKEN) + 1)
        return -1;
    close(fd);
    close(tf);
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, NULL};
    return th_svc_start("clibad", env);
}

static int teardown(void **state)
{
    unlink(tokens_path);
    unlink(token_file);
    return th_svc_teardown(state);
}

/* Runs rowlock-cli with args (env: a prefix of VAR=value words, stdin_text its stdin or NULL);
 * returns its exit code, its stderr in err. */
static int cli(const char *env, const char *stdin_text, const char *args, char *err, size_t errsize)
{
    static char out[1 << 16];
    return cli_run(env, stdin_text, args, out, sizeof(out), err, errsize);
}

static void admin_put(const char *path)
{
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, "Content-Type: application/json",
                          NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "PUT", path, hdrs, "{}", 2, &r), 0);
    assert_true(r.status == 200 || r.status == 201);
    th_response_free(&r);
}

/* Jobs of a queue (every state), counted through the service. */
static size_t queue_jobs(const char *queue)
{
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, NULL};
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/queues/%s/jobs?limit=1000", queue);
    assert_int_equal(th_http(th_svc.port, "GET", path, hdrs, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    size_t n = json_array_size(json_object_get(r.json, "jobs"));
    th_response_free(&r);
    return n;
}

/* --help and -h before any command: the help on stdout, nothing on stderr, exit 0. */
static void help_exits_0(void **state)
{
    static const char *const flags[] = {"--help", "-h"};
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        char cmd[1024], out[8192], errpath[] = "/tmp/rowlock-cli-err-XXXXXX";
        int efd = mkstemp(errpath);
        assert_true(efd >= 0);
        snprintf(cmd, sizeof(cmd), "'%s' %s 2>%s", ROWLOCK_CLI_BINARY, flags[i], errpath);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = '\0';
        int status = pclose(p);
        off_t err_bytes = lseek(efd, 0, SEEK_END);
        close(efd);
        unlink(errpath);
        fprintf(stderr, "rowlock-cli %s -> %d, %zu bytes on stdout, %lld on stderr\n", flags[i],
                WIFEXITED(status) ? WEXITSTATUS(status) : -1, n, (long long)err_bytes);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(err_bytes, 0);
        assert_non_null(strstr(out, "usage: rowlock-cli "));
        assert_non_null(strstr(out, "work QUEUE"));
    }
}

static void unknown_queue_and_topic_exit_3(void **state)
{
    char err[4096], env[256];
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN_FILE=%s", token_file);
    assert_int_equal(cli(env, NULL, "enqueue nosuch '{}'", err, sizeof(err)), 3);
    assert_non_null(strstr(err, "rowlock-cli: queue_not_found: "));
    assert_int_equal(cli(env, NULL, "work nosuch -- true", err, sizeof(err)), 3);
    assert_non_null(strstr(err, "rowlock-cli: queue_not_found: "));
    assert_int_equal(cli(env, NULL, "tail nosuch", err, sizeof(err)), 3);
    assert_non_null(strstr(err, "rowlock-cli: topic_not_found: "));
    assert_int_equal(cli(env, "{\"key\":\"k\",\"value\":1}\n", "produce nosuch", err, sizeof(err)),
                     3);
    assert_non_null(strstr(err, "rowlock-cli: topic_not_found: "));
    assert_int_equal(cli(env, NULL, "job nosuch 1", err, sizeof(err)), 3);
    assert_int_equal(cli(env, NULL, "frobnicate", err, sizeof(err)), 2);
    assert_int_equal(cli(env, NULL, "job q notanumber", err, sizeof(err)), 2);
}

static void bad_token_shows_its_code(void **state)
{
    char err[4096], env[256];
    admin_put("/queues/tok");
    assert_int_equal(
        cli("ROWLOCK_TOKEN=not-a-valid-token-at-all", NULL, "jobs tok", err, sizeof(err)), 1);
    assert_non_null(strstr(err, "rowlock-cli: unauthorized: "));
    assert_int_equal(cli("ROWLOCK_TOKEN=" READ_TOKEN, NULL, "enqueue tok '{}'", err, sizeof(err)),
                     1);
    assert_non_null(strstr(err, "rowlock-cli: forbidden: "));
    /* the token file wins over ROWLOCK_TOKEN, and --token-file over both */
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN=wrong ROWLOCK_TOKEN_FILE=%s", token_file);
    assert_int_equal(cli(env, NULL, "enqueue tok '{}'", err, sizeof(err)), 0);
    assert_int_equal(cli(NULL, NULL, "--token-file /nonexistent jobs tok", err, sizeof(err)), 2);
    assert_int_equal(queue_jobs("tok"), 1);
}

/* The queue's paused member, read through the service. */
static int queue_paused(const char *queue)
{
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, NULL};
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/queues/%s", queue);
    assert_int_equal(th_http(th_svc.port, "GET", path, hdrs, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    int paused = json_is_true(json_object_get(r.json, "paused"));
    th_response_free(&r);
    return paused;
}

static void pause_and_resume(void **state)
{
    char err[4096], env[256];
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN_FILE=%s", token_file);
    admin_put("/queues/held");
    assert_int_equal(cli(env, NULL, "pause held", err, sizeof(err)), 0);
    assert_true(queue_paused("held"));
    assert_int_equal(cli(env, NULL, "pause held", err, sizeof(err)), 0); /* again: no change */
    assert_true(queue_paused("held"));
    assert_int_equal(cli("ROWLOCK_TOKEN=" READ_TOKEN, NULL, "resume held", err, sizeof(err)), 1);
    assert_non_null(strstr(err, "rowlock-cli: forbidden: "));
    assert_true(queue_paused("held"));
    assert_int_equal(cli(env, NULL, "resume held", err, sizeof(err)), 0);
    assert_false(queue_paused("held"));
    assert_int_equal(cli(env, NULL, "pause nosuch", err, sizeof(err)), 3);
    assert_non_null(strstr(err, "rowlock-cli: queue_not_found: "));
    assert_int_equal(cli(env, NULL, "pause", err, sizeof(err)), 2);
    assert_int_equal(cli(env, NULL, "resume held extra", err, sizeof(err)), 2);
}

/* A worker's token needs the work scope alone: claims, heartbeats and settlements, never a read
 * of the queue. The queue's lease (2 s) is shorter than the command (3 s), so the job succeeds
 * only when the worker heartbeats at the lease the claim gave it, the queue's. */
static void work_token_alone_runs_a_worker(void **state)
{
    char err[4096];
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, "Content-Type: application/json",
                          NULL};
    struct th_response r;
    const char *queue = "{\"lease_seconds\": 2}";
    assert_int_equal(th_http(th_svc.port, "PUT", "/queues/wk", hdrs, queue, strlen(queue), &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    assert_int_equal(
        cli("ROWLOCK_TOKEN=" ADMIN_TOKEN, NULL, "enqueue wk '{\"n\":1}'", err, sizeof(err)), 0);
    assert_int_equal(cli("ROWLOCK_TOKEN=" WORK_TOKEN, NULL,
                         "work wk --max-jobs 1 -- sh -c 'sleep 3; echo \\\"done\\\"'", err,
                         sizeof(err)),
                     0);
    assert_non_null(strstr(err, "1 claimed, 1 succeeded, 0 failed, 0 lost"));
    assert_int_equal(th_http(th_svc.port, "GET", "/queues/wk/jobs", hdrs, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *jobs = json_object_get(r.json, "jobs"), *job = json_array_get(jobs, 0);
    assert_int_equal(json_array_size(jobs), 1);
    assert_string_equal(json_string_value(json_object_get(job, "state")), "succeeded");
    assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 1);
    assert_string_equal(json_string_value(json_object_get(job, "result")), "done");
    th_response_free(&r);
    /* and it may do nothing else */
    assert_int_equal(cli("ROWLOCK_TOKEN=" WORK_TOKEN, NULL, "jobs wk", err, sizeof(err)), 1);
    assert_non_null(strstr(err, "rowlock-cli: forbidden: "));
}

/* A stand-in service answering every request 503 with Retry-After: 1. */
struct fake {
    int fd, port;
    atomic_int requests; /* counted by the serving thread, read by the test */
};

static void *fake_serve(void *arg)
{
    struct fake *f = arg;
    static const char body[] =
        "{\"code\":\"database_unavailable\",\"detail\":\"the database is unavailable\"}";
    char answer[512];
    snprintf(answer, sizeof(answer),
             "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
             "Content-Type: application/problem+json\r\nContent-Length: %zu\r\n\r\n%s",
             strlen(body), body);
    for (;;) {
        char buf[4096];
        int c = accept(f->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        f->requests++;
        ssize_t n = read(c, buf, sizeof(buf));
        if (n > 0 && write(c, answer, strlen(answer)) < 0)
            n = 0;
        close(c);
    }
}

/* A listening socket on a free loopback port (its port in *port). */
static int listen_any(int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static void service_down_retries_then_exit_5(void **state)
{
    char err[4096], env[256];
    struct fake f = {0};
    pthread_t t;
    f.fd = listen_any(&f.port);
    assert_int_equal(pthread_create(&t, NULL, fake_serve, &f), 0);
    /* 503 with Retry-After: 1, two retries: three requests at least two seconds apart in all
     * (the backoff alone would wait 0.75 s) */
    snprintf(env, sizeof(env), "ROWLOCK_URL=http://127.0.0.1:%d ROWLOCK_RETRIES=2", f.port);
    double t0 = th_now();
    assert_int_equal(cli(env, NULL, "jobs q", err, sizeof(err)), 5);
    double took = th_now() - t0;
    assert_non_null(strstr(err, "rowlock-cli: database_unavailable: the database is unavailable"));
    assert_int_equal(f.requests, 3);
    assert_true(took >= 1.9 && took < 10);
    /* a worker whose first claim finds the service unavailable gives up the same way */
    assert_int_equal(cli(env, NULL, "work q -- true", err, sizeof(err)), 5);
    assert_non_null(strstr(err, "rowlock-cli: database_unavailable: the database is unavailable"));
    assert_int_equal(f.requests, 6);
    shutdown(f.fd, SHUT_RDWR);
    close(f.fd);
    pthread_join(t, NULL);

    /* nothing listening: connection refused, retried with backoff (0.25 + 0.5 s), then 5 */
    int port, fd = listen_any(&port);
    close(fd);
    snprintf(env, sizeof(env), "ROWLOCK_URL=http://127.0.0.1:%d ROWLOCK_RETRIES=2", port);
    t0 = th_now();
    assert_int_equal(cli(env, "{\"n\":1}\n", "enqueue q", err, sizeof(err)), 5);
    took = th_now() - t0;
    assert_non_null(strstr(err, "rowlock-cli: unavailable: "));
    assert_true(took >= 0.7 && took < 10);
}

static const char ndjson[] = "{\"n\":1}\n{\"n\":2}\n\n{\"n\":3}\n{bad\n{\"n\":5}\n{\"n\":6}\n";

static void malformed_line_stops_there(void **state)
{
    char err[4096], env[256];
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN_FILE=%s", token_file);
    admin_put("/queues/nd");
    admin_put("/queues/nd2");
    /* batches of 2: lines 1-2 went before the bad line was read, line 4 goes with the stop */
    assert_int_equal(cli(env, ndjson, "enqueue nd --batch 2", err, sizeof(err)), 2);
    assert_non_null(strstr(err, "rowlock-cli: line 5: invalid JSON"));
    assert_non_null(strstr(err, "nothing after it"));
    assert_int_equal(queue_jobs("nd"), 3);
    assert_int_equal(cli(env, ndjson, "enqueue nd2 --skip-bad", err, sizeof(err)), 0);
    assert_non_null(strstr(err, "rowlock-cli: line 5: invalid JSON"));
    assert_int_equal(queue_jobs("nd2"), 5);
    /* produce: a line that is JSON but not a message is just as bad */
    admin_put("/topics/ndt");
    assert_int_equal(cli(env, "{\"key\":\"a\",\"value\":1}\n[1]\n{\"key\":\"b\",\"value\":2}\n",
                         "produce ndt", err, sizeof(err)),
                     2);
    assert_non_null(strstr(err, "rowlock-cli: line 2: "));
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, NULL};
    struct th_response r;
    assert_int_equal(th_http(th_svc.port, "GET", "/topics/ndt/messages?after=0", hdrs, NULL, 0, &r),
                     0);
    assert_int_equal(json_array_size(json_object_get(r.json, "messages")), 1);
    th_response_free(&r);
}

/* A COMMAND that cannot run is the worker's fault, not the job's: exit 2, the job handed back
 * with its attempt refunded. */
static void missing_command_hands_back(void **state)
{
    char err[4096], env[256];
    const char *hdrs[] = {"Authorization: Bearer " ADMIN_TOKEN, NULL};
    struct th_response r;
    snprintf(env, sizeof(env), "ROWLOCK_TOKEN_FILE=%s", token_file);
    admin_put("/queues/mc");
    assert_int_equal(cli(env, NULL, "enqueue mc '{\"n\":1}'", err, sizeof(err)), 0);
    assert_int_equal(
        cli(env, NULL, "work mc --idle-exit 3 -- /nonexistent/command", err, sizeof(err)), 2);
    assert_non_null(strstr(err, "cannot run /nonexistent/command"));
    assert_int_equal(th_http(th_svc.port, "GET", "/queues/mc/jobs", hdrs, NULL, 0, &r), 0);
    json_t *job = json_array_get(json_object_get(r.json, "jobs"), 0);
    assert_string_equal(json_string_value(json_object_get(job, "state")), "pending");
    assert_int_equal(json_integer_value(json_object_get(job, "attempts")), 0);
    th_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(help_exits_0),
        cmocka_unit_test(unknown_queue_and_topic_exit_3),
        cmocka_unit_test(bad_token_shows_its_code),
        cmocka_unit_test(work_token_alone_runs_a_worker),
        cmocka_unit_test(service_down_retries_then_exit_5),
        cmocka_unit_test(malformed_line_stops_there),
        cmocka_unit_test(missing_command_hands_back),
        cmocka_unit_test(pause_and_resume),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
