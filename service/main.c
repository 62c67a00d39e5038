/* The rowlock process: configuration, logging, the TLS certificate, the database pool and schema
 * check, the HTTP server with the families' routes, their janitors, and shutdown on
 * SIGTERM/SIGINT (drain, then stop). main is the composition root: it knows the families only as
 * the svc_families table of service/family.h (which routes/families.c defines), so service/
 * includes nothing of routes/. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "db/listener.h"
#include "db/pool.h"
#include "db/schema.h"
#include "service/app.h"
#include "service/auth.h"
#include "service/clock.h"
#include "service/config.h"
#include "service/family.h"
#include "service/healthcheck.h"
#include "service/http.h"
#include "service/janitor.h"
#include "service/listen.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/notify.h"
#include "service/process.h"
#include "service/tls.h"
#include "service/version.h"

static const char *env_lookup(const char *name)
{
    return getenv(name);
}

/* The pool's log function (db/ writes nothing itself): its lines become svc_log lines. */
static void db_log(void *ctx, enum db_log_level level, const char *msg, const char *const *fields)
{
    (void)ctx;
    static const enum svc_log_level levels[] = {SVC_LOG_DEBUG, SVC_LOG_INFO, SVC_LOG_WARN,
                                                SVC_LOG_ERROR};
    const char *f[2 * DB_LOG_FIELDS + 1] = {NULL};
    for (int i = 0; i < 2 * DB_LOG_FIELDS && fields[i] != NULL; i += 2) {
        f[i] = fields[i];
        f[i + 1] = fields[i + 1];
    }
    svc_log(levels[level], msg, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], NULL);
}

/* The listener's notifications: wake this process's waiters of the resource named. */
static void on_notify(void *ctx, const char *channel, long count)
{
    svc_server_wake(ctx, channel, count);
}

/* Wakes of the families' resources (not of in-process gates) go to the other processes. */
static int shared_channel(const char *channel)
{
    return svc_families_shared_channel(svc_families, svc_families_count, channel);
}

static void publish_wake(void *ctx, const char *channel, long n)
{
    if (shared_channel(channel))
        db_listener_publish(ctx, channel, n);
}

/* A wake after a quiet spell may ride in the write's own transaction (db_listener_inline). */
static int publish_inline(void *ctx, const char *channel, long n, char *payload, size_t size)
{
    return shared_channel(channel) && db_listener_inline(ctx, channel, n, payload, size);
}

static void publish_inline_done(void *ctx, int sent)
{
    db_listener_inline_done(ctx, sent);
}

/* Starts cross-process wake-ups (ROWLOCK_NOTIFY) for server. Returns the listener or NULL (off,
 * or it could not start: then long-polls rely on their re-check, as with it off). */
static struct db_listener *notify_start(const struct svc_config *cfg, struct svc_server *server,
                                        struct db_pool *pool)
{
    if (!cfg->notify) {
        svc_log(SVC_LOG_INFO,
                "cross-process wake-ups off (ROWLOCK_NOTIFY=false): long-polls see other "
                "processes' writes at their re-check",
                NULL);
        return NULL;
    }
    const char *url =
        cfg->notify_database_url[0] != '\0' ? cfg->notify_database_url : cfg->database_url;
    struct db_listener_config lc = {.conninfo = url,
                                    .connect_timeout_s = (int)cfg->db_connect_timeout_s,
                                    .coalesce_ms = (int)cfg->notify_coalesce_ms,
                                    .on_notify = on_notify,
                                    .ctx = server,
                                    .own_pool = pool,
                                    .log = db_log};
    struct db_listener *l = db_listener_start(&lc);
    if (l == NULL)
        svc_log(SVC_LOG_ERROR, "cannot start the listener thread: cross-process wake-ups off",
                NULL);
    else {
        svc_server_set_publish(server, publish_wake, l);
        if (cfg->notify_inline)
            svc_server_set_publish_inline(server, publish_inline, publish_inline_done);
    }
    return l;
}

