/* The HTTP listening socket, made before libmicrohttpd gets it: an IPv4 or IPv6 address
 * ("::" listens dual-stack, IPv4 clients included), and errors that name the address, the port
 * and the reason ("address already in use"). Serving on it belongs to http.c. */
#ifndef SVC_LISTEN_H
#define SVC_LISTEN_H

#include <stddef.h>
#include <stdint.h>

/* True when address is a numeric IPv4 or IPv6 address. */
int svc_listen_address_valid(const char *address);
/* Who can reach a listener on a valid address: loopback only (127.0.0.0/8, ::1, ::ffff:127.x),
 * all interfaces (0.0.0.0, ::), or the one interface that has the address. */
enum svc_reach { SVC_REACH_LOOPBACK, SVC_REACH_ALL, SVC_REACH_INTERFACE };
enum svc_reach svc_listen_reach(const char *address);
/* Its words in the log: "loopback only", "all interfaces", "one interface" (static). */
const char *svc_listen_reach_name(enum svc_reach reach);
/* Binds and listens (non-blocking, close-on-exec, SO_REUSEADDR) on address and port (0: any free
 * port). Returns the socket with the port bound in *bound, or -1 with the reason in why. */
int svc_listen_open(const char *address, long port, uint16_t *bound, char *why, size_t whylen);

#endif
