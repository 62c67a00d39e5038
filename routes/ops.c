/* The operations family: /healthz (process alive), /readyz (database reachable, schema current,
 * commits completing), /metrics (Prometheus text: the process's series, then each family's) and
 * /openapi.json (the embedded document). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "db/listener.h"
#include "db/pool.h"
#include "db/schema.h"
#include "db/tx.h"
#include "db/upkeep.h"
#include "routes/routes.h"
#include "service/app.h"
#include "service/log.h"
#include "service/metrics.h"
#include "service/openapi.h"
#include "service/tls.h"
#include "service/version.h"

enum ops_problem { OPS_PC_SCHEMA_NOT_READY, OPS_PC_COUNT };
static const struct svc_problem_info ops_problems[OPS_PC_COUNT] = {
    [OPS_PC_SCHEMA_NOT_READY] = {"schema_not_ready", 503, "Database schema not ready"},
};
#define OPS_P(name) (&ops_problems[OPS_PC_##name])

#ifndef ROWLOCK_VERSION
#define ROWLOCK_VERSION "dev"
#endif

static enum svc_outcome route_healthz(struct svc_request *req)
{
    static const char ok[] = "{\"status\":\"ok\"}";
    return svc_reply_static(req, 200, "application/json", ok, sizeof(ok) - 1);
}

static enum svc_outcome route_readyz(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    struct db_error err = {{0}, {0}};
    int version = 0, serves_from = 0;
    enum db_status st = db_schema_ready(app->pool, &version, &serves_from, &err);
    if (st == DB_ERR_OUTCOME_UNKNOWN) /* the deadline cut the probe's COMMIT */
        return svc_reply_problem_ext(req, ROUTE_P(DATABASE_UNAVAILABLE), route_sqlstate_ext(&err),
                                     "a probe transaction did not commit within the deadline of "
                                     "%d ms (a synchronous standby not answering?)",
                                     db_pool_deadline_ms(app->pool));
    if (st != DB_OK) {
        if (st != DB_ERR_HARD)
            return route_db_problem(req, st, &err);
        svc_log(SVC_LOG_WARN, "cannot read the schema version", "request_id", svc_req_id(req),
                "sqlstate", err.sqlstate, "detail", err.message, NULL);
        return svc_reply_problem_ext(req, OPS_P(SCHEMA_NOT_READY), route_sqlstate_ext(&err),
                                     "cannot read the schema version; see the log for request %s",
                                     svc_req_id(req));
    }
    if (!db_schema_serves(version, serves_from))
        return svc_reply_problem(req, OPS_P(SCHEMA_NOT_READY),
                                 "the database holds schema version %d and serves builds of "
                                 "version %d and later; this build has version %d",
                                 version, serves_from, DB_SCHEMA_VERSION);
    /* schema_version: the database's; build: what this process is (rowlock --version);
     * wake_ups: a listener that is down degrades long-polls, it does not make the process unready
     */
    struct db_listener *listener = app->listener;
    struct db_listener_stats ls;
    db_listener_get_stats(listener, &ls);
    const char *wake_ups = listener == NULL ? "off" : ls.up ? "cross_process" : "degraded";
    return svc_reply_json(req, 200,
                          json_pack("{s:s, s:i, s:{s:s, s:s, s:i}, s:s}", "status", "ready",
                                    "schema_version", version, "build", "version", svc_version,
                                    "commit", svc_commit, "schema_version", DB_SCHEMA_VERSION,
                                    "wake_ups", wake_ups));
}

/* A family with one unlabelled sample. */
struct scalar {
    const char *name, *type, *help;
    double value;
};

static void render_scalars(struct svc_buf *b, const struct scalar *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        svc_metrics_family(b, rows[i].name, rows[i].type, rows[i].help);
        svc_metrics_sample(b, rows[i].name, NULL, rows[i].value);
    }
}