/* Waits up to ms for SIGTERM or SIGINT (blocked in every thread). Returns the signal or 0. */
static int wait_signal(const sigset_t *set, long ms)
{
    struct timespec ts = svc_clock_span_ms(ms);
    for (;;) {
        int sig = ms < 0 ? sigwaitinfo(set, NULL) : sigtimedwait(set, NULL, &ts);
        if (sig > 0)
            return sig;
        /* interrupted (a debugger attaching, say): that is no signal to stop; keep waiting */
        if (ms >= 0 || errno != EINTR)
            return 0;
    }
}

/* Logs what schema management found or did (rep: a verdict that is not a refusal). */
static void log_schema_report(const struct db_schema_report *rep)
{
    char found[16], version[16], applied[16], waited[32], serves[16];
    snprintf(found, sizeof(found), "%d", rep->found);
    snprintf(version, sizeof(version), "%d", rep->version);
    snprintf(applied, sizeof(applied), "%d", rep->applied);
    snprintf(waited, sizeof(waited), "%ld", rep->waited_ms);
    snprintf(serves, sizeof(serves), "%d", rep->serves_from);
    if (rep->waited_ms > 0)
        svc_log(SVC_LOG_INFO, "waited for another process holding the schema lock",
                SVC_NUM("waited_ms"), waited, NULL);
    if (rep->adopted)
        svc_log(SVC_LOG_INFO, "database from the release before migrations adopted",
                SVC_NUM("baseline_version"), found, NULL);
    if (rep->verdict == DB_SCHEMA_CREATED)
        svc_log(SVC_LOG_INFO, "schema baseline applied", SVC_NUM("schema_version"), version,
                SVC_NUM("migrations"), applied, NULL);
    else if (rep->verdict == DB_SCHEMA_MIGRATED)
        svc_log(SVC_LOG_INFO, "schema migrated", SVC_NUM("from_version"), found,
                SVC_NUM("schema_version"), version, SVC_NUM("migrations"), applied, NULL);
    else if (rep->verdict == DB_SCHEMA_NEWER)
        svc_log(SVC_LOG_WARN, "database schema is newer than this build and declares it serves it",
                SVC_NUM("schema_version"), version, SVC_NUM("serves_from"), serves, NULL);
    else
        svc_log(SVC_LOG_INFO, "schema current", SVC_NUM("schema_version"), version, NULL);
}

static const char *schema_refusal(enum db_schema_verdict v)
{
    switch (v) {
    case DB_SCHEMA_PENDING:
        return "schema migrations pending";
    case DB_SCHEMA_TOO_NEW:
        return "database schema is newer than this build";
    case DB_SCHEMA_CHANGED:
        return "an applied schema migration has changed";
    default:
        return "incompatible database schema";
    }
}

/* Applies (--migrate=auto, --migrate-only) or checks (--migrate=check) the schema migrations,
 * waiting for a database that is still coming up. Returns 0 when ready, -1 to exit. */
static int database_ready(struct db_pool *pool, const struct svc_config *cfg,
                          const sigset_t *signals)
{
    if (cfg->migrate == SVC_MIGRATE_OFF && !cfg->migrate_only) {
        svc_log(SVC_LOG_WARN, "schema migrations off: the schema is neither applied nor checked",
                NULL);
        return 0;
    }
    enum db_migrate_mode mode = cfg->migrate == SVC_MIGRATE_CHECK && !cfg->migrate_only
                                    ? DB_MIGRATE_CHECK
                                    : DB_MIGRATE_AUTO;
    double deadline = svc_now() + (double)cfg->db_startup_wait_s;
    char applied_by[128]; /* recorded with each migration this process applies */
    snprintf(applied_by, sizeof(applied_by), "rowlock %s (commit %s)", svc_version, svc_commit);
    for (int attempt = 1;; attempt++) {
        struct db_error err = {{0}, {0}};
        struct db_schema_report rep;
        long left_ms = (long)((deadline - svc_now()) * 1000.0);
        enum db_status st =
            db_schema_migrate(pool, mode, applied_by, left_ms > 1000 ? left_ms : 1000, &rep, &err);
        if (st == DB_OK && db_schema_refused(rep.verdict)) {
            svc_log(SVC_LOG_ERROR, schema_refusal(rep.verdict), "detail", rep.detail, NULL);
            return -1;
        }
        if (st == DB_OK) {
            log_schema_report(&rep);
            return 0;
        }
        if (st == DB_ERR_HARD) {
            svc_log(SVC_LOG_ERROR, "cannot apply the schema migrations", "sqlstate", err.sqlstate,
                    "detail", err.message, NULL);
            return -1;
        }
        char n[16];
        snprintf(n, sizeof(n), "%d", attempt);
        if (svc_now() >= deadline) {
            svc_log(SVC_LOG_ERROR, "database did not become reachable", SVC_NUM("attempts"), n,
                    "detail", err.message, NULL);
            return -1;
        }
        svc_log(SVC_LOG_WARN, "waiting for the database", SVC_NUM("attempt"), n, "detail",
                err.message, NULL);
        if (wait_signal(signals, 1000) != 0)
            return -1;
    }
}

