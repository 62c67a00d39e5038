/* The log stays JSON through a database restart: libpq writes the notices
 * it receives (the server's "terminating connection ..." warnings among them) straight to
 * stderr unless a notice receiver is installed, which broke the one-JSON-object-per-line log.
 * The service's stderr is captured (the harness copies it to ours, which points at a file
 * meanwhile) through a crash restart (a backend killed with SIGKILL: PostgreSQL ends every
 * session with a WARNING, recovers and comes back by itself) and a stop and start
 * (ROWLOCK_TEST_PGCTL), with requests before and after; every line must parse as one JSON
 * object, and the notices, the pool flush and the reconnects must be among them. Runs alone:
 * it restarts the database server. */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static char logpath[] = "/tmp/rowlock_log_json_XXXXXX";
static int saved_stderr = -1;

/* Points our stderr (where the harness copies the service's log) at a file. */
static void capture_begin(void)
{
    int fd = mkstemp(logpath);
    assert_true(fd >= 0);
    fflush(stderr);
    /* close-on-exec: a server started meanwhile must not keep our real stderr open */
    saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

/* Gives stderr back, copies what was captured to it, and returns the captured text (free it). */
static char *capture_end(void)
{
    if (saved_stderr < 0)
        return NULL;
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    FILE *f = fopen(logpath, "r");
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    char buf[4096];
    size_t n;
    while (f != NULL && (n = fread(buf, 1, sizeof(buf), f)) > 0) {
        fwrite(buf, 1, n, out);
        fwrite(buf, 1, n, stderr);
    }
    if (f != NULL)
        fclose(f);
    fclose(out);
    unlink(logpath);
    return text;
}

static int setup(void **state)
{
    return th_svc_db("logjson");
}

static int teardown(void **state)
{
    free(capture_end());
    return th_pgctl_leave_running();
}

/* Waits up to 30 s for the server to accept connections again (after crash recovery). */
static void await_server(void)
{
    for (int i = 0; i < 300; i++) {
        if (PQping(th_svc_dburl) == PQPING_OK)
            return;
        usleep(100000);
    }
    fail_msg("the database server did not come back");
}

static void crash_restart(void)
{
    PGconn *victim = th_pg(th_svc_dburl);
    PGresult *r = th_sql(victim, "SELECT pg_backend_pid()");
    pid_t pid = (pid_t)atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    assert_int_equal(kill(pid, SIGKILL), 0);
    PQfinish(victim);
    usleep(500000); /* the postmaster ends every session, then recovers */
    await_server();
}

static void warm(int port)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/queues/q", port);
    struct th_crowd c;
    th_crowd_start(&c, 8, url, NULL);
    th_crowd_run(&c);
    th_crowd_free(&c);
}

static void log_is_json_through_restarts(void **state)
{
    capture_begin();
    struct th_service svc;
    const char *env[] = {"ROWLOCK_POOL_SIZE=8", "ROWLOCK_WORKERS=8", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    json_decref(th_call(svc.port, "PUT", "/queues/q", "{}", 201));
    warm(svc.port);
    crash_restart();
    warm(svc.port);
    warm(svc.port);
    th_pgctl("stop", 1);
    th_pgctl("start", 1);
    warm(svc.port);
    warm(svc.port);
    assert_int_equal(th_service_stop(&svc), 0);
    char *log = capture_end();
    assert_non_null(log);

    int notice = strstr(log, "\"msg\":\"database notice\"") != NULL;
    int flushed = strstr(log, "\"msg\":\"database connection pool flushed\"") != NULL;
    int reconnected = strstr(log, "\"msg\":\"database reconnected\"") != NULL;
    int lines = 0, bad = 0;
    for (char *line = strtok(log, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        lines++;
        json_error_t e;
        json_t *j = json_loads(line, 0, &e);
        if (!json_is_object(j)) {
            bad++;
            fprintf(stderr, "not one JSON object: %s\n", line);
        }
        json_decref(j);
    }
    free(log);
    fprintf(stderr, "%d log lines, %d not JSON\n", lines, bad);
    assert_true(lines > 20);
    assert_int_equal(bad, 0);
    assert_true(notice);
    assert_true(flushed);
    assert_true(reconnected);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(log_is_json_through_restarts),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