/* The pool and the prepared-statement cache of its connections (ROWLOCK_DB_STATEMENT_CACHE). */
static void render_pool(struct svc_buf *b, struct db_pool *pool)
{
    struct db_pool_stats ps;
    db_pool_get_stats(pool, &ps);
    const struct scalar rows[] = {
        {"rowlock_db_pool_size", "gauge", "Connections the pool may hold", ps.size},
        {"rowlock_db_pool_in_use", "gauge", "Connections lent out now", ps.in_use},
        {"rowlock_db_pool_connected", "gauge", "Connections open now", ps.connected},
        {"rowlock_db_pool_acquires_total", "counter", "Connection acquires", (double)ps.acquires},
        {"rowlock_db_pool_acquire_waits_total", "counter",
         "Acquires that found no free connection and waited", (double)ps.waits},
        {"rowlock_db_pool_acquire_timeouts_total", "counter",
         "Acquires that gave up after the acquire timeout (answered 503)", (double)ps.timeouts},
        {"rowlock_db_pool_connects_total", "counter", "Connections opened, first and reopened",
         (double)ps.connects},
        {"rowlock_db_pool_connect_failures_total", "counter", "Failed connection attempts",
         (double)ps.connect_failures},
        {"rowlock_db_pool_stale_total", "counter",
         "Idle connections found closed by the server when acquired (reopened before use)",
         (double)ps.stale},
        {"rowlock_db_pool_flushes_total", "counter",
         "Pool flushes: every idle connection reopened after a connection-level failure",
         (double)ps.flushes},
        {"rowlock_db_deadline_cuts_total", "counter",
         "Connections closed because a request passed ROWLOCK_DB_DEADLINE_MS in the database",
         (double)ps.deadlines},
        {"rowlock_db_pool_read_only_total", "counter",
         "Connections closed because their server takes no writes (a standby, a demoted or "
         "read-only primary)",
         (double)ps.read_only},
        {"rowlock_db_statement_cache_size", "gauge",
         "ROWLOCK_DB_STATEMENT_CACHE: prepared statements a connection keeps at most",
         ps.statement_cache},
        {"rowlock_db_statement_evictions_total", "counter",
         "Prepared statements deallocated to make room for another (a connection's cache full)",
         (double)ps.statement_evictions},
        {"rowlock_db_statement_cache_retired_total", "counter",
         "Connections reopened after four times ROWLOCK_DB_STATEMENT_CACHE statements evicted or "
         "new (a backend keeps the catalog entries of every table it touched: many topics' tables)",
         (double)ps.retired},
    };
    render_scalars(b, rows, sizeof(rows) / sizeof(rows[0]));
}

static void render_notify(struct svc_buf *b, struct svc_app *app)
{
    struct db_listener *listener = app->listener;
    struct svc_server *server = app->server;
    struct db_listener_stats ls;
    db_listener_get_stats(listener, &ls);
    const struct scalar rows[] = {
        {"rowlock_notify_enabled", "gauge", "1 when ROWLOCK_NOTIFY is on", listener != NULL},
        {"rowlock_notify_listener_up", "gauge",
         "1 when the LISTEN connection is up (0 with ROWLOCK_NOTIFY on: cross-process wake-ups "
         "degraded to the re-check)",
         ls.up},
        {"rowlock_notify_received_total", "counter",
         "Wake-ups received from other processes (one per resource named: a NOTIFY may name "
         "many)",
         (double)ls.received},
        {"rowlock_notify_sent_total", "counter",
         "Wake-ups sent (one per distinct resource per batch, packed into as few NOTIFYs as fit)",
         (double)ls.sent},
        {"rowlock_notify_inline_total", "counter",
         "Wake-up notifications an enqueue after a quiet spell sent inside its own transaction",
         (double)ls.inlined},
        {"rowlock_notify_dropped_total", "counter",
         "Wake-ups not announced (listener down or backlog full): others see them at re-check",
         (double)ls.dropped},
        {"rowlock_notify_connects_total", "counter",
         "LISTEN connections made: the first and every reconnect", (double)ls.connects},
        {"rowlock_notify_failures_total", "counter",
         "Failed LISTEN connection attempts and failed sends", (double)ls.failures},
        {"rowlock_long_poll_wakes_total", "counter",
         "Long-polls resumed by a write to what they wait on, through this process or another",
         server ? (double)svc_server_woken(server) : 0},
        {"rowlock_long_poll_rechecks_total", "counter",
         "Long-polls resumed by their periodic re-check (ROWLOCK_POLL_INTERVAL_MS), the fallback "
         "for wake-ups",
         server ? (double)svc_server_rechecks(server) : 0},
    };
    render_scalars(b, rows, sizeof(rows) / sizeof(rows[0]));
}

