/* Unit tests of service/config.c: svc_config_load with a table standing in for the environment.
 * Defaults, environment values, flags winning over the environment (both --key=value and
 * --key value), every kind of invalid value naming its key on the err stream, and --help /
 * --config-markdown printing every ROWLOCK_* variable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/config.h"

/* Every environment variable of the configuration table, in order. */
static const char *const all_env[] = {
    "ROWLOCK_DATABASE_URL",
    "ROWLOCK_LISTEN_ADDRESS",
    "ROWLOCK_PORT",
    "ROWLOCK_TLS_CERT_FILE",
    "ROWLOCK_TLS_KEY_FILE",
    "ROWLOCK_THREADS",
    "ROWLOCK_WORKERS",
    "ROWLOCK_POOL_SIZE",
    "ROWLOCK_POOL_ACQUIRE_TIMEOUT_MS",
    "ROWLOCK_STATEMENT_TIMEOUT_MS",
    "ROWLOCK_DB_DEADLINE_MS",
    "ROWLOCK_DB_STATEMENT_CACHE",
    "ROWLOCK_DB_CONNECT_TIMEOUT_S",
    "ROWLOCK_DB_STARTUP_WAIT_S",
    "ROWLOCK_MIGRATE",
    "ROWLOCK_MIGRATE_ONLY",
    "ROWLOCK_BODY_LIMIT",
    "ROWLOCK_RESPONSE_BUDGET",
    "ROWLOCK_URL_LIMIT",
    "ROWLOCK_HEADER_LIMIT",
    "ROWLOCK_POLL_INTERVAL_MS",
    "ROWLOCK_NOTIFY",
    "ROWLOCK_NOTIFY_DATABASE_URL",
    "ROWLOCK_NOTIFY_COALESCE_MS",
    "ROWLOCK_NOTIFY_INLINE",
    "ROWLOCK_MAX_WAIT_S",
    "ROWLOCK_METRICS_MAX_RESOURCES",
    "ROWLOCK_METRICS_SYNC_MS",
    "ROWLOCK_JANITOR_INTERVAL_MS",
    "ROWLOCK_JANITOR_BATCH",
    "ROWLOCK_KEY_WRITERS",
    "ROWLOCK_JSON_MAX_DEPTH",
    "ROWLOCK_CONNECTION_TIMEOUT_S",
    "ROWLOCK_REQUEST_TIMEOUT_S",
    "ROWLOCK_CONNECTION_LIMIT",
    "ROWLOCK_PER_IP_CONNECTION_LIMIT",
    "ROWLOCK_DRAIN_TIMEOUT_S",
    "ROWLOCK_TOKENS_FILE",
    "ROWLOCK_RATE_LIMIT",
    "ROWLOCK_RATE_BURST",
    "ROWLOCK_LONG_POLL_LIMIT",
    "ROWLOCK_OPEN_OPS",
    "ROWLOCK_LOG_LEVEL",
    "ROWLOCK_LOG_LEVEL_FILE",
};
#define NENV (sizeof(all_env) / sizeof(all_env[0]))

/* The fake environment: pairs of name and value, ended by a NULL name. Set per test. */
static const char *const *fake_env;

static const char *env_get(const char *name)
{
    for (size_t i = 0; fake_env != NULL && fake_env[i] != NULL; i += 2)
        if (strcmp(fake_env[i], name) == 0)
            return fake_env[i + 1];
    return NULL;
}

/* One load with captured out and err text (free both). */
struct run {
    enum svc_config_result result;
    struct svc_config cfg;
    char *out;
    char *err;
};

static void load(struct run *r, const char *const *env, int argc, char **argv)
{
    size_t out_len = 0, err_len = 0;
    FILE *out = open_memstream(&r->out, &out_len);
    FILE *err = open_memstream(&r->err, &err_len);
    assert_non_null(out);
    assert_non_null(err);
    fake_env = env;
    r->result = svc_config_load(&r->cfg, argc, argv, env_get, out, err);
    fake_env = NULL;
    fclose(out);
    fclose(err);
}

