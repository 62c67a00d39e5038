/* rowlock-cli work against a real rowlock: 1,000 jobs run by a shell command with --concurrency
 * 8. Some commands fail every time (the job ends failed after max_attempts, each attempt
 * accounted), some fail once (succeeded on attempt 2); one long job and one hanging job are still
 * running when the worker is sent SIGTERM mid-run, so after --grace they are killed and handed
 * back (no lease left processing); the worker is restarted, the hanging job is claimed again and
 * cancelled by the operator, and its command must be gone within one heartbeat interval of the
 * refused heartbeat. At the end every job succeeded exactly once (the command's own log) with the
 * attempts expected, or failed with its attempts accounted. And a command whose heartbeats go
 * unanswered (the service stopped) is killed once its lease has run out. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define JOBS      1000
#define LEASE_S   3
#define HANG_I    0 /* priority 10: claimed first */
#define LONG_I    1 /* priority 5: its first run sleeps until killed after the grace */
#define FAIL_ALL  97
#define FAIL_ONCE 31

static char dir[256];
static long long ids[JOBS];
static pid_t running[4]; /* workers and commands a failed test may leave behind */

static const char script[] =
    "p=$(cat)\n"
    "case \"$p\" in *'\"hang\"'*) echo $$ > \"$D/hang.pid\"; exec sleep 300;; esac\n"
    "case \"$p\" in *'\"hangp\"'*) echo '{\"step\":1}' >&3; echo $$ > \"$D/hang.pid\"; exec sleep "
    "300;;"
    " esac\n"
    "case \"$p\" in *'\"long\"'*) [ -e \"$D/long\" ] || { : > \"$D/long\"; sleep 60; };; esac\n"
    "case \"$p\" in *'\"fail\":\"all\"'*) echo \"boom $ROWLOCK_JOB_ID\" >&2; exit 7;; esac\n"
    "case \"$p\" in *'\"fail\":\"once\"'*) [ \"$ROWLOCK_JOB_ATTEMPT\" = 1 ] && exit 1;; esac\n"
    "echo \"$ROWLOCK_JOB_ID\" >> \"$D/done.log\"\n"
    "echo \"{\\\"id\\\":$ROWLOCK_JOB_ID,\\\"queue\\\":\\\"$ROWLOCK_QUEUE\\\"}\"\n";

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/rowlock-cli-work-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    return th_svc_start("cliwork", NULL);
}

static int teardown(void **state)
{
    char cmd[512];
    for (int i = 0; i < 4; i++)
        if (running[i] > 0 && kill(running[i], SIGKILL) == 0)
            waitpid(running[i], NULL, WNOHANG);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return -1;
    return th_svc_teardown(state);
}

/* Starts rowlock-cli work on queue with the given extra option; its stderr goes to dir/<log>. */
static pid_t worker_start_on(const char *queue, const char *log, const char *extra)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char url[64], path[512], d[300];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", th_svc.port);
        snprintf(path, sizeof(path), "%s/%s", dir, log);
        snprintf(d, sizeof(d), "D=%s", dir);
        setenv("ROWLOCK_URL", url, 1);
        setenv("D", dir, 1);
        if (!freopen(path, "w", stderr) || !freopen("/dev/null", "w", stdout))
            _exit(99);
        execl(ROWLOCK_CLI_BINARY, "rowlock-cli", "work", queue, "--concurrency", "8", "--lease",
              "3", "--grace", "2", extra, "--", "sh", "-c", script, (char *)NULL);
        _exit(98);
    }
    return pid;
}

static pid_t worker_start(const char *log, const char *extra)
{
    return worker_start_on("w", log, extra);
}

/* Copies the worker's log (dir/<log>) to stderr. */
static void worker_log(const char *log)
{
    char path[512], line[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, log);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        fprintf(stderr, "%s: %s", log, line);
    if (f)
        fclose(f);
}

/* Waits up to timeout_s for pid; returns its exit status (-1 on a signal, -2 on timeout). */
static int worker_wait(pid_t pid, double timeout_s)
{
    double end = th_now() + timeout_s;
    int status;
    while (th_now() < end) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -2;
}