static void render_tx(struct svc_buf *b)
{
    struct db_tx_stats ts;
    db_tx_get_stats(&ts);
    svc_metrics_family(b, "rowlock_db_transactions_total", "counter",
                       "Database transactions by outcome");
    svc_metrics_sample(b, "rowlock_db_transactions_total", "outcome=\"commit\"",
                       (double)ts.commits);
    svc_metrics_sample(b, "rowlock_db_transactions_total", "outcome=\"rollback\"",
                       (double)ts.rollbacks);
    svc_metrics_family(b, "rowlock_db_transaction_retries_total", "counter",
                       "Transaction attempts repeated after a serialization failure or deadlock");
    svc_metrics_sample(b, "rowlock_db_transaction_retries_total", NULL, (double)ts.retries);
    svc_metrics_family(b, "rowlock_db_transaction_redos_total", "counter",
                       "Transaction attempts repeated because what the workflow ran on changed "
                       "under it (a stale id hint, an offset a reader recorded as a hole), not "
                       "after a database conflict");
    svc_metrics_sample(b, "rowlock_db_transaction_redos_total", NULL, (double)ts.redos);
    svc_metrics_family(b, "rowlock_db_transaction_failures_total", "counter",
                       "Transactions that ended in a database error");
    svc_metrics_sample(b, "rowlock_db_transaction_failures_total", NULL, (double)ts.failures);
}

/* What follows from each family of resources' descriptor (service/family.h): how many it has,
 * how many have no series of their own (past ROWLOCK_METRICS_MAX_RESOURCES) and how long its most
 * overdue upkeep has waited, every family's from one statement whatever their number. */
static void render_resources(struct svc_buf *b, struct svc_app *app)
{
    struct db_resources_summary s;
    struct db_error err;
    if (db_resources_summary(app->pool, &s, &err) != DB_OK)
        return; /* the database is unreachable: the families are left out, as their values are */
    double limit = (double)app->config->metrics_max_resources;
    for (size_t i = 0; i < app->nfamilies; i++) {
        const struct svc_family *f = app->families[i];
        if (f->resource == NULL)
            continue;
        const struct db_upkeep_family *u = db_resources_family(&s, f->upkeep->family);
        double n = u ? (double)u->resources : 0, due = u ? u->due_s : 0;
        char name[128], help[256];
        snprintf(name, sizeof(name), "rowlock_%s", f->name);
        snprintf(help, sizeof(help), "How many %s there are", f->name);
        svc_metrics_family(b, name, "gauge", help);
        svc_metrics_sample(b, name, NULL, n);
        snprintf(name, sizeof(name), "rowlock_%s_metrics_omitted", f->resource);
        snprintf(help, sizeof(help),
                 "How many %s have no per-%s gauges in this scrape (past "
                 "ROWLOCK_METRICS_MAX_RESOURCES; the first by name have them)",
                 f->name, f->resource);
        svc_metrics_family(b, name, "gauge", help);
        svc_metrics_sample(b, name, NULL, n > limit ? n - limit : 0);
        snprintf(name, sizeof(name), "rowlock_%s_upkeep_due_seconds", f->resource);
        snprintf(help, sizeof(help),
                 "How long the %s whose janitor work is most overdue has waited (0: none due; "
                 "more than a few janitor intervals: the janitors do not keep up)",
                 f->resource);
        svc_metrics_family(b, name, "gauge", help);
        svc_metrics_sample(b, name, NULL, due);
    }
}

