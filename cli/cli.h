/* rowlock-cli's shared declarations: exit codes, the configuration every command reads (URL,
 * token, retries, output mode) and the entry point of each command. HTTP lives in http.c, the
 * worker loop in work.c/job.c/settle.c; nothing here talks to the network. */
#ifndef CLI_CLI_H
#define CLI_CLI_H

#include <jansson.h>
#include <stddef.h>

/* Exit codes (README "Workers" lists them). */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_OTHER = 1,       /* anything else: 401/403, local I/O, a refused item */
    CLI_EXIT_USAGE = 2,       /* bad arguments or input, or a 400 from the service */
    CLI_EXIT_NOT_FOUND = 3,   /* 404: no such queue, topic, job, key, ledger, schedule */
    CLI_EXIT_CONFLICT = 4,    /* 409/412: a fence, lease, state or precondition refused it */
    CLI_EXIT_UNAVAILABLE = 5, /* 503 or no connection, still so after every retry */
    CLI_EXIT_SERVER = 6,      /* any other 5xx */
};

struct cli_conf {
    const char *url;     /* ROWLOCK_URL, no trailing slash */
    const char *ca_file; /* ROWLOCK_CA_FILE: CAs trusted for https:// (NULL: the system's) */
    char *token;         /* owned; NULL: no Authorization header */
    int retries;         /* retries after a 503 or a connection error (ROWLOCK_RETRIES) */
    int out_tty;         /* stdout is a terminal: tables and progress bars */
    int err_tty;         /* stderr is a terminal */
};

/* Prints "rowlock-cli: <fmt>" and a newline on stderr. */
void cli_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parses a non-negative integer argument into *out (0) or prints why not (-1). */
int cli_parse_long(const char *what, const char *s, long long min, long long max, long long *out);

/* Commands: argv[0] is the command's name; each returns an exit code. */
int cli_cmd_work(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_enqueue(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_jobs(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_job(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_retry(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_cancel(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_pause(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_resume(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_produce(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_tail(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_head(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_ledger(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_schedules(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_keys(const struct cli_conf *conf, int argc, char **argv);
int cli_cmd_queues(const struct cli_conf *conf, int argc, char **argv);

/* True when argv holds -h or --help before any "--". */
int cli_wants_help(int argc, char **argv);

#endif
