/* rowlock-cli: the command table, the options every command shares (ROWLOCK_URL, the token,
 * the CA file, retries) and the dispatch to one command. Each command parses its own options and
 * prints its own --help; HTTP is in http.c. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

struct command {
    const char *name;
    int (*run)(const struct cli_conf *, int, char **);
    const char *summary;
};

static const struct command commands[] = {
    {"work", cli_cmd_work, "work QUEUE [options] -- COMMAND [ARGS...]: run COMMAND for each job"},
    {"enqueue", cli_cmd_enqueue,
     "enqueue QUEUE [JSON...]: enqueue payloads or jobs (or NDJSON stdin; a job graph in one "
     "request)"},
    {"jobs", cli_cmd_jobs, "jobs QUEUE [--state S]: list jobs"},
    {"job", cli_cmd_job, "job QUEUE ID: one job with its attempt history"},
    {"retry", cli_cmd_retry,
     "retry QUEUE ID | QUEUE --all [--state S] [--key K]: the operator's retry of a failed or\n"
     "    cancelled job, or of every one that matches"},
    {"cancel", cli_cmd_cancel,
     "cancel QUEUE ID | QUEUE --all [--state S] [--key K]: the operator's cancel of a job, or\n"
     "    of every pending or processing one that matches"},
    {"pause", cli_cmd_pause, "pause QUEUE: claims hand out nothing until resume"},
    {"resume", cli_cmd_resume, "resume QUEUE: a paused queue hands out jobs again"},
    {"queues", cli_cmd_queues,
     "queues list|get|put|delete [QUEUE] ...: queues' configuration (put: JSON or stdin)"},
    {"keys", cli_cmd_keys, "keys list|get|put|delete QUEUE [KEY] ...: concurrency keys' limits"},
    {"produce", cli_cmd_produce, "produce TOPIC [--producer P]: produce NDJSON messages"},
    {"tail", cli_cmd_tail, "tail TOPIC [--follow] [--from X] [--consumer C]: read the log"},
    {"head", cli_cmd_head, "head get|patch|put|delete TOPIC KEY [JSON]: a key's head"},
    {"ledger", cli_cmd_ledger, "ledger submit|checkpoint|object|events LEDGER ...: ledgers"},
    {"schedules", cli_cmd_schedules, "schedules list|get|put|delete|fire [NAME] ...: schedules"},
};

void cli_errorf(const char *fmt, ...)
{
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "rowlock-cli: %s\n", line);
}

int cli_parse_long(const char *what, const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < min || v > max) {
        cli_errorf("usage: %s must be an integer from %lld to %lld (got '%s')", what, min, max,
                   s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: rowlock-cli [--url URL] [--token-file FILE] [--ca-file FILE] [--retries N]\n"
               "                   COMMAND ...\n\n"
               "commands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %s\n", commands[i].summary);
    fprintf(f, "\nenvironment: ROWLOCK_URL (default http://localhost:8080; https://... for a\n"
               "service with TLS), ROWLOCK_TOKEN or ROWLOCK_TOKEN_FILE (a file whose first line\n"
               "is the token), ROWLOCK_CA_FILE (--ca-file: PEM file of the CA certificates to\n"
               "trust for an https:// URL instead of the system's, for a private CA),\n"
               "ROWLOCK_RETRIES (default 4). A certificate that does not verify is never\n"
               "skipped, nor retried (exit 5).\n"
               "scopes the token needs (when the service has tokens): work needs work alone;\n"
               "enqueue, produce, retry, cancel, pause, resume, head put|patch|delete,\n"
               "ledger submit|checkpoint and schedules fire need write; jobs, job, tail, head\n"
               "get, ledger object|events, queues list|get, schedules list|get and keys\n"
               "list|get need read; tail --consumer needs read,write; queues put|delete,\n"
               "schedules put|delete and keys put|delete need admin. write does not include\n"
               "read; admin includes every scope.\n"
               "exit codes: 0 ok, 1 other error, 2 usage or invalid input, 3 not found,\n"
               "4 conflict, 5 unavailable after retries, 6 server error.\n"
               "`rowlock-cli COMMAND --help` describes one command.\n");
}

/* Reads the first line of path as the token into *out (owned). 0 or -1 (printed). */
static int token_read(const char *path, char **out)
{
    char line[4096];
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_errorf("token file %s: %s", path, strerror(errno));
        return -1;
    }
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    fclose(f);
    line[strcspn(line, "\r\n")] = '\0';
    if (!line[0]) {
        cli_errorf("token file %s: empty", path);
        return -1;
    }
    *out = strdup(line);
    return *out ? 0 : -1;
}

