/* systemd readiness without systemd: the test binds the unix datagram socket systemd would
 * (NOTIFY_SOCKET: a path, then an abstract '@' name) and reads what rowlock sends: READY=1 only
 * once it listens (after the schema check), WATCHDOG=1 pings at half of WATCHDOG_USEC, on
 * SIGHUP RELOADING=1 then READY=1 again, and STOPPING=1 when it drains on SIGTERM. A bad
 * configuration exits 2 without ever saying READY. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

static int setup(void **state)
{
    return th_svc_db("systemd_notify");
}

/* Binds a datagram socket at name ("/path" or "@abstract"). */
static int notify_socket(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    else
        unlink(name);
    assert_int_equal(
        bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
        0);
    return fd;
}

/* The next datagram within timeout_ms into buf, or "" when none came. */
static const char *next_message(int fd, char *buf, size_t size, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t n = recv(fd, buf, size - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* Reads messages until one starts with want (skipping watchdog pings unless they are wanted);
 * fails the test after 5 s. */
static void expect(int fd, const char *want)
{
    char buf[512];
    double end = th_now() + 5;
    while (th_now() < end) {
        next_message(fd, buf, sizeof(buf), 500);
        if (strncmp(buf, want, strlen(want)) == 0)
            return;
        if (buf[0] != '\0' && strcmp(buf, "WATCHDOG=1") != 0)
            fail_msg("expected %s, got \"%s\"", want, buf);
    }
    fail_msg("no %s within 5 s", want);
}

static void lifecycle(const char *name)
{
    int fd = notify_socket(name);
    char env_socket[160];
    snprintf(env_socket, sizeof(env_socket), "NOTIFY_SOCKET=%s", name);
    const char *env[] = {env_socket, "WATCHDOG_USEC=300000", NULL};
    struct th_service svc;
    assert_int_equal(th_service_spawn(&svc, th_svc_dburl, env), 0);
    char buf[512];
    /* READY=1 once the schema is checked and the socket listens; only pings before it */
    double end = th_now() + 30;
    while (strncmp(next_message(fd, buf, sizeof(buf), 500), "READY=1", 7) != 0) {
        assert_true(buf[0] == '\0' || strcmp(buf, "WATCHDOG=1") == 0);
        assert_true(th_now() < end);
    }
    assert_int_equal(th_service_await(&svc), 0); /* it had logged "listening" before */
    /* pings at 150 ms: at least four in a second */
    int pings = 0;
    end = th_now() + 1;
    while (th_now() < end)
        pings += strcmp(next_message(fd, buf, sizeof(buf), 200), "WATCHDOG=1") == 0;
    assert_true(pings >= 4);
    th_service_signal(&svc, SIGHUP);
    expect(fd, "RELOADING=1\nMONOTONIC_USEC=");
    expect(fd, "READY=1");
    th_service_signal(&svc, SIGTERM);
    expect(fd, "STOPPING=1");
    assert_int_equal(th_service_wait(&svc, 30), 0);
    close(fd);
    if (name[0] == '/')
        unlink(name);
}

static void notify_socket_path(void **state)
{
    char name[64];
    snprintf(name, sizeof(name), "/tmp/rowlock-test-notify-%d", (int)getpid());
    lifecycle(name);
}

static void notify_socket_abstract(void **state)
{
    char name[64];
    snprintf(name, sizeof(name), "@rowlock-test-notify-%d", (int)getpid());
    lifecycle(name);
}

/* A configuration refused before anything starts: exit 2, and systemd hears nothing. */
static void bad_configuration_never_ready(void **state)
{
    char name[64], cmd[512], buf[512];
    snprintf(name, sizeof(name), "@rowlock-test-notify-bad-%d", (int)getpid());
    int fd = notify_socket(name);
    snprintf(cmd, sizeof(cmd),
             "env NOTIFY_SOCKET=%s ROWLOCK_DB_STARTUP_WAIT_S=0 '%s' --listen-address=nowhere "
             ">/dev/null 2>&1",
             name, ROWLOCK_BINARY);
    int status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_string_equal(next_message(fd, buf, sizeof(buf), 200), "");
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(notify_socket_path),
        cmocka_unit_test(notify_socket_abstract),
        cmocka_unit_test(bad_configuration_never_ready),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
