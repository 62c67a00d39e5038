/* rowlock-cli's queue commands besides work, keys and enqueue (enqueue.c): queues (a queue's
 * configuration: list, get, put from JSON, delete), jobs (every page, a table on a terminal), job
 * (with its attempt history), retry and cancel (of one job, or --all: every page of a bulk
 * action), pause and resume. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/http.h"
#include "cli/output.h"
#include "cli/rest.h"

/* Sends method path (no body; flags: CLI_HTTP_IDEMPOTENT when a lost answer may be asked again)
 * and prints the answer as JSON; returns the exit code. */
static int get_and_print(const struct cli_conf *conf, const char *method, const char *path,
                         int flags)
{
    struct cli_http *h = cli_http_new(conf);
    int rc = cli_rest_print(conf, h, method, path, NULL, flags);
    cli_http_free(h);
    return rc;
}

/* Parses "QUEUE ID" (after options) into an escaped path prefix "/queues/Q/jobs/ID". */
static int queue_job_path(int argc, char **argv, const char *usage, char *path, size_t size)
{
    long long id;
    if (cli_wants_help(argc, argv)) {
        printf("usage: rowlock-cli %s\n", usage);
        return -1;
    }
    if (argc != 3 || cli_parse_long("ID", argv[2], 1, INT64_MAX, &id) != 0) {
        cli_errorf("usage: %s", usage);
        return CLI_EXIT_USAGE;
    }
    char *q = cli_escape(argv[1]);
    snprintf(path, size, "/queues/%s/jobs/%lld", q ? q : "", id);
    free(q);
    return 0;
}

static const char *const job_columns[] = {"id",           "state",      "attempts",
                                          "max_attempts", "owner",      "updated_at",
                                          "payload",      "last_error", NULL};

static void jobs_usage(FILE *f)
{
    fprintf(f, "usage: rowlock-cli jobs QUEUE [--state S] [--limit N]\n\n"
               "Lists the queue's jobs in id order, every page (or the first N jobs): NDJSON,\n"
               "or a table on a terminal. S: waiting (for parents), pending, processing,\n"
               "succeeded, failed or cancelled.\n");
}

/* Reads pages of jobs after *after into rows; *after becomes the next page's or -1 at the end. */
static int jobs_page(struct cli_http *h, const char *q, const char *state, long long *after,
                     long long want, json_t *rows, const struct cli_conf *conf)
{
    char path[1024];
    struct cli_reply rep;
    snprintf(path, sizeof(path), "/queues/%s/jobs?limit=%lld&after=%lld%s%s", q,
             want < 1000 ? want : 1000, *after, state ? "&state=" : "", state ? state : "");
    cli_http_call(h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0) {
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(rep.json, "jobs"), i, j)
        {
            json_array_append(rows, j);
            if (!conf->out_tty)
                cli_out_line(j);
        }
        json_t *next = json_object_get(rep.json, "next");
        *after = json_is_integer(next) ? json_integer_value(next) : -1;
    }
    cli_reply_clear(&rep);
    return rc;
}

int cli_cmd_jobs(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"state", required_argument, NULL, 's'},
                                         {"limit", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *state = NULL;
    long long limit = 0, after = 0;
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 's')
            state = optarg;
        else if (c != 'l' || cli_parse_long("--limit", optarg, 1, INT64_MAX, &limit) != 0) {
            jobs_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        jobs_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct cli_http *h = cli_http_new(conf);
    char *q = cli_escape(argv[optind]), *st = state ? cli_escape(state) : NULL;
    json_t *rows = json_array();
    long long left = limit ? limit : INT64_MAX;
    while (rc == 0 && after >= 0 && left > 0) {
        size_t before = json_array_size(rows);
        rc = jobs_page(h, q, st, &after, left, rows, conf);
        left -= (long long)(json_array_size(rows) - before);
        if (!conf->out_tty)
            json_array_clear(rows);
    }
    if (conf->out_tty && rc == 0)
        cli_out_table(rows, job_columns);
    json_decref(rows);
    free(q);
    free(st);
    cli_http_free(h);
    return rc;
}

static const char *const attempt_columns[] = {"attempt",  "fence",   "owner", "claimed_at",
                                              "ended_at", "outcome", NULL};