/* Raises the soft limit on open files toward the hard one so that the connection limit can be
 * reached (a soft limit of 1024 is common); warns when even the hard limit is too low. */
static void raise_fd_limit(long connection_limit, long pool_size)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    rlim_t want = (rlim_t)(connection_limit + pool_size + 64);
    if (rl.rlim_cur < want && rl.rlim_cur != RLIM_INFINITY) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want && rl.rlim_cur != RLIM_INFINITY) {
        char have[32], need[32];
        snprintf(have, sizeof(have), "%llu", (unsigned long long)rl.rlim_cur);
        snprintf(need, sizeof(need), "%llu", (unsigned long long)want);
        svc_log(SVC_LOG_WARN,
                "the open-files limit is below ROWLOCK_CONNECTION_LIMIT: connections past it "
                "fail to be accepted (raise LimitNOFILE / ulimit -n)",
                SVC_NUM("limit"), have, SVC_NUM("needed"), need, NULL);
    }
}

/* Logs what svc_config_warnings finds (unknown ROWLOCK_* variables, a pool below the workers). */
static void log_config_warnings(const struct svc_config *cfg)
{
    char *text = NULL, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return;
    svc_config_warnings(cfg, environ, f);
    fclose(f);
    for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save))
        svc_log(SVC_LOG_WARN, line, NULL);
    free(text);
}

/* One janitor thread for each family with a janitor pass (at most n). */
static void start_janitors(struct svc_app *app, struct svc_janitor **janitors, size_t n)
{
    for (size_t f = 0, j = 0; f < svc_families_count && j < n; f++)
        if (svc_families[f]->janitor_pass != NULL)
            janitors[j++] = svc_janitor_start(svc_families[f]->name,
                                              svc_families[f]->janitor_interval_ms > 0
                                                  ? svc_families[f]->janitor_interval_ms
                                                  : app->config->janitor_interval_ms,
                                              svc_families[f]->janitor_pass, app);
}

/* Stops them after their pass in progress. */
static void stop_janitors(struct svc_janitor **janitors, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        svc_janitor_stop(janitors[j]);
        janitors[j] = NULL;
    }
}

/* rowlock --version: what this build is, without configuration or database. */
static int print_version(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0) {
            printf("rowlock %s (commit %s, schema version %d)\n", svc_version, svc_commit,
                   DB_SCHEMA_VERSION);
            return 1;
        }
    }
    return 0;
}

/* What a running process holds, released in reverse by teardown. */
struct process {
    struct svc_config cfg;
    sigset_t signals, serving; /* SIGTERM and SIGINT; those and SIGHUP */
    struct svc_auth *auth;
    struct svc_tls *tls; /* NULL: plain HTTP */
    struct db_pool *pool;
    struct svc_app app;
    struct svc_route *routes;
    size_t nroutes, started; /* families started */
    struct svc_server *server;
    struct db_listener *listener;
    struct svc_janitor *janitors[16];
};

/* Log level, warnings, signals (blocked in every thread; waited for by the main thread) and the
 * open-files limit. 0, or the exit status. */
