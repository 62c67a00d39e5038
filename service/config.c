/* The configuration table and its parser (see config.h). Adding a setting means adding one row
 * to config_table; --help, --config-markdown (the README table) and validation follow from it. */
#include "service/config.h"

#include "service/limits.h"
#include "service/listen.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum cfg_type { CFG_STRING, CFG_INT, CFG_BOOL, CFG_LEVEL, CFG_MIGRATE };

struct cfg_key {
    const char *flag; /* --flag; also the key's name */
    const char *env;
    enum cfg_type type;
    const char *def;
    long min, max; /* CFG_INT bounds, inclusive */
    size_t offset;
    const char *help;
};

#define OFF(f) offsetof(struct svc_config, f)

static const struct cfg_key config_table[] = {
    {"database-url", "ROWLOCK_DATABASE_URL", CFG_STRING, "postgresql:///rowlock", 0, 0,
     OFF(database_url), "libpq connection string or URI of the PostgreSQL database"},
    {"listen-address", "ROWLOCK_LISTEN_ADDRESS", CFG_STRING, "0.0.0.0", 0, 0, OFF(listen_address),
     "IPv4 or IPv6 address to listen on (:: listens on every IPv6 and IPv4 address)"},
    {"port", "ROWLOCK_PORT", CFG_INT, "8080", 0, 65535, OFF(port),
     "TCP port to listen on (0 picks a free port, logged at startup)"},
    {"tls-cert-file", "ROWLOCK_TLS_CERT_FILE", CFG_STRING, "", 0, 0, OFF(tls_cert_file),
     "PEM file of the server's certificate, then its intermediates: the listener speaks HTTPS "
     "(TLS 1.2 and 1.3, ECDHE with AES-GCM or ChaCha20-Poly1305) and no plain HTTP; read again "
     "on SIGHUP; empty: plain HTTP (behind a proxy that ends TLS)"},
    {"tls-key-file", "ROWLOCK_TLS_KEY_FILE", CFG_STRING, "", 0, 0, OFF(tls_key_file),
     "PEM file of that certificate's private key (not encrypted; keep it 0600), set together "
     "with --tls-cert-file; read again on SIGHUP"},
    {"threads", "ROWLOCK_THREADS", CFG_INT, "4", 1, 256, OFF(threads),
     "HTTP I/O threads (epoll thread pool); handlers run on the workers"},
    {"workers", "ROWLOCK_WORKERS", CFG_INT, "16", 1, 1000, OFF(workers),
     "handler threads, the only ones that wait on the database"},
    {"pool-size", "ROWLOCK_POOL_SIZE", CFG_INT, "16", 1, 1000, OFF(pool_size),
     "PostgreSQL connections in the pool (keep it at least the worker count)"},
    {"pool-acquire-timeout-ms", "ROWLOCK_POOL_ACQUIRE_TIMEOUT_MS", CFG_INT, "2000", 1, 600000,
     OFF(pool_acquire_timeout_ms), "wait for a free connection before answering 503"},
    {"statement-timeout-ms", "ROWLOCK_STATEMENT_TIMEOUT_MS", CFG_INT, "5000", 1, 3600000,
     OFF(statement_timeout_ms), "statement_timeout set on every connection"},
    {"db-deadline-ms", "ROWLOCK_DB_DEADLINE_MS", CFG_INT, "0", 0, 3600000, OFF(db_deadline_ms),
     "longest a request may hold its database connection, commit included; past it the "
     "connection is closed (never the commit cancelled) and the request answered 503 (0: the "
     "statement timeout plus 1000 ms)"},
    {"db-statement-cache", "ROWLOCK_DB_STATEMENT_CACHE", CFG_INT, "128", 16, 100000,
     OFF(db_statement_cache),
     "prepared statements each database connection keeps (the least recently used is "
     "deallocated to make room; a topic's or ledger's statement is prepared when seen twice, "
     "sent inline the first time; a connection that met four times as many new ones, or "
     "wrote to 64 times as many topics (or a mix of both), is reopened): bounds each backend's "
     "memory however many topics and ledgers"},
    {"db-connect-timeout-s", "ROWLOCK_DB_CONNECT_TIMEOUT_S", CFG_INT, "5", 2, 300,
     OFF(db_connect_timeout_s), "timeout of one connection attempt"},
    {"db-startup-wait-s", "ROWLOCK_DB_STARTUP_WAIT_S", CFG_INT, "60", 0, 3600,
     OFF(db_startup_wait_s), "how long startup waits for the database to come up"},
    {"migrate", "ROWLOCK_MIGRATE", CFG_MIGRATE, "auto", 0, 0, OFF(migrate),
     "schema migrations at startup: auto applies pending ones (one process at a time), check "
     "refuses to start while any is pending, off neither applies nor checks"},
    {"migrate-only", "ROWLOCK_MIGRATE_ONLY", CFG_BOOL, "false", 0, 0, OFF(migrate_only),
     "apply pending schema migrations, then exit 0 without serving (a deploy's migration step)"},
    {"body-limit", "ROWLOCK_BODY_LIMIT", CFG_INT, "1048576", 1024, 1073741824, OFF(body_limit),
     "largest request body in bytes (413 above)"},
    {"response-budget", "ROWLOCK_RESPONSE_BUDGET", CFG_INT, "4194304", 1024, 1073741824,
     OFF(response_budget),
     "bytes of stored values one list, log, claim or event page carries at most; a page stops "
     "there and says where to go on (one larger item is still served alone)"},
    {"url-limit", "ROWLOCK_URL_LIMIT", CFG_INT, "8192", 256, 32768, OFF(url_limit),
     "longest request target in bytes (414 above)"},
    {"header-limit", "ROWLOCK_HEADER_LIMIT", CFG_INT, "16384", 1024, 32768, OFF(header_limit),
     "largest total size of request headers in bytes (431 above)"},
    {"json-max-depth", "ROWLOCK_JSON_MAX_DEPTH", CFG_INT, "32", 2, 1000, OFF(json_max_depth),
     "deepest nesting of arrays and objects accepted in a JSON body"},
    {"connection-timeout-s", "ROWLOCK_CONNECTION_TIMEOUT_S", CFG_INT, "30", 1, 3600,
     OFF(connection_timeout_s), "idle HTTP connections are closed after this"},
    {"request-timeout-s", "ROWLOCK_REQUEST_TIMEOUT_S", CFG_INT, "30", 1, 3600,
     OFF(request_timeout_s),
     "a request must arrive whole (headers and body) within this of its first line, and its "
     "first line within this or the idle timeout, whichever is longer; else the connection is "
     "closed"},
    {"connection-limit", "ROWLOCK_CONNECTION_LIMIT", CFG_INT, "4096", 1, 1000000,
     OFF(connection_limit),
     "most concurrent HTTP connections; one more is closed at once (the open-files limit must "
     "allow them)"},
    {"per-ip-connection-limit", "ROWLOCK_PER_IP_CONNECTION_LIMIT", CFG_INT, "0", 0, 1000000,
     OFF(per_ip_connection_limit),
     "most concurrent HTTP connections from one address (0: no limit of its own, right behind a "
     "load balancer, where every connection comes from one address)"},
    {"drain-timeout-s", "ROWLOCK_DRAIN_TIMEOUT_S", CFG_INT, "30", 0, 3600, OFF(drain_timeout_s),
     "on SIGTERM, how long in-flight requests may take to finish"},
    {"poll-interval-ms", "ROWLOCK_POLL_INTERVAL_MS", CFG_INT, "1000", 10, 60000,
     OFF(poll_interval_ms),
     "long-polls re-check the database this often (for writes from other processes)"},
    {"notify", "ROWLOCK_NOTIFY", CFG_BOOL, "true", 0, 0, OFF(notify),
     "wake long-polls in other rowlock processes at once through LISTEN/NOTIFY (false: they see "
     "writes from other processes at their next re-check)"},
    {"notify-coalesce-ms", "ROWLOCK_NOTIFY_COALESCE_MS", CFG_INT, "2", 0, 1000,
     OFF(notify_coalesce_ms),
     "least time between two batches of wake-up notifications: the first after a quiet spell goes "
     "at once, the writes of the next ones are announced together"},
    {"notify-inline", "ROWLOCK_NOTIFY_INLINE", CFG_BOOL, "true", 0, 0, OFF(notify_inline),
     "true: an enqueue after a quiet spell sends its notification inside its own transaction "
     "(0.1-0.2 ms sooner to a claimer in another process; it holds PostgreSQL's database-wide "
     "NOTIFY lock through its COMMIT's flush), unless the database has a synchronous standby "
     "(synchronous_standby_names); false: every notification goes in the batches, after the "
     "commit"},
    {"notify-database-url", "ROWLOCK_NOTIFY_DATABASE_URL", CFG_STRING, "", 0, 0,
     OFF(notify_database_url),
     "connection string of the listening connection, when it must bypass a transaction-mode "
     "pooler (PgBouncer) that cannot LISTEN; empty: --database-url"},
    {"max-wait-s", "ROWLOCK_MAX_WAIT_S", CFG_INT, "30", 0, 300, OFF(max_wait_s),
     "longest wait a long-poll may ask for"},
    {"metrics-max-resources", "ROWLOCK_METRICS_MAX_RESOURCES", CFG_INT, "100", 0, 1000000,
     OFF(metrics_max_resources),
     "topics, queues and ledgers (each, the first by name) with series of their own in /metrics; "
     "the totals cover all of them"},
    {"metrics-sync-ms", "ROWLOCK_METRICS_SYNC_MS", CFG_INT, "25", 0, 60000, OFF(metrics_sync_ms),
     "a scrape counts the per-queue job gauges and the per-ledger gauges itself while the last "
     "count took less, and cuts its count off after that long; after a slower or cut one (the "
     "count grows with the jobs kept, and with the ledgers' tables a backend has to open) it "
     "answers with the last count, and the janitor counts anew once a scrape asked "
     "(rowlock_queue_gauges_age_seconds, rowlock_ledger_gauges_age_seconds)"},
    {"janitor-interval-ms", "ROWLOCK_JANITOR_INTERVAL_MS", CFG_INT, "5000", 10, 3600000,
     OFF(janitor_interval_ms), "pause between janitor passes"},
    {"janitor-batch", "ROWLOCK_JANITOR_BATCH", CFG_INT, "1000", 1, 100000, OFF(janitor_batch),
     "rows a janitor pass deletes per topic at most"},
    {"key-writers", "ROWLOCK_KEY_WRITERS", CFG_INT, "2", 0, 1000, OFF(key_writers),
     "head writes of one topic key that may wait on its row lock at once; more queue in the "
     "process (0: no limit)"},
    {"tokens-file", "ROWLOCK_TOKENS_FILE", CFG_STRING, "", 0, 0, OFF(tokens_file),
     "file of bearer tokens, one a line with its scopes: read (every GET), write (produce, "
     "enqueue, heads, consumers, job retry and cancel, ledger writes, firing a schedule now; not "
     "read), work (claims and lease writes, all a worker needs), admin (all of these, and "
     "creating, changing and deleting topics, producers, queues, ledgers and schedules); empty "
     "runs the service open; name=<name> on a line names its token in the log"},
    {"rate-limit", "ROWLOCK_RATE_LIMIT", CFG_INT, "0", 0, SVC_LIMIT_MAX, OFF(rate_limit),
     "requests a second each token may make, refilled continuously (with no tokens file, all "
     "requests together); past it, 429 with Retry-After; each process counts its own; "
     "rate=<n> on a token's line wins; 0: no limit"},
    {"rate-burst", "ROWLOCK_RATE_BURST", CFG_INT, "20", 1, SVC_LIMIT_MAX, OFF(rate_burst),
     "requests a token may make at once (the size of its bucket, refilled at its rate); burst=<n> "
     "on a "
     "token's line wins"},
    {"long-poll-limit", "ROWLOCK_LONG_POLL_LIMIT", CFG_INT, "0", 0, SVC_LIMIT_MAX,
     OFF(long_poll_limit),
     "long-polls (claims, log reads and ledger transactions that ask to wait) each token may have "
     "at once in this process; one more is answered 429; long_polls=<n> on a token's line wins; "
     "0: no cap"},
    {"open-ops", "ROWLOCK_OPEN_OPS", CFG_BOOL, "true", 0, 0, OFF(open_ops),
     "serve /healthz, /readyz, /metrics and /openapi.json without a token"},
    {"log-level", "ROWLOCK_LOG_LEVEL", CFG_LEVEL, "info", 0, 0, OFF(log_level),
     "least severe log level written: debug, info, warn, error"},
    {"log-level-file", "ROWLOCK_LOG_LEVEL_FILE", CFG_STRING, "", 0, 0, OFF(log_level_file),
     "file holding the log level (one word); read at startup and on SIGHUP, it wins over "
     "--log-level, so the level of a running process can change; empty: the level is fixed"},
};