static void run_free(struct run *r)
{
    svc_config_free(&r->cfg);
    free(r->out);
    free(r->err);
}

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void test_defaults(void **state)
{
    struct run r;
    char *argv[] = {"rowlock"};
    load(&r, NULL, ARGC(argv), argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_string_equal(r.cfg.database_url, "postgresql:///rowlock");
    assert_string_equal(r.cfg.listen_address, "0.0.0.0");
    assert_int_equal(r.cfg.port, 8080);
    assert_int_equal(r.cfg.threads, 4);
    assert_int_equal(r.cfg.workers, 16);
    assert_int_equal(r.cfg.pool_size, 16);
    assert_int_equal(r.cfg.pool_acquire_timeout_ms, 2000);
    assert_int_equal(r.cfg.statement_timeout_ms, 5000);
    assert_int_equal(r.cfg.db_deadline_ms, 6000); /* the statement timeout plus 1000 ms */
    assert_int_equal(r.cfg.db_connect_timeout_s, 5);
    assert_int_equal(r.cfg.db_startup_wait_s, 60);
    assert_int_equal(r.cfg.body_limit, 1048576);
    assert_int_equal(r.cfg.url_limit, 8192);
    assert_int_equal(r.cfg.header_limit, 16384);
    assert_int_equal(r.cfg.json_max_depth, 32);
    assert_int_equal(r.cfg.connection_timeout_s, 30);
    assert_int_equal(r.cfg.connection_limit, 4096);
    /* behind a load balancer every connection comes from one address: no limit of its own */
    assert_int_equal(r.cfg.per_ip_connection_limit, 0);
    assert_int_equal(r.cfg.request_timeout_s, 30);
    assert_int_equal(r.cfg.drain_timeout_s, 30);
    assert_int_equal(r.cfg.key_writers, 2);
    assert_string_equal(r.cfg.tokens_file, "");
    assert_string_equal(r.cfg.tls_cert_file, ""); /* plain HTTP */
    assert_string_equal(r.cfg.tls_key_file, "");
    assert_true(r.cfg.open_ops);
    assert_int_equal(r.cfg.log_level, SVC_LOG_INFO);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "");
    run_free(&r);
}

static void test_env_values(void **state)
{
    static const char *const env[] = {
        "ROWLOCK_DATABASE_URL",
        "host=db dbname=x",
        "ROWLOCK_LISTEN_ADDRESS",
        "127.0.0.1",
        "ROWLOCK_PORT",
        "9000",
        "ROWLOCK_THREADS",
        "2",
        "ROWLOCK_BODY_LIMIT",
        "1024",
        "ROWLOCK_TOKENS_FILE",
        "/etc/tokens",
        "ROWLOCK_RATE_LIMIT",
        "50",
        "ROWLOCK_OPEN_OPS",
        "false",
        "ROWLOCK_LOG_LEVEL",
        "debug",
        "UNRELATED",
        "x",
        NULL,
    };
    struct run r;
    char *argv[] = {"rowlock"};
    load(&r, env, ARGC(argv), argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_string_equal(r.cfg.database_url, "host=db dbname=x");
    assert_string_equal(r.cfg.listen_address, "127.0.0.1");
    assert_int_equal(r.cfg.port, 9000);
    assert_int_equal(r.cfg.threads, 2);
    assert_int_equal(r.cfg.body_limit, 1024);
    assert_string_equal(r.cfg.tokens_file, "/etc/tokens");
    assert_int_equal(r.cfg.rate_limit, 50);
    assert_false(r.cfg.open_ops);
    assert_int_equal(r.cfg.log_level, SVC_LOG_DEBUG);
    assert_int_equal(r.cfg.pool_size, 16); /* untouched keys keep their default */
    assert_int_equal(r.cfg.rate_burst, 20);
    assert_int_equal(r.cfg.long_poll_limit, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
}

static void test_flags_win_over_env(void **state)
{
    static const char *const env[] = {
        "ROWLOCK_PORT",
        "9000",
        "ROWLOCK_DATABASE_URL",
        "from-env",
        "ROWLOCK_OPEN_OPS",
        "true",
        "ROWLOCK_LOG_LEVEL",
        "warn",
        NULL,
    };
    struct run r;
    char *eq[] = {"rowlock", "--port=1", "--database-url=from-flag", "--open-ops=no"};
    load(&r, env, ARGC(eq), eq);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.port, 1);
    assert_string_equal(r.cfg.database_url, "from-flag");
    assert_false(r.cfg.open_ops);
    assert_int_equal(r.cfg.log_level, SVC_LOG_WARN); /* no flag: the environment stays */
    run_free(&r);

    char *sep[] = {"rowlock", "--port", "1", "--log-level", "error", "--database-url", "x=y"};
    load(&r, env, ARGC(sep), sep);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.port, 1);
    assert_int_equal(r.cfg.log_level, SVC_LOG_ERROR);
    assert_string_equal(r.cfg.database_url, "x=y");
    run_free(&r);

    /* The later of two flags wins; "--key=" sets an empty string. */
    char *twice[] = {"rowlock", "--port=5", "--port", "6", "--tokens-file="};
    load(&r, env, ARGC(twice), twice);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.port, 6);
    assert_string_equal(r.cfg.tokens_file, "");
    run_free(&r);
}