int cli_cmd_job(const struct cli_conf *conf, int argc, char **argv)
{
    char path[1024];
    struct cli_reply rep;
    int rc = queue_job_path(argc, argv,
                            "job QUEUE ID: the job and its attempt history (JSON; on "
                            "a terminal with the history as a table)",
                            path, sizeof(path));
    if (rc)
        return rc < 0 ? 0 : rc;
    struct cli_http *h = cli_http_new(conf);
    cli_http_call(h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 60, &rep);
    rc = cli_reply_exit(&rep);
    if (rc == 0)
        cli_out_json_table(conf, rep.json, "history", "history", attempt_columns);
    cli_reply_clear(&rep);
    cli_http_free(h);
    return rc;
}

/* A bulk action (retry or cancel QUEUE --all): its name, the answer's count and the help. */
struct bulk {
    const char *action, *counted, *usage;
    int flags; /* CLI_HTTP_IDEMPOTENT when a page's lost answer may be asked again */
};

/* True when argv holds --all before any "--". */
static int wants_all(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--all") == 0)
            return 1;
    return 0;
}

/* Sends every page of the bulk action on q (escaped) until the answer's next is null, adding
 * each page's count to *total (printed as progress on a terminal). Returns the exit code. */
static int bulk_pages(const struct cli_conf *conf, const struct bulk *b, const char *q,
                      const char *state, const char *key, long long page, long long *total)
{
    char path[1024];
    int rc = 0;
    json_int_t after = 0;
    snprintf(path, sizeof(path), "/queues/%s/jobs:%s", q, b->action);
    struct cli_http *h = cli_http_new(conf);
    for (;;) {
        struct cli_reply rep;
        json_t *body = json_pack("{s:I, s:I}", "limit", (json_int_t)page, "after", after);
        if (state != NULL)
            json_object_set_new(body, "state", json_string(state));
        if (key != NULL)
            json_object_set_new(body, "concurrency_key", json_string(key));
        cli_http_call(h, "POST", path, body, b->flags, 60, &rep);
        json_decref(body);
        rc = cli_reply_exit(&rep);
        json_t *next = json_object_get(rep.json, "next");
        if (rc == 0) {
            *total += json_integer_value(json_object_get(rep.json, b->counted));
            cli_out_progress(conf, b->counted, *total, -1, !json_is_integer(next));
        }
        after = json_is_integer(next) ? json_integer_value(next) : 0;
        cli_reply_clear(&rep);
        if (rc != 0 || after == 0)
            break;
    }
    cli_http_free(h);
    return rc;
}

/* retry|cancel QUEUE --all [--state S] [--key K] [--page N]; prints {"<counted>": total}. */
static int bulk_run(const struct cli_conf *conf, const struct bulk *b, int argc, char **argv)
{
    static const struct option opts[] = {
        {"all", no_argument, NULL, 'a'},       {"state", required_argument, NULL, 's'},
        {"key", required_argument, NULL, 'k'}, {"page", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},      {NULL, 0, NULL, 0}};
    const char *state = NULL, *key = NULL;
    long long page = 500, total = 0;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 's')
            state = optarg;
        else if (c == 'k')
            key = optarg;
        else if (c != 'a' && (c != 'p' || cli_parse_long("--page", optarg, 1, 1000, &page) != 0)) {
            fputs(b->usage, c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        fputs(b->usage, stderr);
        return CLI_EXIT_USAGE;
    }
    char *q = cli_escape(argv[optind]);
    int rc = bulk_pages(conf, b, q ? q : "", state, key, page, &total);
    free(q);
    if (rc == 0 || total > 0) { /* after a failure, what the pages before it changed */
        json_t *out = json_pack("{s:I}", b->counted, (json_int_t)total);
        cli_out_json(conf, out);
        json_decref(out);
    }
    return rc;
}

static const struct bulk bulk_retry = {
    "retry", "retried",
    "usage: rowlock-cli retry QUEUE ID\n"
    "       rowlock-cli retry QUEUE --all [--state failed|cancelled] [--key K] [--page N]\n\n"
    "The operator's retry: a failed or cancelled job becomes pending, due at once, with a fresh\n"
    "set of attempts. With --all, every job of the queue that matches: --state (failed or\n"
    "cancelled; default both), --key (the jobs' concurrency_key), a page of --page jobs\n"
    "(default 500, at most 1000) per request and transaction, until none is left. Prints\n"
    "{\"retried\": N}; on a terminal, the count so far.\n",
    0};