#define CONFIG_KEYS (sizeof(config_table) / sizeof(config_table[0]))

static const char *const level_names[] = {"debug", "info", "warn", "error"};
static const char *const migrate_names[] = {"auto", "check", "off"};

int svc_log_level_parse(const char *word)
{
    for (int i = 0; i <= SVC_LOG_ERROR; i++)
        if (strcmp(word, level_names[i]) == 0)
            return i;
    return -1;
}

const char *svc_log_level_name(long level)
{
    if (level < 0 || level > SVC_LOG_ERROR)
        return "info";
    return level_names[level];
}

static const char *type_name(enum cfg_type t)
{
    switch (t) {
    case CFG_INT:
        return "integer";
    case CFG_BOOL:
        return "boolean";
    case CFG_LEVEL:
        return "level";
    case CFG_MIGRATE:
        return "mode";
    default:
        return "string";
    }
}

/* Stores the index of value among the n words into field (a long). Returns 0, or -1 after
 * writing why to err (name and source say which setting). */
static int config_word(char *field, const char *value, const char *const *words, long n,
                       const char *expected, const char *name, const char *source, FILE *err)
{
    for (long i = 0; i < n; i++) {
        if (strcmp(value, words[i]) == 0) {
            *(long *)field = i;
            return 0;
        }
    }
    fprintf(err, "rowlock: invalid %s %s=\"%s\": expected %s\n", source, name, value, expected);
    return -1;
}

