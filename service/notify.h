/* systemd's readiness protocol (sd_notify) without libsystemd: one datagram per state change to
 * the unix socket named by NOTIFY_SOCKET ("/path" or "@abstract"). READY=1, STOPPING=1,
 * RELOADING=1, WATCHDOG=1 and STATUS= lines; what each state means belongs to main.c. */
#ifndef SVC_NOTIFY_H
#define SVC_NOTIFY_H

/* Sends state ("READY=1\nSTATUS=serving") to NOTIFY_SOCKET. Returns 1 when sent, 0 when no
 * NOTIFY_SOCKET is set (not run by systemd: nothing to do), -1 when it could not be sent. */
int svc_notify(const char *state);
/* The watchdog interval systemd asks for (WATCHDOG_USEC, for this process when WATCHDOG_PID is
 * set), in milliseconds; 0 when no watchdog is configured. Ping at half of it. */
long svc_notify_watchdog_ms(void);

#endif
