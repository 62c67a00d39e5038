/* Process configuration: one declarative table of keys (environment variable, flag, type,
 * default, bounds, help) drives parsing, validation, --help and the README table.
 * Owns parsing only; what each value does belongs to the code that reads it. */
#ifndef SVC_CONFIG_H
#define SVC_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

enum svc_log_level { SVC_LOG_DEBUG, SVC_LOG_INFO, SVC_LOG_WARN, SVC_LOG_ERROR };
/* --migrate: apply pending schema migrations, only check them, or leave the schema alone */
enum svc_migrate_mode { SVC_MIGRATE_AUTO, SVC_MIGRATE_CHECK, SVC_MIGRATE_OFF };

struct svc_config {
    char *database_url;
    char *listen_address;
    long port;
    char *tls_cert_file; /* "": plain HTTP */
    char *tls_key_file;
    long threads;
    long workers;
    long pool_size;
    long pool_acquire_timeout_ms;
    long statement_timeout_ms;
    long db_statement_cache;
    long db_deadline_ms; /* 0 in the table: statement_timeout_ms + 1000 after loading */
    long db_connect_timeout_s;
    long db_startup_wait_s;
    long migrate; /* enum svc_migrate_mode */
    bool migrate_only;
    long body_limit;
    long response_budget;
    long url_limit;
    long header_limit;
    long json_max_depth;
    long connection_timeout_s;
    long request_timeout_s;
    long connection_limit;
    long per_ip_connection_limit;
    long drain_timeout_s;
    long poll_interval_ms;
    bool notify;               /* cross-process wake-ups through LISTEN/NOTIFY */
    char *notify_database_url; /* "": database_url */
    long notify_coalesce_ms;
    bool notify_inline; /* a quiet queue's enqueue notifies inside its transaction */
    long max_wait_s;
    long metrics_max_resources;
    long metrics_sync_ms; /* slower per-queue gauges are served from the janitor's last count */
    long janitor_interval_ms;
    long janitor_batch;
    long key_writers;
    char *tokens_file;
    long rate_limit;      /* requests a second a token may make; 0: none */
    long rate_burst;      /* requests at once above the rate */
    long long_poll_limit; /* long-polls a token may have at once; 0: none */
    bool open_ops;
    long log_level; /* enum svc_log_level */
    char *log_level_file;
};

enum svc_config_result { SVC_CONFIG_OK, SVC_CONFIG_EXIT_OK, SVC_CONFIG_INVALID };

/* Looks up an environment variable; getenv in production, a table in unit tests. */
typedef const char *(*svc_getenv_fn)(const char *name);

/* Fills cfg from defaults, then environment, then flags (later wins). On --help or
 * --config-markdown prints to out and returns SVC_CONFIG_EXIT_OK. On an invalid value writes a
 * one-line message naming the key, the value and the rule to err and returns SVC_CONFIG_INVALID.
 * Strings in cfg are owned by cfg: release them with svc_config_free. */
enum svc_config_result svc_config_load(struct svc_config *cfg, int argc, char **argv,
                                       svc_getenv_fn env, FILE *out, FILE *err);
void svc_config_free(struct svc_config *cfg);
/* Writes one line per doubtful setting to err: a ROWLOCK_* variable of environ_ that no setting
 * reads (a typo; ROWLOCK_TEST_* belong to the tests), a pool smaller than the worker count.
 * Returns how many lines it wrote. Nothing here stops the start. */
int svc_config_warnings(const struct svc_config *cfg, char *const *environ_, FILE *err);
/* Name of a log level ("info"), for logs. */
const char *svc_log_level_name(long level);
/* The level named word ("warn"), or -1. */
int svc_log_level_parse(const char *word);

#endif
