/* SIGHUP, the watchdog and readiness while serving (see process.h). Runs on the main thread
 * only; what it changes (the token set, the log level, the TLS pair) is read by other threads
 * through their own synchronization (auth.c's lock, log.c's atomic, tls.c's atomic pointer). */
#include "service/process.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "service/audit.h"
#include "service/clock.h"
#include "service/log.h"
#include "service/notify.h"

int svc_level_file_apply(const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(why, whylen, "cannot read log level file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[256], word[32] = "";
    int words = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        char first[32], extra[2];
        int n = sscanf(line, " %31s %1s", first, extra);
        if (n <= 0 || first[0] == '#')
            continue;
        words += n;
        snprintf(word, sizeof(word), "%s", first);
    }
    fclose(f);
    int level = words == 1 ? svc_log_level_parse(word) : -1;
    if (level < 0) {
        snprintf(why, whylen, "log level file %s: expected one word, debug, info, warn or error",
                 path);
        return -1;
    }
    svc_log_set_level((enum svc_log_level)level);
    return 0;
}

/* The TLS certificate and key read again; the pair in force stays when they fail a check. */
static void reload_tls(struct svc_tls *tls)
{
    char why[1024];
    int r = svc_tls_reload(tls, why, sizeof(why));
    if (r == 0)
        svc_log(SVC_LOG_INFO, "TLS certificate and key unchanged", NULL);
    else if (r < 0)
        svc_log(SVC_LOG_ERROR, "TLS certificate not reloaded: the previous one stays in force",
                "detail", why, NULL);
}

void svc_process_reload(const struct svc_config *cfg, struct svc_auth *auth, struct svc_tls *tls)
{
    char state[96], why[512], n[24];
    snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%lld\nSTATUS=reloading",
             (long long)(svc_now() * 1e6));
    svc_notify(state);
    svc_log(SVC_LOG_INFO,
            tls != NULL ? "SIGHUP: reloading the tokens file, the log level file and the TLS "
                          "certificate"
                        : "SIGHUP: reloading the tokens file and the log level file",
            NULL);
    if (auth != NULL && svc_auth_reload(auth, cfg->tokens_file, why, sizeof(why)) == 0) {
        snprintf(n, sizeof(n), "%zu", svc_auth_count(auth));
        svc_log(SVC_LOG_INFO, "bearer tokens reloaded", SVC_NUM("tokens"), n, NULL);
        svc_audit_reload(cfg->tokens_file, "done", svc_auth_count(auth), NULL);
    } else if (auth != NULL) {
        snprintf(n, sizeof(n), "%zu", svc_auth_count(auth));
        svc_log(SVC_LOG_ERROR, "tokens file not reloaded: the previous tokens stay in force",
                "detail", why, SVC_NUM("tokens"), n, NULL);
        svc_audit_reload(cfg->tokens_file, "failed", svc_auth_count(auth), why);
    } else {
        svc_log(SVC_LOG_WARN,
                "running open: a reload does not add tokens (restart with ROWLOCK_TOKENS_FILE)",
                NULL);
        svc_audit_reload("", "skipped", 0, NULL);
    }
    if (cfg->log_level_file[0] != '\0') {
        if (svc_level_file_apply(cfg->log_level_file, why, sizeof(why)) == 0)
            svc_log(SVC_LOG_WARN, "log level set", "level", svc_log_level_name(svc_log_get_level()),
                    NULL);
        else
            svc_log(SVC_LOG_ERROR, "log level not reloaded: the previous level stays", "detail",
                    why, "level", svc_log_level_name(svc_log_get_level()), NULL);
    }
    if (tls != NULL)
        reload_tls(tls);
    svc_notify("READY=1\nSTATUS=serving");
}

int svc_process_wait(const sigset_t *set, const struct svc_config *cfg, struct svc_auth *auth,
                     struct svc_tls *tls)
{
    long watchdog_ms = svc_notify_watchdog_ms();
    long ping_ms = watchdog_ms / 2 > 0 ? watchdog_ms / 2 : watchdog_ms;
    if (watchdog_ms > 0)
        svc_notify("WATCHDOG=1");
    for (;;) {
        int sig;
        if (ping_ms > 0) {
            struct timespec ts = svc_clock_span_ms(ping_ms);
            sig = sigtimedwait(set, NULL, &ts);
        } else {
            sig = sigwaitinfo(set, NULL);
        }
        if (sig == SIGHUP) {
            svc_process_reload(cfg, auth, tls);
        } else if (sig > 0) {
            return sig;
        } else if (errno == EAGAIN) { /* the ping interval passed */
            svc_notify("WATCHDOG=1");
        }
        /* EINTR (a debugger attaching, say) is no signal to stop: keep waiting */
    }
}