static void test_booleans_and_levels_accepted(void **state)
{
    static const char *const yes[] = {"true", "1", "yes"};
    static const char *const no[] = {"false", "0", "no"};
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    struct run r;
    char *argv[] = {"rowlock"};
    for (size_t i = 0; i < 3; i++) {
        const char *env_yes[] = {"ROWLOCK_OPEN_OPS", yes[i], NULL};
        load(&r, env_yes, ARGC(argv), argv);
        assert_int_equal(r.result, SVC_CONFIG_OK);
        assert_true(r.cfg.open_ops);
        run_free(&r);
        const char *env_no[] = {"ROWLOCK_OPEN_OPS", no[i], NULL};
        load(&r, env_no, ARGC(argv), argv);
        assert_int_equal(r.result, SVC_CONFIG_OK);
        assert_false(r.cfg.open_ops);
        run_free(&r);
    }
    for (long i = 0; i < 4; i++) {
        const char *env[] = {"ROWLOCK_LOG_LEVEL", levels[i], NULL};
        load(&r, env, ARGC(argv), argv);
        assert_int_equal(r.result, SVC_CONFIG_OK);
        assert_int_equal(r.cfg.log_level, i);
        assert_string_equal(svc_log_level_name(r.cfg.log_level), levels[i]);
        run_free(&r);
    }
}

static void test_int_bounds_inclusive(void **state)
{
    struct run r;
    char *lo[] = {"rowlock", "--port=0", "--threads=1", "--body-limit=1024"};
    load(&r, NULL, ARGC(lo), lo);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.port, 0);
    assert_int_equal(r.cfg.threads, 1);
    run_free(&r);
    char *hi[] = {"rowlock", "--port=65535", "--threads=256", "--body-limit=1073741824"};
    load(&r, NULL, ARGC(hi), hi);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.port, 65535);
    assert_int_equal(r.cfg.threads, 256);
    assert_int_equal(r.cfg.body_limit, 1073741824);
    run_free(&r);
}

static void test_per_ip_limit_clamped(void **state)
{
    struct run r;
    char *argv[] = {"rowlock", "--connection-limit=10", "--per-ip-connection-limit=50"};
    load(&r, NULL, ARGC(argv), argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.per_ip_connection_limit, 10);
    run_free(&r);
    /* 0 stays 0: no per-address limit at all */
    char *argv0[] = {"rowlock", "--connection-limit=10", "--per-ip-connection-limit=0"};
    load(&r, NULL, ARGC(argv0), argv0);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.per_ip_connection_limit, 0);
    run_free(&r);
}

/* Asserts an invalid load: SVC_CONFIG_INVALID, nothing left allocated, and an err message that
 * names `names` (the key as the user wrote it) and, when given, `also`. */
static void expect_invalid(const char *const *env, int argc, char **argv, const char *names,
                           const char *also)
{
    struct run r;
    load(&r, env, argc, argv);
    if (r.result != SVC_CONFIG_INVALID)
        fail_msg("expected SVC_CONFIG_INVALID for %s, got %d", names, (int)r.result);
    assert_null(r.cfg.database_url);
    assert_null(r.cfg.listen_address);
    assert_null(r.cfg.tokens_file);
    if (strstr(r.err, names) == NULL)
        fail_msg("err \"%s\" does not name %s", r.err, names);
    if (also != NULL && strstr(r.err, also) == NULL)
        fail_msg("err \"%s\" does not mention %s", r.err, also);
    if (strchr(r.err, '\n') != strrchr(r.err, '\n') || r.err[strlen(r.err) - 1] != '\n')
        fail_msg("err \"%s\" is not one line", r.err);
    assert_string_equal(r.out, "");
    run_free(&r);
}