/* Returned by the option parsers when the command is to run (else they return the exit code:
 * 0 after --help). */
#define GO_ON (-1)

/* The options before the command; *at is the command's index in argv. GO_ON, or an exit code. */
static int global_options(int argc, char **argv, struct cli_conf *conf, const char **token_file,
                          int *at)
{
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},     {"token-file", required_argument, NULL, 't'},
        {"ca-file", required_argument, NULL, 'c'}, {"retries", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    long long v;
    int c;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'u':
            conf->url = optarg;
            break;
        case 't':
            *token_file = optarg;
            break;
        case 'c':
            conf->ca_file = optarg;
            break;
        case 'r':
            if (cli_parse_long("--retries", optarg, 0, 100, &v) != 0)
                return CLI_EXIT_USAGE;
            conf->retries = (int)v;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        default:
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
    }
    *at = optind;
    return GO_ON;
}

/* Fills conf from the environment, then the global options; *at is the command's index in argv.
 * GO_ON, or an exit code. */
static int conf_init(int argc, char **argv, struct cli_conf *conf, int *at)
{
    const char *token_file = getenv("ROWLOCK_TOKEN_FILE");
    const char *retries = getenv("ROWLOCK_RETRIES");
    long long v = 4;
    conf->url = getenv("ROWLOCK_URL");
    conf->ca_file = getenv("ROWLOCK_CA_FILE");
    conf->retries = 4;
    if (retries && cli_parse_long("ROWLOCK_RETRIES", retries, 0, 100, &v) != 0)
        return CLI_EXIT_USAGE;
    conf->retries = (int)v;
    int rc = global_options(argc, argv, conf, &token_file, at);
    if (rc != GO_ON)
        return rc;
    if (!conf->url || !*conf->url)
        conf->url = "http://localhost:8080";
    static char url[2048];
    snprintf(url, sizeof(url), "%s", conf->url);
    while (*url && url[strlen(url) - 1] == '/')
        url[strlen(url) - 1] = '\0';
    conf->url = url;
    if (conf->ca_file && !*conf->ca_file)
        conf->ca_file = NULL;
    if (conf->ca_file && access(conf->ca_file, R_OK) != 0) {
        cli_errorf("CA file %s: %s", conf->ca_file, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    if (token_file && *token_file) {
        if (token_read(token_file, &conf->token) != 0)
            return CLI_EXIT_USAGE;
    } else if (getenv("ROWLOCK_TOKEN") && *getenv("ROWLOCK_TOKEN")) {
        conf->token = strdup(getenv("ROWLOCK_TOKEN"));
    }
    conf->out_tty = isatty(STDOUT_FILENO);
    conf->err_tty = isatty(STDERR_FILENO);
    return GO_ON;
}

int main(int argc, char **argv)
{
    struct cli_conf conf = {0};
    int at = 0, result = conf_init(argc, argv, &conf, &at);
    if (result != GO_ON)
        goto done;
    result = CLI_EXIT_USAGE;
    if (at >= argc) {
        usage(stderr);
        goto done;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[at], commands[i].name) == 0) {
            curl_global_init(CURL_GLOBAL_DEFAULT);
            optind = 0; /* GNU getopt: start over on the command's argv */
            result = commands[i].run(&conf, argc - at, argv + at);
            curl_global_cleanup();
            goto done;
        }
    }
    cli_errorf("usage: unknown command '%s' (rowlock-cli --help lists them)", argv[at]);
done:
    free(conf.token);
    return result;
}
