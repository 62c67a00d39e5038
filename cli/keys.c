/* rowlock-cli's keys command: a queue's concurrency keys. list (the keys with limits of their
 * own, every page), get (any key: its limits in effect and live leases), put (a key's own
 * limits, from options; the service checks every value) and delete (back to the queue's). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/rest.h"

static void keys_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli keys list QUEUE\n"
            "       rowlock-cli keys get QUEUE KEY\n"
            "       rowlock-cli keys put QUEUE KEY [--concurrency N] [--rate N --period S\n"
            "                 [--burst N]]\n"
            "       rowlock-cli keys delete QUEUE KEY\n\n"
            "A job enqueued with a \"concurrency_key\" counts against its queue's key_limits\n"
            "(PUT /queues/QUEUE): at most N of the key's jobs processing at once (--concurrency),\n"
            "at most N claims of them per S seconds with bursts of --burst (--rate, --period).\n"
            "put gives KEY limits of its own instead (a limit left out is the queue's; a rate\n"
            "replaces the queue's rate whole). delete takes them back. get shows any key's\n"
            "limits in effect and its live leases; list the keys with limits of their own\n"
            "(NDJSON, or a table on a terminal). An invalid value exits 2 with the service's\n"
            "reason, an unknown queue (or, for delete, a key without limits of its own) 3.\n"
            "scopes: list and get need read, put and delete admin.\n");
}

/* A number option's value into obj[key] (an integer unless real): 0, or -1 after saying why. */
static int put_number(json_t *obj, const char *opt, const char *key, const char *s, int real)
{
    char *end;
    errno = 0;
    double d = real ? strtod(s, &end) : (double)strtoll(s, &end, 10);
    if (!*s || *end || errno) {
        cli_errorf("usage: %s must be %s (got '%s')", opt, real ? "a number" : "an integer", s);
        return -1;
    }
    return json_object_set_new(obj, key, real ? json_real(d) : json_integer((json_int_t)d));
}

static const char *const key_columns[] = {"key", "processing", "own_limits", NULL};

int cli_cmd_keys(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"concurrency", required_argument, NULL, 'c'},
                                         {"rate", required_argument, NULL, 'r'},
                                         {"period", required_argument, NULL, 'p'},
                                         {"burst", required_argument, NULL, 'b'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    json_t *limits = json_object(), *rate = json_object();
    int c, rc = CLI_EXIT_USAGE;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = c == 'h' || c == '?';
        if (c == 'c')
            bad = put_number(limits, "--concurrency", "concurrency", optarg, 0) != 0;
        else if (c == 'r')
            bad = put_number(rate, "--rate", "limit", optarg, 0) != 0;
        else if (c == 'p')
            bad = put_number(rate, "--period", "period_seconds", optarg, 1) != 0;
        else if (c == 'b')
            bad = put_number(rate, "--burst", "burst", optarg, 0) != 0;
        if (bad) {
            if (c == 'h' || c == '?')
                keys_usage(c == 'h' ? stdout : stderr);
            rc = c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
            goto done;
        }
    }
    const char *verb = optind < argc ? argv[optind] : "";
    int nargs = argc - optind, put = strcmp(verb, "put") == 0;
    if (json_object_size(rate) > 0)
        json_object_set(limits, "rate", rate);
    if (!put && json_object_size(limits) > 0) {
        cli_errorf("usage: only keys put takes options");
        goto done;
    }
    static const char *const verbs[][2] = {{"get", "GET"}, {"put", "PUT"}, {"delete", "DELETE"}};
    const char *method = NULL;
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verb, verbs[i][0]) == 0)
            method = verbs[i][1];
    if (!(strcmp(verb, "list") == 0 && nargs == 2) && (method == NULL || nargs != 3)) {
        keys_usage(stderr);
        goto done;
    }
    struct cli_http *h = cli_http_new(conf);
    char path[4096], *q = cli_http_escape(h, argv[optind + 1]);
    if (method == NULL) {
        snprintf(path, sizeof(path), "/queues/%s/keys", q ? q : "");
        rc = cli_rest_list(conf, h, path, "keys", key_columns);
    } else {
        char *k = cli_http_escape(h, argv[optind + 2]);
        snprintf(path, sizeof(path), "/queues/%s/keys/%s", q ? q : "", k ? k : "");
        json_t *body = put ? json_pack("{s:O}", "limits", limits) : NULL;
        rc = cli_rest_print(conf, h, method, path, body, CLI_HTTP_IDEMPOTENT);
        json_decref(body);
        free(k);
    }
    free(q);
    cli_http_free(h);
done:
    json_decref(rate);
    json_decref(limits);
    return rc;
}