/* Stores value into the field of key k. Returns 0, or -1 after writing why to err. */
static int config_set(struct svc_config *cfg, const struct cfg_key *k, const char *value,
                      const char *source, FILE *err)
{
    char *field = (char *)cfg + k->offset;
    switch (k->type) {
    case CFG_STRING: {
        char *copy = strdup(value);
        if (copy == NULL)
            return -1;
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case CFG_INT: {
        char *end = NULL;
        errno = 0;
        long v = strtol(value, &end, 10);
        int digits = value[0] == '-' ? value[1] >= '0' && value[1] <= '9'
                                     : value[0] >= '0' && value[0] <= '9';
        if (!digits || errno != 0 || *end != '\0' || v < k->min || v > k->max) {
            fprintf(err, "rowlock: invalid %s %s=\"%s\": expected an integer from %ld to %ld\n",
                    source, source[0] == 'f' ? k->flag : k->env, value, k->min, k->max);
            return -1;
        }
        *(long *)field = v;
        return 0;
    }
    case CFG_BOOL:
        if (strcmp(value, "true") == 0 || strcmp(value, "1") == 0 || strcmp(value, "yes") == 0) {
            *(bool *)field = true;
            return 0;
        }
        if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0 || strcmp(value, "no") == 0) {
            *(bool *)field = false;
            return 0;
        }
        fprintf(err, "rowlock: invalid %s %s=\"%s\": expected true or false\n", source,
                source[0] == 'f' ? k->flag : k->env, value);
        return -1;
    case CFG_LEVEL:
        return config_word(field, value, level_names, SVC_LOG_ERROR + 1,
                           "debug, info, warn or error", source[0] == 'f' ? k->flag : k->env,
                           source, err);
    case CFG_MIGRATE:
        return config_word(field, value, migrate_names, SVC_MIGRATE_OFF + 1, "auto, check or off",
                           source[0] == 'f' ? k->flag : k->env, source, err);
    }
    return -1;
}