/* Lines of dir/done.log naming job id (id 0: all lines). */
static int done_count(long long id)
{
    char path[512], line[64];
    int n = 0;
    snprintf(path, sizeof(path), "%s/done.log", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (id == 0 || atoll(line) == id)
            n++;
    fclose(f);
    return n;
}

/* The pid in dir/hang.pid once it exists (waits up to 20 s), else 0. */
static pid_t hang_pid(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/hang.pid", dir);
    for (int i = 0; i < 2000; i++) {
        FILE *f = fopen(path, "r");
        long pid = 0;
        if (f) {
            int got = fscanf(f, "%ld", &pid);
            fclose(f);
            if (got == 1 && pid > 0)
                return (pid_t)pid;
        }
        usleep(10000);
    }
    return 0;
}

static void enqueue_all(void)
{
    json_decref(th_call(th_svc.port, "PUT", "/queues/w",
                        "{\"max_attempts\": 3, \"lease_seconds\": 3, \"backoff_base_seconds\": 0}",
                        201));
    json_t *jobs = json_array();
    for (int i = 0; i < JOBS; i++) {
        json_t *payload = json_pack("{s:i}", "i", i);
        int prio = 0;
        if (i == HANG_I || i == LONG_I) {
            json_object_set_new(payload, i == HANG_I ? "hang" : "long", json_true());
            prio = i == HANG_I ? 10 : 5;
        } else if (i % FAIL_ALL == 0)
            json_object_set_new(payload, "fail", json_string("all"));
        else if (i % FAIL_ONCE == 0)
            json_object_set_new(payload, "fail", json_string("once"));
        json_array_append_new(jobs, json_pack("{s:o, s:i}", "payload", payload, "priority", prio));
    }
    json_t *body = json_pack("{s:o}", "jobs", jobs);
    struct th_response r;
    assert_int_equal(th_http_json(th_svc.port, "POST", "/queues/w/jobs", body, &r), 0);
    assert_true(r.status == 200 || r.status == 201);
    json_t *out = json_object_get(r.json, "jobs");
    assert_int_equal(json_array_size(out), JOBS);
    for (int i = 0; i < JOBS; i++)
        ids[i] = json_integer_value(json_object_get(json_array_get(out, i), "id"));
    th_response_free(&r);
    json_decref(body);
}

static json_t *job_get(long long id)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/w/jobs/%lld", id);
    return th_get_json(th_svc.port, path);
}

/* Jobs in state processing (all owners). */
static size_t processing_count(void)
{
    json_t *page = th_get_json(th_svc.port, "/queues/w/jobs?state=processing&limit=1000");
    size_t n = json_array_size(json_object_get(page, "jobs"));
    json_decref(page);
    return n;
}

/* True when the job's history has an attempt with this outcome. */
static int history_has(json_t *job, const char *outcome)
{
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(job, "history"), i, a)
    {
        const char *o = json_string_value(json_object_get(a, "outcome"));
        if (o && strcmp(o, outcome) == 0)
            return 1;
    }
    return 0;
}

/* Checks one job's end state against what its payload asked for; returns 0 or prints why. */
static int job_check(int i)
{
    json_t *job = job_get(ids[i]);
    const char *state = json_string_value(json_object_get(job, "state"));
    long long attempts = json_integer_value(json_object_get(job, "attempts"));
    int done = done_count(ids[i]), bad = 0;
    if (i == HANG_I) {
        bad = strcmp(state, "cancelled") != 0 || done != 0 || !history_has(job, "handed_back");
    } else if (i % FAIL_ALL == 0 && i != LONG_I) {
        json_t *err = json_object_get(job, "last_error");
        bad = strcmp(state, "failed") != 0 || attempts != 3 || done != 0 ||
              json_integer_value(json_object_get(err, "exit_status")) != 7 ||
              !strstr(json_string_value(json_object_get(err, "stderr")), "boom");
    } else {
        long long want = i % FAIL_ONCE == 0 && i != LONG_I ? 2 : 1;
        json_t *res = json_object_get(job, "result");
        bad = strcmp(state, "succeeded") != 0 || attempts != want || done != 1 ||
              json_integer_value(json_object_get(res, "id")) != ids[i] ||
              strcmp(json_string_value(json_object_get(res, "queue")), "w") != 0;
        if (i == LONG_I && !history_has(job, "handed_back"))
            bad = 1;
    }
    if (bad) {
        char *text = json_dumps(job, JSON_COMPACT);
        fprintf(stderr, "job %d (id %lld), %d successful runs: %s\n", i, ids[i], done, text);
        free(text);
    }
    json_decref(job);
    return bad;
}