static void test_invalid_env_values(void **state)
{
    char *argv[] = {"rowlock"};
    static const char *const cases[][3] = {
        /* variable, value, text the message must hold */
        {"ROWLOCK_PORT", "abc", "\"abc\""},
        {"ROWLOCK_PORT", "", "0 to 65535"},
        {"ROWLOCK_PORT", "80x", "\"80x\""},
        {"ROWLOCK_PORT", "65536", "0 to 65535"},
        {"ROWLOCK_PORT", "-1", "0 to 65535"},
        {"ROWLOCK_PORT", "99999999999999999999999", "0 to 65535"},
        {"ROWLOCK_THREADS", "0", "1 to 256"},
        {"ROWLOCK_THREADS", "257", "1 to 256"},
        {"ROWLOCK_POOL_SIZE", "1001", "1 to 1000"},
        {"ROWLOCK_DB_CONNECT_TIMEOUT_S", "1", "2 to 300"},
        {"ROWLOCK_BODY_LIMIT", "1023", "1024 to 1073741824"},
        {"ROWLOCK_URL_LIMIT", "255", "256 to 32768"},
        {"ROWLOCK_JSON_MAX_DEPTH", "1", "2 to 1000"},
        {"ROWLOCK_OPEN_OPS", "maybe", "true or false"},
        {"ROWLOCK_OPEN_OPS", "", "true or false"},
        {"ROWLOCK_OPEN_OPS", "TRUE ", "true or false"},
        {"ROWLOCK_LOG_LEVEL", "verbose", "debug, info, warn or error"},
        {"ROWLOCK_LOG_LEVEL", "", "debug, info, warn or error"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *env[] = {cases[i][0], cases[i][1], NULL};
        expect_invalid(env, ARGC(argv), argv, cases[i][0], cases[i][2]);
    }
}

static void test_invalid_flag_values(void **state)
{
    char *port_eq[] = {"rowlock", "--port=70000"};
    expect_invalid(NULL, ARGC(port_eq), port_eq, "port", "\"70000\"");
    char *port_sep[] = {"rowlock", "--port", "x1"};
    expect_invalid(NULL, ARGC(port_sep), port_sep, "port", "\"x1\"");
    char *threads[] = {"rowlock", "--threads=0"};
    expect_invalid(NULL, ARGC(threads), threads, "threads", "1 to 256");
    char *drain[] = {"rowlock", "--drain-timeout-s=3601"};
    expect_invalid(NULL, ARGC(drain), drain, "drain-timeout-s", "0 to 3600");
    char *ops[] = {"rowlock", "--open-ops=on"};
    expect_invalid(NULL, ARGC(ops), ops, "open-ops", "true or false");
    char *level[] = {"rowlock", "--log-level", "INFO"};
    expect_invalid(NULL, ARGC(level), level, "log-level", "\"INFO\"");
    /* A good env value does not save a bad flag, and a bad env value fails even with a flag. */
    static const char *const env_ok[] = {"ROWLOCK_PORT", "80", NULL};
    expect_invalid(env_ok, ARGC(port_eq), port_eq, "port", NULL);
    static const char *const env_bad[] = {"ROWLOCK_PORT", "x", NULL};
    char *fixed[] = {"rowlock", "--port=80"};
    expect_invalid(env_bad, ARGC(fixed), fixed, "ROWLOCK_PORT", NULL);
}

static void test_bad_arguments(void **state)
{
    char *unknown[] = {"rowlock", "--no-such-flag=1"};
    expect_invalid(NULL, ARGC(unknown), unknown, "--no-such-flag", "unknown flag");
    char *prefix[] = {"rowlock", "--por=1"};
    expect_invalid(NULL, ARGC(prefix), prefix, "--por", "unknown flag");
    char *longer[] = {"rowlock", "--ports=1"};
    expect_invalid(NULL, ARGC(longer), longer, "--ports", "unknown flag");
    char *positional[] = {"rowlock", "serve"};
    expect_invalid(NULL, ARGC(positional), positional, "serve", NULL);
    char *single_dash[] = {"rowlock", "-port=1"};
    expect_invalid(NULL, ARGC(single_dash), single_dash, "-port=1", NULL);
    char *no_value[] = {"rowlock", "--port"};
    expect_invalid(NULL, ARGC(no_value), no_value, "port", "needs a value");
}

/* Runs argv, expects SVC_CONFIG_EXIT_OK, and checks out names every variable. */
static void expect_listing(int argc, char **argv, const char *header)
{
    static const char *const env[] = {"ROWLOCK_PORT", "not-a-number", NULL};
    struct run r;
    load(&r, env, argc, argv); /* the listing comes before any validation */
    assert_int_equal(r.result, SVC_CONFIG_EXIT_OK);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, header));
    for (size_t i = 0; i < NENV; i++)
        if (strstr(r.out, all_env[i]) == NULL)
            fail_msg("%s does not list %s", argv[argc - 1], all_env[i]);
    /* And nothing beyond the known variables: count ROWLOCK_ occurrences. */
    size_t count = 0;
    for (const char *p = strstr(r.out, "ROWLOCK_"); p != NULL; p = strstr(p + 1, "ROWLOCK_"))
        count++;
    assert_int_equal(count, NENV);
    run_free(&r);
}