static enum svc_outcome route_metrics(struct svc_request *req)
{
    struct svc_app *app = svc_req_app(req);
    struct svc_buf b;
    svc_buf_init(&b, 64 * 1024 * 1024);
    svc_metrics_render_http(&b);
    render_pool(&b, app->pool);
    render_tx(&b);
    render_notify(&b, app);
    render_resources(&b, app);
    for (size_t f = 0; f < app->nfamilies; f++)
        if (app->families[f]->render_metrics != NULL)
            app->families[f]->render_metrics(&b, app);
    svc_metrics_render_vecs(&b);
    svc_metrics_family(&b, "rowlock_http_long_polls_waiting", "gauge",
                       "Requests suspended now: long-polls and head writes queued behind their key "
                       "(no thread or connection held)");
    struct svc_server *server = app->server; /* one atomic read */
    svc_metrics_sample(&b, "rowlock_http_long_polls_waiting", NULL,
                       server ? (double)svc_server_waiting(server) : 0);
    svc_metrics_family(&b, "rowlock_http_requests_in_flight", "gauge",
                       "Requests begun and not yet ended (this scrape included): what a SIGTERM "
                       "would wait for");
    svc_metrics_sample(&b, "rowlock_http_requests_in_flight", NULL,
                       server ? (double)svc_server_in_flight(server) : 0);
    if (server != NULL)
        svc_server_render_limits(server, &b);
    svc_metrics_family(&b, "rowlock_http_connection_limit", "gauge",
                       "ROWLOCK_CONNECTION_LIMIT: connections past it are closed at once (each "
                       "waiting long-poll holds one)");
    svc_metrics_sample(&b, "rowlock_http_connection_limit", NULL,
                       (double)app->config->connection_limit);
    double not_after;
    if (svc_tls_not_after(&not_after)) {
        svc_metrics_family(&b, "rowlock_tls_certificate_expiry_timestamp_seconds", "gauge",
                           "End of the validity (notAfter) of the TLS certificate served now, "
                           "since the Unix epoch; a reload on SIGHUP that swaps it moves it");
        svc_metrics_sample(&b, "rowlock_tls_certificate_expiry_timestamp_seconds", NULL, not_after);
    }
    svc_metrics_render_build(&b, DB_SCHEMA_VERSION);
    svc_metrics_render_process(&b);
    svc_metrics_family(&b, "rowlock_process_start_time_seconds", "gauge",
                       "Start time of the process since the Unix epoch");
    svc_metrics_sample(&b, "rowlock_process_start_time_seconds", NULL, (double)app->started_at);
    /* one failed append (out of memory, past the 64 MiB) leaves a family or a series out:
     * a scrape that fails is seen, one that silently lacks series is not */
    if (svc_buf_failed(&b)) {
        svc_buf_free(&b);
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "metrics could not be rendered whole");
    }
    size_t len = 0;
    char *text = svc_buf_steal(&b, &len);
    if (text == NULL)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot render metrics");
    return svc_reply_raw(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static enum svc_outcome route_openapi(struct svc_request *req)
{
    return svc_reply_static(req, 200, "application/json", svc_openapi_json, svc_openapi_json_len);
}

static const struct svc_route ops_routes[] = {
    {"GET", "/healthz", route_healthz, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/readyz", route_readyz, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/metrics", route_metrics, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/openapi.json", route_openapi, SVC_SCOPE_OPS, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_ops_family = {
    .name = "ops",
    .routes = ops_routes,
    .nroutes = sizeof(ops_routes) / sizeof(ops_routes[0]),
    .problems = ops_problems,
    .nproblems = OPS_PC_COUNT,
};
