/* The running process after startup: waiting for a signal while pinging systemd's watchdog,
 * SIGHUP reloading the tokens file, the log level file and the TLS certificate, and the readiness
 * notifications around it. Startup and the drain belong to main.c; the protocol to notify.c. */
#ifndef SVC_PROCESS_H
#define SVC_PROCESS_H

#include <signal.h>
#include <stddef.h>

#include "service/auth.h"
#include "service/config.h"
#include "service/tls.h"

/* Reads the log level file (one word: debug, info, warn or error; blank lines and '#' comments
 * ignored) and sets the level. Returns 0, or -1 with the level unchanged and the reason in why. */
int svc_level_file_apply(const char *path, char *why, size_t whylen);
/* What SIGHUP does: the tokens file read again (auth may be NULL: running open, nothing to
 * reload), the log level file when one is set, and the TLS certificate and key (tls may be
 * NULL: plain HTTP); each keeps its old value when its file is broken, and says why in the log.
 * Tells systemd RELOADING=1, then READY=1. */
void svc_process_reload(const struct svc_config *cfg, struct svc_auth *auth, struct svc_tls *tls);
/* Waits for a signal of set (blocked in every thread) and returns the first that is not SIGHUP:
 * SIGHUP reloads (svc_process_reload) and waiting goes on; while WATCHDOG_USEC is set, pings
 * systemd's watchdog every half of it. */
int svc_process_wait(const sigset_t *set, const struct svc_config *cfg, struct svc_auth *auth,
                     struct svc_tls *tls);

#endif
