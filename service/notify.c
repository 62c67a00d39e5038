/* sd_notify over a unix datagram socket (see notify.h): the whole protocol is a sendto of
 * "KEY=value" lines to the address in NOTIFY_SOCKET, an '@' first meaning Linux's abstract
 * namespace (a NUL byte in the address). */
#include "service/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int svc_notify(const char *state)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (name == NULL || name[0] == '\0')
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t len = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || len >= sizeof(sa.sun_path))
        return -1;
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    ssize_t n;
    do
        n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    while (n < 0 && errno == EINTR);
    close(fd);
    return n == (ssize_t)strlen(state) ? 1 : -1;
}

long svc_notify_watchdog_ms(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (usec == NULL || usec[0] == '\0')
        return 0;
    if (pid != NULL && pid[0] != '\0' && strtol(pid, NULL, 10) != (long)getpid())
        return 0; /* meant for another process (a wrapper that exec'd us would be this one) */
    char *end = NULL;
    long long us = strtoll(usec, &end, 10);
    if (*end != '\0' || us <= 0)
        return 0;
    long long ms = us / 1000;
    return ms > 0 ? (long)ms : 1;
}
