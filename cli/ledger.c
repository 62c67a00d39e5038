/* rowlock-cli's ledger commands: submit (a transaction, optimistically), checkpoint, object
 * (one object's current version) and events (NDJSON out, following with --follow). Bodies are
 * JSON arguments or stdin, passed through as the OpenAPI document describes them. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/http.h"
#include "cli/output.h"

static void ledger_usage(FILE *f)
{
    fprintf(f, "usage: rowlock-cli ledger submit LEDGER [JSON]      a transaction (stdin without "
               "JSON)\n"
               "       rowlock-cli ledger checkpoint LEDGER [JSON]  a checkpoint {sequence, "
               "transactions}\n"
               "       rowlock-cli ledger object LEDGER ID          an object's current version\n"
               "       rowlock-cli ledger events LEDGER [--after N] [--follow] [--limit N]\n"
               "                                                   events as NDJSON\n\n"
               "submit answers 201 applied or 200 for a replay (both exit 0); 409\n"
               "dependencies_pending, superseded or below_horizon exit 4.\n");
}

/* POSTs the JSON argument (or stdin) to path and prints the answer. */
static int ledger_post(const struct cli_conf *conf, const char *path, int argc, char **argv, int at)
{
    json_error_t err;
    struct cli_reply rep;
    json_t *body = at < argc ? json_loads(argv[at], 0, &err) : json_loadf(stdin, 0, &err);
    if (!body) {
        cli_errorf("usage: the body is not a JSON object: %s", err.text);
        return CLI_EXIT_USAGE;
    }
    struct cli_http *h = cli_http_new(conf);
    cli_http_call(h, "POST", path, body, CLI_HTTP_IDEMPOTENT, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0)
        cli_out_json(conf, rep.json);
    cli_reply_clear(&rep);
    cli_http_free(h);
    json_decref(body);
    return rc;
}

/* Prints events after `after` page by page; with follow, polls every second for more. */
static int ledger_events(const struct cli_conf *conf, const char *ledger, long long after,
                         int follow, long long limit)
{
    struct cli_http *h = cli_http_new(conf);
    long long printed = 0;
    int rc = 0;
    while (rc == 0 && (!limit || printed < limit)) {
        char path[1024];
        struct cli_reply rep;
        long long want = limit && limit - printed < 1000 ? limit - printed : 1000;
        snprintf(path, sizeof(path), "/ledgers/%s/events?after=%lld&limit=%lld", ledger, after,
                 want);
        cli_http_call(h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 60, &rep);
        rc = cli_reply_exit(&rep);
        size_t n = 0;
        if (rc == 0) {
            json_t *events = json_object_get(rep.json, "events"), *e;
            size_t i;
            json_array_foreach(events, i, e) cli_out_line(e);
            n = json_array_size(events);
            printed += (long long)n;
            after = json_integer_value(json_object_get(rep.json, "next"));
        }
        cli_reply_clear(&rep);
        if (rc == 0 && n == 0 && !follow)
            break;
        if (rc == 0 && n == 0)
            sleep(1);
    }
    cli_http_free(h);
    return rc;
}

int cli_cmd_ledger(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"after", required_argument, NULL, 'a'},
                                         {"follow", no_argument, NULL, 'f'},
                                         {"limit", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    long long after = 0, limit = 0;
    int follow = 0, c;
    char path[2048];
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        if (c == 'f')
            follow = 1;
        else if (!(c == 'a' && cli_parse_long("--after", optarg, 0, INT64_MAX, &after) == 0) &&
                 !(c == 'l' && cli_parse_long("--limit", optarg, 1, INT64_MAX, &limit) == 0)) {
            ledger_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    if (argc - optind < 2) {
        ledger_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *verb = argv[optind];
    char *l = cli_escape(argv[optind + 1]);
    int rc = CLI_EXIT_USAGE;
    if (strcmp(verb, "submit") == 0 || strcmp(verb, "checkpoint") == 0) {
        snprintf(path, sizeof(path), "/ledgers/%s/%s", l,
                 verb[0] == 's' ? "transactions" : "checkpoints");
        rc = ledger_post(conf, path, argc, argv, optind + 2);
    } else if (strcmp(verb, "object") == 0 && argc - optind == 3) {
        char *id = cli_escape(argv[optind + 2]);
        struct cli_http *h = cli_http_new(conf);
        struct cli_reply rep;
        snprintf(path, sizeof(path), "/ledgers/%s/objects/%s", l, id);
        cli_http_call(h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 30, &rep);
        if ((rc = cli_reply_exit(&rep)) == 0)
            cli_out_json(conf, rep.json);
        cli_reply_clear(&rep);
        cli_http_free(h);
        free(id);
    } else if (strcmp(verb, "events") == 0 && argc - optind == 2) {
        rc = ledger_events(conf, l, after, follow, limit);
    } else {
        ledger_usage(stderr);
    }
    free(l);
    return rc;
}