static void config_print_help(FILE *out)
{
    fprintf(out, "usage: rowlock [--flag=value ...]\n\n"
                 "rowlock serves PostgreSQL concurrency patterns as a REST API.\n"
                 "Every flag can also be set by its environment variable; flags win.\n\n");
    for (size_t i = 0; i < CONFIG_KEYS; i++) {
        const struct cfg_key *k = &config_table[i];
        fprintf(out, "  --%-26s %-32s %s (default: %s)\n", k->flag, k->env, k->help,
                k->def[0] ? k->def : "none");
    }
    fprintf(out, "\n  --help                     this text\n"
                 "  --config-markdown          the table above as Markdown (README)\n"
                 "  --version                  release version, git commit and schema version\n"
                 "  --check-health URL         GET URL (http:// or https://); exit 0 on 200 (a "
                 "container's health check)\n");
}

static void config_print_markdown(FILE *out)
{
    fprintf(out, "| flag | environment | type | default | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < CONFIG_KEYS; i++) {
        const struct cfg_key *k = &config_table[i];
        fprintf(out, "| `--%s` | `%s` | %s | %s%s%s | %s |\n", k->flag, k->env, type_name(k->type),
                k->def[0] ? "`" : "", k->def[0] ? k->def : "none", k->def[0] ? "`" : "", k->help);
    }
}

static const struct cfg_key *config_find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < CONFIG_KEYS; i++)
        if (strlen(config_table[i].flag) == len && strncmp(config_table[i].flag, name, len) == 0)
            return &config_table[i];
    return NULL;
}