static const struct bulk bulk_cancel = {
    "cancel", "cancelled",
    "usage: rowlock-cli cancel QUEUE ID\n"
    "       rowlock-cli cancel QUEUE --all [--state pending|processing] [--key K] [--page N]\n\n"
    "The operator's cancel: a pending or running job becomes cancelled (a running job's worker\n"
    "is refused job_cancelled at its next heartbeat or settlement). With --all, every job of\n"
    "the queue that matches: --state (pending, scheduled and retrying ones included, or\n"
    "processing; default both), --key (the jobs' concurrency_key), a page of --page jobs\n"
    "(default 500, at most 1000) per request and transaction, until none is left. Prints\n"
    "{\"cancelled\": N}; on a terminal, the count so far.\n",
    CLI_HTTP_IDEMPOTENT};

int cli_cmd_retry(const struct cli_conf *conf, int argc, char **argv)
{
    char path[1024];
    if (wants_all(argc, argv) || cli_wants_help(argc, argv))
        return bulk_run(conf, &bulk_retry, argc, argv);
    int rc = queue_job_path(
        argc, argv, "retry QUEUE ID (or QUEUE --all): a failed or cancelled job back to pending",
        path, sizeof(path) - 8);
    if (rc)
        return rc < 0 ? 0 : rc;
    strcat(path, "/retry");
    return get_and_print(conf, "POST", path, 0);
}

int cli_cmd_cancel(const struct cli_conf *conf, int argc, char **argv)
{
    char path[1024];
    if (wants_all(argc, argv) || cli_wants_help(argc, argv))
        return bulk_run(conf, &bulk_cancel, argc, argv);
    int rc = queue_job_path(argc, argv,
                            "cancel QUEUE ID (or QUEUE --all): cancel a pending or running job now",
                            path, sizeof(path));
    if (rc)
        return rc < 0 ? 0 : rc;
    return get_and_print(conf, "DELETE", path, CLI_HTTP_IDEMPOTENT);
}

/* pause QUEUE, resume QUEUE: both idempotent, so retried like a GET when an answer is lost. */
static int queue_pause(const struct cli_conf *conf, int argc, char **argv, const char *verb,
                       const char *usage)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: rowlock-cli %s QUEUE\n\n%s\n", verb, usage);
        return 0;
    }
    if (argc != 2) {
        cli_errorf("usage: %s QUEUE", verb);
        return CLI_EXIT_USAGE;
    }
    char path[1024], *q = cli_escape(argv[1]);
    snprintf(path, sizeof(path), "/queues/%s/%s", q ? q : "", verb);
    free(q);
    return get_and_print(conf, "POST", path, CLI_HTTP_IDEMPOTENT);
}

int cli_cmd_pause(const struct cli_conf *conf, int argc, char **argv)
{
    return queue_pause(conf, argc, argv, "pause",
                       "Pauses the queue: its claims hand out nothing (waiting ones keep waiting)\n"
                       "until it is resumed; enqueues go on, and leases already held go on.\n"
                       "Pausing a paused queue changes nothing. Prints the queue.");
}

int cli_cmd_resume(const struct cli_conf *conf, int argc, char **argv)
{
    return queue_pause(conf, argc, argv, "resume",
                       "Resumes a paused queue: its claims hand out jobs again, and the claims\n"
                       "waiting on it are woken. Prints the queue.");
}