static void test_help_and_markdown(void **state)
{
    char *help[] = {"rowlock", "--help"};
    expect_listing(ARGC(help), help, "usage:");
    char *h[] = {"rowlock", "-h"};
    expect_listing(ARGC(h), h, "--port");
    char *late_help[] = {"rowlock", "--port=1", "--help"};
    expect_listing(ARGC(late_help), late_help, "--database-url");
    char *md[] = {"rowlock", "--config-markdown"};
    expect_listing(ARGC(md), md, "| flag | environment |");

    struct run r;
    load(&r, NULL, ARGC(md), md);
    assert_non_null(strstr(r.out, "| `--port` | `ROWLOCK_PORT` | integer | `8080` |"));
    assert_non_null(strstr(r.out, "| `--tokens-file` | `ROWLOCK_TOKENS_FILE` | string | none |"));
    run_free(&r);
}

/* The database deadline follows the statement timeout unless it is set. */
static void test_db_deadline(void **state)
{
    struct run r;
    static const char *const env[] = {"ROWLOCK_STATEMENT_TIMEOUT_MS", "30000", NULL};
    char *argv[] = {"rowlock"};
    load(&r, env, ARGC(argv), argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.db_deadline_ms, 31000);
    run_free(&r);
    char *set[] = {"rowlock", "--db-deadline-ms=2500"};
    load(&r, env, ARGC(set), set);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.db_deadline_ms, 2500);
    run_free(&r);
    char *bad[] = {"rowlock", "--db-deadline-ms=-1"};
    expect_invalid(NULL, ARGC(bad), bad, "db-deadline-ms", "0 to 3600000");
}

/* --migrate takes auto, check or off (default auto); --migrate-only alone means true. */
static void test_migrate_settings(void **state)
{
    struct run r;
    char *none[] = {"rowlock"};
    load(&r, NULL, ARGC(none), none);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.migrate, SVC_MIGRATE_AUTO);
    assert_false(r.cfg.migrate_only);
    run_free(&r);
    static const char *const env[] = {"ROWLOCK_MIGRATE", "off", NULL};
    char *check[] = {"rowlock", "--migrate=check"};
    load(&r, env, ARGC(check), check);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_int_equal(r.cfg.migrate, SVC_MIGRATE_CHECK);
    run_free(&r);
    load(&r, env, ARGC(none), none);
    assert_int_equal(r.cfg.migrate, SVC_MIGRATE_OFF);
    run_free(&r);
    char *only[] = {"rowlock", "--migrate-only", "--port=1"};
    load(&r, NULL, ARGC(only), only);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_true(r.cfg.migrate_only);
    assert_int_equal(r.cfg.port, 1);
    run_free(&r);
    char *last[] = {"rowlock", "--migrate-only"};
    load(&r, NULL, ARGC(last), last);
    assert_true(r.cfg.migrate_only);
    run_free(&r);
    char *no[] = {"rowlock", "--migrate-only=false"};
    load(&r, NULL, ARGC(no), no);
    assert_false(r.cfg.migrate_only);
    run_free(&r);
    char *bad[] = {"rowlock", "--migrate=yes"};
    expect_invalid(NULL, ARGC(bad), bad, "migrate", "auto, check or off");
    static const char *const bad_env[] = {"ROWLOCK_MIGRATE", "Auto", NULL};
    expect_invalid(bad_env, ARGC(none), none, "ROWLOCK_MIGRATE", "auto, check or off");
}