static void work_sigterm_restart_cancel(void **state)
{
    enqueue_all();
    /* first worker: SIGTERM once 300 jobs are done, with the hanging and the long job running */
    pid_t w1 = worker_start("worker1.log", "--verbose");
    running[2] = w1;
    pid_t hang1 = hang_pid();
    assert_true(hang1 > 0);
    for (int i = 0; i < 3000 && done_count(0) < 300; i++)
        usleep(5000);
    assert_in_range(done_count(0), 300, JOBS - 100);
    kill(w1, SIGTERM);
    double t0 = th_now();
    int rc = worker_wait(w1, 20);
    worker_log("worker1.log");
    assert_int_equal(rc, 0);
    /* the grace (2 s) and at most one claim's long-poll (10 s) */
    assert_true(th_now() - t0 < 13.0);
    assert_int_equal(kill(hang1, 0), -1);    /* killed after the grace, */
    assert_int_equal(processing_count(), 0); /* and every lease settled or handed back */

    /* second worker: the hanging job comes back; the operator cancels it while it runs */
    char path[512];
    snprintf(path, sizeof(path), "%s/hang.pid", dir);
    unlink(path);
    pid_t w2 = worker_start("worker2.log", "--idle-exit=3");
    running[3] = w2;
    pid_t hang2 = hang_pid();
    assert_true(hang2 > 0);
    snprintf(path, sizeof(path), "/queues/w/jobs/%lld", ids[HANG_I]);
    json_decref(th_call(th_svc.port, "DELETE", path, NULL, 200));
    double cancelled = th_now();
    while (kill(hang2, 0) == 0 && th_now() - cancelled < 10)
        usleep(10000);
    double gone = th_now() - cancelled;
    fprintf(stderr, "hanging command gone %.2f s after the cancel\n", gone);
    /* the refused heartbeat comes at most a heartbeat interval (lease/3) after the cancel; the
     * rest is slack for a loaded machine, still well inside the lease */
    assert_true(gone < LEASE_S / 3.0 + 1.0);
    rc = worker_wait(w2, 60);
    running[2] = running[3] = 0;
    worker_log("worker2.log");
    assert_int_equal(rc, 0);

    int bad = 0;
    for (int i = 0; i < JOBS; i++)
        bad += job_check(i);
    assert_int_equal(bad, 0);
    assert_int_equal(processing_count(), 0);
}

/* A command's progress line (--progress-fd) reaches the job with a heartbeat. Then the service
 * stops answering (SIGSTOP) while the command runs: no heartbeat gets through, and
 * the worker kills the command once the lease it last extended has run out (a hanging
 * heartbeat waits no longer than that). */
static void lease_runs_out_while_service_stopped(void **state)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/hang.pid", dir);
    unlink(path);
    json_decref(th_call(th_svc.port, "PUT", "/queues/s", "{\"lease_seconds\": 3}", 201));
    json_t *job = th_call(th_svc.port, "POST", "/queues/s/jobs", "{\"payload\": \"hangp\"}", 201);
    snprintf(path, sizeof(path), "/queues/s/jobs/%lld",
             (long long)json_integer_value(json_object_get(job, "id")));
    json_decref(job);
    pid_t w = worker_start_on("s", "worker3.log", "--progress-fd=3");
    running[0] = w;
    pid_t hang = hang_pid();
    running[1] = hang;
    assert_true(hang > 0);
    /* the line the command wrote to fd 3 arrives with the first heartbeat (a second in) */
    json_t *progress = NULL;
    for (int i = 0; i < 300 && !json_is_object(progress); i++) {
        usleep(10000);
        job = th_get_json(th_svc.port, path);
        json_decref(progress);
        progress = json_incref(json_object_get(job, "progress"));
        json_decref(job);
    }
    assert_int_equal(json_integer_value(json_object_get(progress, "step")), 1);
    json_decref(progress);
    th_service_signal(&th_svc, SIGSTOP);
    double stopped = th_now();
    while (kill(hang, 0) == 0 && th_now() - stopped < 15)
        usleep(10000);
    double gone = th_now() - stopped;
    th_service_signal(&th_svc, SIGCONT);
    fprintf(stderr, "command gone %.2f s after the service stopped answering\n", gone);
    /* the last extended lease ends at most LEASE_S after the stop: gone within a heartbeat
     * interval (lease/3) of that, a loaded machine included (it takes about 3.0 s) */
    assert_true(gone < LEASE_S + LEASE_S / 3.0);
    assert_true(gone > 1.0); /* it was the lease running out, not something else */
    kill(w, SIGTERM);
    int rc = worker_wait(w, 20);
    worker_log("worker3.log");
    running[0] = running[1] = 0;
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(work_sigterm_restart_cancel),
        cmocka_unit_test(lease_runs_out_while_service_stopped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