static void queues_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli queues list\n"
            "       rowlock-cli queues get QUEUE [--config]\n"
            "       rowlock-cli queues put QUEUE [JSON]\n"
            "       rowlock-cli queues delete QUEUE [--force]\n\n"
            "A queue's configuration. list prints every queue with its configuration and counts\n"
            "(NDJSON, or a table of the configuration on a terminal); get one queue with its\n"
            "jobs counted by state and the claims its limits held back, or with --config only\n"
            "what put takes. put creates the queue or replaces its whole configuration with the\n"
            "JSON object (the argument, or stdin without one): {\"max_attempts\",\n"
            "\"lease_seconds\", \"backoff_base_seconds\", \"backoff_max_seconds\",\n"
            "\"retention_seconds\", \"succeeded_retention_seconds\",\n"
            "\"failed_retention_seconds\", \"cancelled_retention_seconds\",\n"
            "\"dedupe_window_seconds\", \"limits\", \"key_limits\"}, each limits\n"
            "{\"concurrency\": N, \"rate\": {\"limit\": N, \"period_seconds\": S, \"burst\": N}}.\n"
            "Members left out take their defaults, also when the queue exists; to change one,\n"
            "edit what get --config prints:\n"
            "  rowlock-cli queues get Q --config | jq '.limits.concurrency = 4' |\n"
            "      rowlock-cli queues put Q\n"
            "(get shows each final state's retention in effect, which then no longer follows\n"
            "retention_seconds). put leaves a pause as it is (pause, resume); a key's own limits\n"
            "are keys put. delete deletes the queue and every job it held; while a job is\n"
            "processing it is refused (exit 4, queue_busy) unless --force, and a queue that\n"
            "schedules target is refused even so (exit 4, queue_has_schedules). JSON that does\n"
            "not parse exits 2 and sends nothing; a value the service refuses exits 2 with its\n"
            "reason and changes nothing; an unknown queue exits 3.\n"
            "scopes: list and get need read, put and delete admin.\n");
}

/* What get shows of a queue besides its configuration: --config leaves these out, so that
 * its output is a body put takes. A member added to GET alone makes that put a 400 that names
 * it, never a configuration lost. */
static const char *const queue_state_members[] = {
    "name", "created_at", "updated_at", "paused", "paused_at", "counts", "limits_held_back", NULL};

static const char *const queue_columns[] = {
    "name", "paused", "max_attempts", "lease_seconds", "limits", "key_limits", NULL};

/* get QUEUE --config: the queue's configuration alone. Returns the exit code. */
static int queue_config(const struct cli_conf *conf, struct cli_http *h, const char *path)
{
    struct cli_reply rep;
    cli_http_call(h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0) {
        for (size_t i = 0; queue_state_members[i] != NULL; i++)
            json_object_del(rep.json, queue_state_members[i]);
        cli_out_json(conf, rep.json);
    }
    cli_reply_clear(&rep);
    return rc;
}

/* get, put or delete of /queues/QUEUE (argv[at]; put's JSON after it). Returns the exit code. */
static int queue_one(const struct cli_conf *conf, const char *verb, int argc, char **argv, int at,
                     int config, int force)
{
    json_t *body = NULL;
    if (strcmp(verb, "put") == 0 && (body = cli_rest_body(argc, argv, at + 1, "the body")) == NULL)
        return CLI_EXIT_USAGE;
    struct cli_http *h = cli_http_new(conf);
    char path[4096], *q = cli_http_escape(h, argv[at]);
    snprintf(path, sizeof(path), "/queues/%s%s", q ? q : "", force ? "?force=true" : "");
    int rc;
    if (config)
        rc = queue_config(conf, h, path);
    else if (body != NULL)
        rc = cli_rest_print(conf, h, "PUT", path, body, CLI_HTTP_IDEMPOTENT);
    else if (strcmp(verb, "get") == 0)
        rc = cli_rest_print(conf, h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT);
    else /* not idempotent: a delete sent again could take a queue created since */
        rc = cli_rest_print(conf, h, "DELETE", path, NULL, 0);
    free(q);
    cli_http_free(h);
    json_decref(body);
    return rc;
}

int cli_cmd_queues(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"config", no_argument, NULL, 'c'},
                                         {"force", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c, config = 0, force = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'c')
            config = 1;
        else if (c == 'f')
            force = 1;
        else {
            queues_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        }
    }
    const char *verb = optind < argc ? argv[optind] : "";
    int nargs = argc - optind, get = strcmp(verb, "get") == 0, put = strcmp(verb, "put") == 0;
    int del = strcmp(verb, "delete") == 0;
    if ((config && !get) || (force && !del)) {
        cli_errorf("usage: --config goes with queues get, --force with queues delete");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(verb, "list") == 0 && nargs == 1) {
        struct cli_http *h = cli_http_new(conf);
        int rc = cli_rest_list(conf, h, "/queues", "queues", queue_columns);
        cli_http_free(h);
        return rc;
    }
    if (!((get || del) && nargs == 2) && !(put && (nargs == 2 || nargs == 3))) {
        queues_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    return queue_one(conf, verb, argc, argv, optind + 1, config, force);
}