/* Applies "--key=value" or "--key value" arguments. Returns 0, or -1 after writing to err. */
static int config_apply_flags(struct svc_config *cfg, int argc, char **argv, FILE *err)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(err, "rowlock: unexpected argument \"%s\" (see --help)\n", arg);
            return -1;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const struct cfg_key *k = config_find_flag(name, len);
        if (k == NULL) {
            fprintf(err, "rowlock: unknown flag \"%s\" (see --help)\n", arg);
            return -1;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (value == NULL && k->type == CFG_BOOL &&
            (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0))
            value = "true"; /* a boolean flag alone (--migrate-only) means true */
        if (value == NULL) {
            if (i + 1 >= argc) {
                fprintf(err, "rowlock: flag --%s needs a value\n", k->flag);
                return -1;
            }
            value = argv[++i];
        }
        if (config_set(cfg, k, value, "flag", err) != 0)
            return -1;
    }
    return 0;
}

enum svc_config_result svc_config_load(struct svc_config *cfg, int argc, char **argv,
                                       svc_getenv_fn env, FILE *out, FILE *err)
{
    memset(cfg, 0, sizeof(*cfg));
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            config_print_help(out);
            return SVC_CONFIG_EXIT_OK;
        }
        if (strcmp(argv[i], "--config-markdown") == 0) {
            config_print_markdown(out);
            return SVC_CONFIG_EXIT_OK;
        }
    }
    for (size_t i = 0; i < CONFIG_KEYS; i++)
        if (config_set(cfg, &config_table[i], config_table[i].def, "default", err) != 0)
            goto invalid;
    for (size_t i = 0; i < CONFIG_KEYS; i++) {
        const char *v = env(config_table[i].env);
        if (v != NULL && config_set(cfg, &config_table[i], v, "environment", err) != 0)
            goto invalid;
    }
    if (config_apply_flags(cfg, argc, argv, err) != 0)
        goto invalid;
    if (!svc_listen_address_valid(cfg->listen_address)) {
        fprintf(err,
                "rowlock: invalid listen-address \"%s\": expected a numeric IPv4 or IPv6 "
                "address (0.0.0.0, ::, 127.0.0.1, ::1)\n",
                cfg->listen_address);
        goto invalid;
    }
    if ((cfg->tls_cert_file[0] == '\0') != (cfg->tls_key_file[0] == '\0')) {
        fprintf(err, "rowlock: --tls-cert-file (ROWLOCK_TLS_CERT_FILE) and --tls-key-file "
                     "(ROWLOCK_TLS_KEY_FILE) go together: set both for HTTPS, or neither for "
                     "plain HTTP\n");
        goto invalid;
    }
    if (cfg->db_deadline_ms == 0)
        cfg->db_deadline_ms = cfg->statement_timeout_ms + 1000;
    if (cfg->per_ip_connection_limit > cfg->connection_limit)
        cfg->per_ip_connection_limit = cfg->connection_limit;
    return SVC_CONFIG_OK;
invalid:
    svc_config_free(cfg);
    return SVC_CONFIG_INVALID;
}

/* True when name is a setting's variable (ROWLOCK_PORT), or a test harness's own (ROWLOCK_TEST_*,
 * read by the tests, never by the service). */
static int env_known(const char *name, size_t len)
{
    if (strncmp(name, "ROWLOCK_TEST_", 13) == 0)
        return 1;
    for (size_t i = 0; i < CONFIG_KEYS; i++)
        if (strlen(config_table[i].env) == len && strncmp(config_table[i].env, name, len) == 0)
            return 1;
    return 0;
}

int svc_config_warnings(const struct svc_config *cfg, char *const *environ_, FILE *err)
{
    int n = 0;
    for (size_t i = 0; environ_ != NULL && environ_[i] != NULL; i++) {
        const char *e = environ_[i];
        size_t len = strcspn(e, "=");
        if (strncmp(e, "ROWLOCK_", 8) == 0 && !env_known(e, len)) {
            fprintf(err, "%.*s is set but no setting reads it (a typo? see --help)\n", (int)len, e);
            n++;
        }
    }
    if (cfg->pool_size < cfg->workers) {
        fprintf(err,
                "ROWLOCK_POOL_SIZE=%ld is below ROWLOCK_WORKERS=%ld: workers beyond the pool wait "
                "for a connection (and answer 503 after the acquire timeout) under load\n",
                cfg->pool_size, cfg->workers);
        n++;
    }
    return n;
}

void svc_config_free(struct svc_config *cfg)
{
    for (size_t i = 0; i < CONFIG_KEYS; i++) {
        if (config_table[i].type != CFG_STRING)
            continue;
        char **field = (char **)((char *)cfg + config_table[i].offset);
        free(*field);
        *field = NULL;
    }
}