static int setup(struct process *p)
{
    svc_log_set_level((enum svc_log_level)p->cfg.log_level);
    if (p->cfg.log_level_file[0] != '\0') {
        char why[512];
        if (svc_level_file_apply(p->cfg.log_level_file, why, sizeof(why)) != 0) {
            fprintf(stderr, "rowlock: %s\n", why);
            return 2;
        }
    }
    log_config_warnings(&p->cfg);
    sigemptyset(&p->signals);
    sigaddset(&p->signals, SIGTERM);
    sigaddset(&p->signals, SIGINT);
    /* SIGHUP (reload) is blocked from the start too: one that comes during startup waits */
    p->serving = p->signals;
    sigaddset(&p->serving, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &p->serving, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(p->cfg.connection_limit, p->cfg.pool_size);
    return 0;
}

/* The bearer tokens (ROWLOCK_TOKENS_FILE), or running open without them. 0, or 2 to exit. */
static int load_tokens(struct process *p)
{
    if (p->cfg.tokens_file[0] == '\0') {
        svc_log(SVC_LOG_WARN,
                "RUNNING OPEN: no tokens file (ROWLOCK_TOKENS_FILE), every route accepts requests "
                "without a bearer token",
                NULL);
        return 0;
    }
    p->auth = svc_auth_load(p->cfg.tokens_file, stderr);
    if (p->auth == NULL)
        return 2;
    char n[16];
    snprintf(n, sizeof(n), "%zu", svc_auth_count(p->auth));
    svc_log(SVC_LOG_INFO, "bearer tokens loaded", SVC_NUM("tokens"), n, NULL);
    return 0;
}

/* The listener's certificate and key (ROWLOCK_TLS_CERT_FILE, ROWLOCK_TLS_KEY_FILE), checked
 * before the database is touched; or plain HTTP without them. 0, or 2 to exit. */
static int load_tls(struct process *p)
{
    if (p->cfg.tls_cert_file[0] == '\0')
        return 0;
    char why[1024];
    p->tls = svc_tls_load(p->cfg.tls_cert_file, p->cfg.tls_key_file, why, sizeof(why));
    if (p->tls != NULL)
        return 0;
    svc_log(SVC_LOG_ERROR, "cannot serve HTTPS with this certificate and key", "detail", why, NULL);
    return 2;
}

static struct db_pool *open_pool(const struct svc_config *cfg)
{
    struct db_pool_config pc = {
        .conninfo = cfg->database_url,
        .size = (int)cfg->pool_size,
        .acquire_timeout_ms = (int)cfg->pool_acquire_timeout_ms,
        .statement_timeout_ms = (int)cfg->statement_timeout_ms,
        .connect_timeout_s = (int)cfg->db_connect_timeout_s,
        .deadline_ms = (int)cfg->db_deadline_ms,
        .statement_cache = (int)cfg->db_statement_cache,
        .log = db_log,
    };
    return db_pool_create(&pc);
}

/* The families started (routes, problem codes, metrics, init), the server listening, the
 * listener and the janitors running. 0, or -1 (logged). */
static int serve(struct process *p)
{
    p->app = (struct svc_app){.config = &p->cfg,
                              .pool = p->pool,
                              .auth = p->auth,
                              .started_at = time(NULL),
                              .families = svc_families,
                              .nfamilies = svc_families_count};
    char why[256];
    if (svc_families_check(svc_families, svc_families_count, why, sizeof(why)) != 0) {
        svc_log(SVC_LOG_ERROR, "a family's descriptor is incomplete", "detail", why, NULL);
        return -1;
    }
    p->routes = svc_families_routes(svc_families, svc_families_count, &p->nroutes);
    svc_metrics_set_series_limit(p->cfg.metrics_max_resources);
    if (p->routes == NULL ||
        svc_families_register_problems(svc_families, svc_families_count) != 0 ||
        svc_metrics_init(p->routes, p->nroutes) != 0)
        return -1;
    for (; p->started < svc_families_count; p->started++) {
        const struct svc_family *f = svc_families[p->started];
        if (f->init != NULL && f->init(&p->app) != 0) {
            svc_log(SVC_LOG_ERROR, "a family could not start", "family", f->name, NULL);
            return -1;
        }
    }
    p->server = svc_server_start(&p->cfg, p->routes, p->nroutes, p->auth, &p->app);
    if (p->server == NULL)
        return -1;
    p->app.server = p->server;
    p->listener = notify_start(&p->cfg, p->server, p->pool);
    p->app.listener = p->listener;
    start_janitors(&p->app, p->janitors, sizeof(p->janitors) / sizeof(p->janitors[0]));
    char port[16], threads[16];
    snprintf(port, sizeof(port), "%u", svc_server_port(p->server));
    snprintf(threads, sizeof(threads), "%ld", p->cfg.threads);
    enum svc_reach reach = svc_listen_reach(p->cfg.listen_address);
    /* the warning goes before "listening", the line that says startup is over */
    if (reach != SVC_REACH_LOOPBACK && p->auth == NULL)
        svc_log(SVC_LOG_WARN,
                "OPEN TO THE NETWORK: listening beyond loopback with no tokens file; whoever "
                "reaches this address may do anything (set ROWLOCK_TOKENS_FILE, or listen on "
                "127.0.0.1)",
                "address", p->cfg.listen_address, NULL);
    svc_log(SVC_LOG_INFO, "listening", "address", p->cfg.listen_address, "reach",
            svc_listen_reach_name(reach), SVC_NUM("port"), port, "scheme",
            p->tls != NULL ? "https" : "http", SVC_NUM("threads"), threads, NULL);
    return 0;
}

/* After SIGTERM or SIGINT: no new connection, janitors and listener stopped, requests in flight
 * given ROWLOCK_DRAIN_TIMEOUT_S to finish. */
static void drain(struct process *p, int sig)
{
    svc_notify("STOPPING=1\nSTATUS=draining");
    svc_server_quiesce(p->server); /* no new connection from here on: then say so */
    char inflight[32];
    snprintf(inflight, sizeof(inflight), "%ld", svc_server_in_flight(p->server));
    svc_log(SVC_LOG_INFO, "draining", "signal", sig == SIGINT ? "SIGINT" : "SIGTERM",
            SVC_NUM("in_flight"), inflight, NULL);
    stop_janitors(p->janitors, sizeof(p->janitors) / sizeof(p->janitors[0]));
    db_listener_stop(p->listener); /* no more wakes from it; freed once no request can publish */
    int cut = svc_server_shutdown(p->server, (int)p->cfg.drain_timeout_s);
    p->server = NULL;
    snprintf(inflight, sizeof(inflight), "%d", cut);
    svc_log(SVC_LOG_INFO, "stopped", SVC_NUM("requests_cut_short"), inflight, NULL);
}

/* Releases whatever p holds, whatever stage it reached. */
static void teardown(struct process *p)
{
    stop_janitors(p->janitors, sizeof(p->janitors) / sizeof(p->janitors[0]));
    db_listener_stop(p->listener);
    svc_server_shutdown(p->server, 0);
    db_listener_free(p->listener);
    while (p->started > 0) /* the families started, last first, once no request runs */
        if (svc_families[--p->started]->fini != NULL)
            svc_families[p->started]->fini();
    svc_metrics_shutdown();
    free(p->routes);
    db_pool_destroy(p->pool);
    svc_tls_free(p->tls); /* the daemon has stopped: no handshake can use it */
    svc_auth_free(p->auth);
    svc_config_free(&p->cfg);
}

int main(int argc, char **argv)
{
    if (print_version(argc, argv))
        return 0;
    if (svc_healthcheck_wanted(argc, argv))
        return svc_healthcheck_main(argc, argv, stdout, stderr); /* no config, no database */
    static struct process p; /* zeroed: teardown releases only what was taken */
    enum svc_config_result cr = svc_config_load(&p.cfg, argc, argv, env_lookup, stdout, stderr);
    if (cr == SVC_CONFIG_EXIT_OK)
        return 0;
    if (cr == SVC_CONFIG_INVALID)
        return 2;
    int rc = setup(&p);
    if (rc == 0)
        rc = load_tokens(&p);
    if (rc == 0)
        rc = load_tls(&p);
    if (rc == 0) {
        p.pool = open_pool(&p.cfg);
        rc = p.pool == NULL || database_ready(p.pool, &p.cfg, &p.signals) != 0 ? 1 : 0;
    }
    if (rc == 0 && p.cfg.migrate_only) {
        svc_log(SVC_LOG_INFO, "schema migrations done; exiting (--migrate-only)", NULL);
    } else if (rc == 0 && serve(&p) != 0) {
        rc = 1;
    } else if (rc == 0) {
        svc_notify("READY=1\nSTATUS=serving"); /* schema checked, socket listening */
        drain(&p, svc_process_wait(&p.serving, &p.cfg, p.auth, p.tls));
    }
    teardown(&p);
    return rc;
}