static void test_free_is_idempotent(void **state)
{
    struct run r;
    char *argv[] = {"rowlock"};
    load(&r, NULL, ARGC(argv), argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    svc_config_free(&r.cfg);
    assert_null(r.cfg.database_url);
    run_free(&r);
}

static void test_log_level_name(void **state)
{
    assert_string_equal(svc_log_level_name(SVC_LOG_DEBUG), "debug");
    assert_string_equal(svc_log_level_name(SVC_LOG_ERROR), "error");
    assert_string_equal(svc_log_level_name(-1), "info");
    assert_string_equal(svc_log_level_name(99), "info");
}

/* The listen address is checked with the rest, before anything starts: IPv4 and IPv6 numbers
 * pass, a host name or garbage is refused with the key and the value. */
static void test_listen_address(void **state)
{
    const char *good[] = {"0.0.0.0", "127.0.0.1", "::", "::1", "fe80::1", NULL};
    for (size_t i = 0; good[i]; i++) {
        const char *env[] = {"ROWLOCK_LISTEN_ADDRESS", good[i], NULL};
        char *argv[] = {"rowlock"};
        struct run r;
        load(&r, env, 1, argv);
        assert_int_equal(r.result, SVC_CONFIG_OK);
        assert_string_equal(r.cfg.listen_address, good[i]);
        run_free(&r);
    }
    char *host[] = {"rowlock", "--listen-address=localhost"};
    expect_invalid(NULL, ARGC(host), host, "listen-address", "\"localhost\"");
    char *port_in[] = {"rowlock", "--listen-address=127.0.0.1:8080"};
    expect_invalid(NULL, ARGC(port_in), port_in, "listen-address", "IPv6");
}

/* The TLS files: both (HTTPS) or neither (plain HTTP); one alone is refused, naming both. */
static void test_tls_files(void **state)
{
    const char *env[] = {"ROWLOCK_TLS_CERT_FILE", "/etc/rowlock/tls.crt", NULL};
    char *key[] = {"rowlock", "--tls-key-file=/etc/rowlock/tls.key"};
    struct run r;
    load(&r, env, ARGC(key), key);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    assert_string_equal(r.cfg.tls_cert_file, "/etc/rowlock/tls.crt");
    assert_string_equal(r.cfg.tls_key_file, "/etc/rowlock/tls.key");
    run_free(&r);
    char *cert_alone[] = {"rowlock", "--tls-cert-file=/etc/rowlock/tls.crt"};
    expect_invalid(NULL, ARGC(cert_alone), cert_alone, "--tls-key-file", "go together");
    expect_invalid(NULL, ARGC(key), key, "ROWLOCK_TLS_CERT_FILE", "go together");
    const char *emptied[] = {"ROWLOCK_TLS_CERT_FILE", "/etc/rowlock/tls.crt",
                             "ROWLOCK_TLS_KEY_FILE", "", NULL};
    char *none[] = {"rowlock"};
    expect_invalid(emptied, ARGC(none), none, "--tls-cert-file", "neither");
}

/* Warnings: an unknown ROWLOCK_ variable (not ROWLOCK_TEST_*, not another program's), and a pool
 * smaller than the workers; none for a configuration without either. */
static void test_warnings(void **state)
{
    char *argv[] = {"rowlock"};
    struct run r;
    load(&r, NULL, 1, argv);
    assert_int_equal(r.result, SVC_CONFIG_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    char *environ_[] = {"ROWLOCK_PROT=1", "ROWLOCK_PORT=2",   "ROWLOCK_TEST_ADMIN_URL=x",
                        "PATH=/bin",      "ROWLOCK_LOGLEVEL", NULL};
    assert_int_equal(svc_config_warnings(&r.cfg, environ_, f), 2);
    fclose(f);
    assert_non_null(strstr(text, "ROWLOCK_PROT is set but no setting reads it"));
    assert_non_null(strstr(text, "ROWLOCK_LOGLEVEL is set"));
    assert_null(strstr(text, "ROWLOCK_PORT"));
    assert_null(strstr(text, "ROWLOCK_TEST"));
    free(text);
    r.cfg.pool_size = 4;
    r.cfg.workers = 8;
    f = open_memstream(&text, &len);
    assert_int_equal(svc_config_warnings(&r.cfg, NULL, f), 1);
    fclose(f);
    assert_non_null(strstr(text, "ROWLOCK_POOL_SIZE=4 is below ROWLOCK_WORKERS=8"));
    free(text);
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_db_deadline),
        cmocka_unit_test(test_env_values),
        cmocka_unit_test(test_flags_win_over_env),
        cmocka_unit_test(test_booleans_and_levels_accepted),
        cmocka_unit_test(test_int_bounds_inclusive),
        cmocka_unit_test(test_per_ip_limit_clamped),
        cmocka_unit_test(test_invalid_env_values),
        cmocka_unit_test(test_invalid_flag_values),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_help_and_markdown),
        cmocka_unit_test(test_migrate_settings),
        cmocka_unit_test(test_free_is_idempotent),
        cmocka_unit_test(test_log_level_name),
        cmocka_unit_test(test_listen_address),
        cmocka_unit_test(test_tls_files),
        cmocka_unit_test(test_warnings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
