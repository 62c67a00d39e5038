/* The listening socket (see listen.h). No SO_REUSEPORT: a second process on the same port would
 * silently take half the connections; it gets "address already in use" instead. */
#include "service/listen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Fills ss from address and port. Returns the address length, or 0 when address is neither. */
static socklen_t listen_addr(const char *address, long port, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        return sizeof(*v4);
    }
    if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        return sizeof(*v6);
    }
    return 0;
}

int svc_listen_address_valid(const char *address)
{
    struct sockaddr_storage ss;
    return listen_addr(address, 0, &ss) != 0;
}

enum svc_reach svc_listen_reach(const char *address)
{
    struct sockaddr_storage ss;
    socklen_t len = listen_addr(address, 0, &ss);
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)&ss)->sin6_addr;
    uint32_t a4 = ntohl(((const struct sockaddr_in *)&ss)->sin_addr.s_addr);
    if (len == sizeof(struct sockaddr_in6) && IN6_IS_ADDR_V4MAPPED(a6))
        a4 = (uint32_t)a6->s6_addr[12] << 24 | (uint32_t)a6->s6_addr[13] << 16 |
             (uint32_t)a6->s6_addr[14] << 8 | a6->s6_addr[15];
    else if (len == sizeof(struct sockaddr_in6))
        return IN6_IS_ADDR_LOOPBACK(a6)      ? SVC_REACH_LOOPBACK
               : IN6_IS_ADDR_UNSPECIFIED(a6) ? SVC_REACH_ALL
                                             : SVC_REACH_INTERFACE;
    return a4 >> 24 == 127 ? SVC_REACH_LOOPBACK : a4 == 0 ? SVC_REACH_ALL : SVC_REACH_INTERFACE;
}

const char *svc_listen_reach_name(enum svc_reach reach)
{
    static const char *const names[] = {
        [SVC_REACH_LOOPBACK] = "loopback only",
        [SVC_REACH_ALL] = "all interfaces",
        [SVC_REACH_INTERFACE] = "one interface",
    };
    return names[reach];
}

int svc_listen_open(const char *address, long port, uint16_t *bound, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    socklen_t len = listen_addr(address, port, &ss);
    if (len == 0) {
        snprintf(why, whylen, "not an IPv4 or IPv6 address");
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int on = 1, off = 0;
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    /* "::" then accepts IPv4 too (as ::ffff:a.b.c.d), whatever net.ipv6.bindv6only says */
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 1024) != 0) {
        snprintf(why, whylen, "%s",
                 errno == EADDRINUSE ? "address already in use (another process "
                                       "listens on this port)"
                                     : strerror(errno));
        close(fd);
        return -1;
    }
    len = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &len);
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}
