/* rowlock-cli's schedules command: list (every page, a table on a terminal), get (with its
 * newest fires), put (the configuration from options; the service checks every value and
 * names the one at fault), delete and fire (one job now). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/output.h"
#include "cli/rest.h"

static void schedules_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli schedules list\n"
            "       rowlock-cli schedules get NAME\n"
            "       rowlock-cli schedules put NAME --cron EXPR --queue Q [--time-zone Z]\n"
            "                 [--payload JSON] [--misfire skip|catch_up] [--catch-up-max N]\n"
            "                 [--grace S] [--jitter S] [--priority N] [--max-attempts N]\n"
            "                 [--paused]\n"
            "       rowlock-cli schedules delete NAME\n"
            "       rowlock-cli schedules fire NAME\n\n"
            "A schedule enqueues one job into queue Q at every tick of the cron expression EXPR\n"
            "(5 fields, or 6 with leading seconds, or @daily and the like) in time zone Z (an\n"
            "IANA name, default UTC). list prints every schedule (NDJSON, or a table on a\n"
            "terminal); get one, with its next ticks and newest fires. put creates or replaces\n"
            "the whole schedule: options left out take the service's defaults (payload {},\n"
            "misfire skip, catch-up-max 10, grace 60 s, jitter 0 s, priority 0, the queue's\n"
            "max-attempts, running). --misfire says what becomes of ticks handled more than\n"
            "--grace seconds late (after downtime): skip skips them, catch_up enqueues the\n"
            "newest --catch-up-max of them. --jitter S makes each job due up to S seconds\n"
            "after its tick. fire enqueues one job now (the next tick stays). An invalid\n"
            "value exits 2 with the service's reason, an unknown schedule 3.\n"
            "scopes: list and get need read, put and delete admin, fire write.\n");
}

/* The options of put, as they go into its body. */
struct put_opts {
    json_t *body; /* owned */
    const char *cron, *queue;
};

/* Sets body[key] to the integer s (an option's argument): 0, or -1 after printing why not. The
 * service checks its range and says what the range is. */
static int put_int(json_t *body, const char *opt, const char *key, const char *s)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno) {
        cli_errorf("usage: %s must be an integer (got '%s')", opt, s);
        return -1;
    }
    return json_object_set_new(body, key, json_integer(v));
}

/* One option of put into p; 0, or -1 after printing why not. */
static int put_option(struct put_opts *p, int c, const char *arg)
{
    json_error_t err;
    json_t *v;
    switch (c) {
    case 'c':
        p->cron = arg;
        return json_object_set_new(p->body, "cron", json_string(arg));
    case 'q':
        p->queue = arg;
        return json_object_set_new(p->body, "queue", json_string(arg));
    case 'z':
        return json_object_set_new(p->body, "time_zone", json_string(arg));
    case 'm':
        return json_object_set_new(p->body, "misfire", json_string(arg));
    case 'P':
        if ((v = json_loads(arg, JSON_DECODE_ANY, &err)) == NULL) {
            cli_errorf("usage: --payload is not JSON: %s", err.text);
            return -1;
        }
        return json_object_set_new(p->body, "payload", v);
    case 'n':
        return put_int(p->body, "--catch-up-max", "catch_up_max", arg);
    case 'g':
        return put_int(p->body, "--grace", "misfire_grace_seconds", arg);
    case 'j':
        return put_int(p->body, "--jitter", "jitter_seconds", arg);
    case 'p':
        return put_int(p->body, "--priority", "priority", arg);
    case 'a':
        return put_int(p->body, "--max-attempts", "max_attempts", arg);
    case 's':
        return json_object_set_new(p->body, "paused", json_true());
    default:
        return -1;
    }
}

static const char *const schedule_columns[] = {
    "name",         "cron",         "time_zone", "queue",   "paused",
    "next_fire_at", "last_fire_at", "fired",     "skipped", NULL};
static const char *const fire_columns[] = {"fire_at", "enqueued_at", "job_id", "manual", NULL};

/* Sends method path with body (borrowed, NULL: none) and prints the answer; on a terminal a
 * schedule's last_fires come as a table after it. Returns the exit code. */
static int schedules_call(const struct cli_conf *conf, struct cli_http *h, const char *method,
                          const char *path, const json_t *body)
{
    struct cli_reply rep;
    int flags = strcmp(method, "POST") == 0 ? 0 : CLI_HTTP_IDEMPOTENT;
    cli_http_call(h, method, path, body, flags, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0)
        cli_out_json_table(conf, rep.json, "last_fires", "last fires", fire_columns);
    cli_reply_clear(&rep);
    return rc;
}

/* The verb of argv after the options, with its NAME; run with the put options in p. */
static int schedules_run(const struct cli_conf *conf, const char *verb, const char *name,
                         struct put_opts *p)
{
    static const char *const verbs[][2] = {
        {"get", "GET"}, {"put", "PUT"}, {"delete", "DELETE"}, {"fire", "POST"}};
    const char *method = NULL;
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verb, verbs[i][0]) == 0)
            method = verbs[i][1];
    if (method == NULL || name == NULL) {
        schedules_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(verb, "put") != 0 && json_object_size(p->body) > 0) {
        cli_errorf("usage: only schedules put takes options");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(verb, "put") == 0 && (p->cron == NULL || p->queue == NULL)) {
        cli_errorf("usage: schedules put NAME needs --cron EXPR and --queue Q");
        return CLI_EXIT_USAGE;
    }
    struct cli_http *h = cli_http_new(conf);
    char path[1024], *n = cli_http_escape(h, name);
    snprintf(path, sizeof(path), "/schedules/%s%s", n ? n : "",
             strcmp(verb, "fire") == 0 ? "/fire" : "");
    int rc = schedules_call(conf, h, method, path, strcmp(verb, "put") == 0 ? p->body : NULL);
    free(n);
    cli_http_free(h);
    return rc;
}

int cli_cmd_schedules(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"cron", required_argument, NULL, 'c'},
                                         {"queue", required_argument, NULL, 'q'},
                                         {"time-zone", required_argument, NULL, 'z'},
                                         {"payload", required_argument, NULL, 'P'},
                                         {"misfire", required_argument, NULL, 'm'},
                                         {"catch-up-max", required_argument, NULL, 'n'},
                                         {"grace", required_argument, NULL, 'g'},
                                         {"jitter", required_argument, NULL, 'j'},
                                         {"priority", required_argument, NULL, 'p'},
                                         {"max-attempts", required_argument, NULL, 'a'},
                                         {"paused", no_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct put_opts p = {.body = json_object()};
    int c, rc = CLI_EXIT_USAGE;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'h' || c == '?' || put_option(&p, c, optarg) != 0) {
            if (c == 'h' || c == '?')
                schedules_usage(c == 'h' ? stdout : stderr);
            rc = c == 'h' ? CLI_EXIT_OK : CLI_EXIT_USAGE;
            goto done;
        }
    }
    const char *verb = optind < argc ? argv[optind] : "";
    int nargs = argc - optind;
    if (strcmp(verb, "list") == 0 && nargs == 1 && json_object_size(p.body) == 0) {
        struct cli_http *h = cli_http_new(conf);
        rc = cli_rest_list(conf, h, "/schedules", "schedules", schedule_columns);
        cli_http_free(h);
    } else {
        rc = schedules_run(conf, verb, nargs == 2 ? argv[optind + 1] : NULL, &p);
    }
done:
    json_decref(p.body);
    return rc;
}
