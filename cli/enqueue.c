/* rowlock-cli enqueue: payloads or whole jobs from arguments or NDJSON stdin, in batches; and a
 * job graph (jobs with "ref", "parents" or "on_parent_failure") in one request, since a ref
 * resolves only within its batch, with each job's id and state printed. The NDJSON reading and
 * sending is ndjson.c's; this file decides what a line becomes and prints the answers. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/http.h"
#include "cli/ndjson.h"
#include "cli/output.h"

/* The most jobs one enqueue request takes (the service's DB_QUEUE_BATCH_MAX, the openapi
 * document's maxItems of a batch's "jobs"): --batch's bound, and a graph's. */
#define ENQUEUE_BATCH_MAX 1000

/* The members of a job that make its input a graph. */
static const char *const graph_members[] = {"ref", "parents", "on_parent_failure", NULL};

struct enqueue_state {
    long long created, duplicates;
    int whole_jobs; /* --jobs: each line is a whole job object, not a payload */
    int graph;      /* some job has a graph member: one request, each job printed */
    json_t *lines;  /* graph: each item's line number, in the batch's order */
    json_t *refs;   /* graph: each item's ref (null without one) */
    json_t *rows;   /* graph: each job as printed: line, ref, id, state (and duplicate) */
};

/* True when value is a job object with a graph member. */
static int is_graph_job(const json_t *value)
{
    for (size_t i = 0; graph_members[i] != NULL; i++)
        if (json_object_get(value, graph_members[i]) != NULL)
            return 1;
    return 0;
}

/* True when the NDJSON line text is a job with a graph member (parsed only when it names one). */
static int line_is_graph_job(const char *text, size_t len)
{
    int found = 0;
    for (size_t i = 0; graph_members[i] != NULL && !found; i++)
        found = memmem(text, len, graph_members[i], strlen(graph_members[i])) != NULL;
    if (!found)
        return 0;
    json_t *value = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    found = is_graph_job(value);
    json_decref(value);
    return found;
}

static json_t *enqueue_item(json_t *value, long long line, void *arg, char *why, size_t whysize)
{
    struct enqueue_state *c = arg;
    if (!c->whole_jobs)
        return json_pack("{s:O}", "payload", value);
    if (!json_is_object(value) || !json_object_get(value, "payload")) {
        snprintf(why, whysize, "with --jobs each line is a job object with a \"payload\"");
        return NULL;
    }
    if (c->graph) {
        json_t *ref = json_object_get(value, "ref");
        json_array_append_new(c->lines, json_integer(line));
        json_array_append_new(c->refs, ref ? json_incref(ref) : json_null());
    }
    return json_incref(value);
}

/* A graph's job i as printed: its line, ref, id and state (waiting or pending; a duplicate's
 * state is its job's). A new reference. */
static json_t *graph_row(const struct enqueue_state *c, size_t i, const json_t *job)
{
    json_t *state = json_object_get(job, "state");
    /* the service says a new job's state when its batch has a parent; refs alone have none, and
     * then every new job is pending */
    json_t *row = json_pack("{s:O, s:O, s:O, s:o}", "line", json_array_get(c->lines, i), "ref",
                            json_array_get(c->refs, i), "id", json_object_get(job, "id"), "state",
                            state ? json_incref(state) : json_string("pending"));
    if (row != NULL && json_is_true(json_object_get(job, "duplicate")))
        json_object_set_new(row, "duplicate", json_true());
    return row;
}

static void enqueue_answer(const json_t *answer, void *arg)
{
    struct enqueue_state *c = arg;
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(answer, "jobs"), i, j)
    {
        if (json_is_true(json_object_get(j, "duplicate")))
            c->duplicates++;
        else
            c->created++;
        if (c->graph)
            json_array_append_new(c->rows, graph_row(c, i, j));
    }
}

/* A refused graph: the line of the job the problem names, and the refs of its cycle. */
static void enqueue_refused(const json_t *problem, void *arg)
{
    const struct enqueue_state *c = arg;
    json_t *job = json_object_get(problem, "job"), *cycle = json_object_get(problem, "cycle");
    if (!c->graph)
        return;
    if (json_is_integer(job) && json_array_get(c->lines, (size_t)json_integer_value(job)))
        cli_errorf("job %lld is line %lld of the input", (long long)json_integer_value(job),
                   (long long)json_integer_value(
                       json_array_get(c->lines, (size_t)json_integer_value(job))));
    if (json_array_size(cycle) > 0) {
        char *refs = json_dumps(cycle, JSON_COMPACT);
        cli_errorf("the cycle, each ref waiting for the next: %s", refs ? refs : "?");
        free(refs);
    }
}

static void enqueue_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli enqueue QUEUE [--jobs] [--batch N] [--skip-bad] [JSON...]\n\n"
            "Enqueues each JSON argument as a job's payload or, without arguments, each line\n"
            "of NDJSON on stdin, in batches of --batch (default 500, at most %d) jobs per\n"
            "request. --jobs: each line is a whole job ({\"payload\": ..., \"dedupe_key\",\n"
            "\"dedupe_window_seconds\", \"priority\", \"delay_seconds\", \"run_at\",\n"
            "\"max_attempts\", \"concurrency_key\", \"ref\", \"parents\",\n"
            "\"on_parent_failure\"}). A line that is not JSON is reported by its number and\n"
            "nothing after it is sent (the lines before it are), unless --skip-bad. Prints\n"
            "{\"created\",\"duplicates\",\"lines\"}; a progress count on a terminal.\n\n"
            "Job graphs: with --jobs, stdin is read to its end before the first request\n"
            "(a pipe's lines kept in a temporary file), and when any job has \"ref\",\n"
            "\"parents\" or \"on_parent_failure\", every job goes in one request, since a\n"
            "ref resolves only within its request (\"parents\": refs of this input, or ids\n"
            "of jobs already enqueued in any queue; \"on_parent_failure\": \"cancel\", the\n"
            "default, or \"run\"). --batch does not apply to a graph; one of more than %d\n"
            "jobs, or with a line that is not JSON (unless --skip-bad), is refused with\n"
            "nothing sent (exit 2). Each job of a graph is printed before the summary:\n"
            "{\"line\",\"ref\",\"id\",\"state\"} (state waiting while a parent has not\n"
            "ended, else pending), or a table on a terminal. A graph the service refuses (a\n"
            "cycle, an unknown parent or ref: exit 2; a parent that failed, or that would\n"
            "have too many children: exit 4) enqueues nothing; the service's reason is\n"
            "printed with the line of the job it names.\n",
            ENQUEUE_BATCH_MAX, ENQUEUE_BATCH_MAX);
}

/* The input's scan as the graph needs it: sets c->graph and checks the graph's size. 0, or an
 * exit code after printing why. */
static int graph_judge(struct enqueue_state *c, long long items, long long first_marked)
{
    c->graph = first_marked > 0;
    if (!c->graph)
        return 0;
    if (items > ENQUEUE_BATCH_MAX) {
        cli_errorf("line %lld names a parent or a ref, so all %lld jobs must go in one request, "
                   "and the service takes at most %d jobs in one: nothing was sent",
                   first_marked, items, ENQUEUE_BATCH_MAX);
        return CLI_EXIT_USAGE;
    }
    c->lines = json_array();
    c->refs = json_array();
    c->rows = json_array();
    return 0;
}

/* The jobs of the arguments (n JSON texts) or, without any, of stdin into b. */
static int enqueue_send(struct cli_ndjson_batch *b, struct enqueue_state *c, int n, char **args)
{
    struct cli_ndjson_scan scan = {0, 0};
    FILE *in = stdin;
    int rc = 0;
    for (int i = 0; c->whole_jobs && i < n; i++) {
        scan.items++;
        if (scan.first_marked == 0 && line_is_graph_job(args[i], strlen(args[i])))
            scan.first_marked = i + 1;
    }
    if (c->whole_jobs && n == 0 && (rc = cli_ndjson_scan(stdin, line_is_graph_job, &in, &scan)))
        return rc;
    if ((rc = graph_judge(c, scan.items, scan.first_marked)) == 0) {
        b->one_request = c->graph;
        b->max_items = c->graph ? ENQUEUE_BATCH_MAX : b->max_items;
        rc = n > 0 ? cli_ndjson_run_args(b, n, args) : cli_ndjson_run_file(b, in);
    }
    if (in != stdin)
        fclose(in);
    return rc;
}

static const char *const graph_columns[] = {"line", "ref", "id", "state", NULL};

/* Prints each job of a graph, then the summary. */
static void enqueue_print(const struct cli_conf *conf, const struct cli_ndjson_batch *b,
                          const struct enqueue_state *c)
{
    size_t i;
    json_t *row;
    if (c->graph && conf->out_tty)
        cli_out_table(c->rows, graph_columns);
    else if (c->graph)
        json_array_foreach(c->rows, i, row) cli_out_line(row);
    json_t *summary = json_pack("{s:I, s:I, s:I}", "created", (json_int_t)c->created, "duplicates",
                                (json_int_t)c->duplicates, "lines", (json_int_t)b->lines);
    if (b->bad)
        json_object_set_new(summary, "bad_lines", json_integer(b->bad));
    cli_out_json(conf, summary);
    json_decref(summary);
}

int cli_cmd_enqueue(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"jobs", no_argument, NULL, 'j'},
                                         {"batch", required_argument, NULL, 'b'},
                                         {"skip-bad", no_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct enqueue_state state = {0};
    struct cli_ndjson_batch b = {.conf = conf,
                                 .array_key = "jobs",
                                 .max_items = 500,
                                 .label = "enqueued",
                                 .item = enqueue_item,
                                 .answer = enqueue_answer,
                                 .refused = enqueue_refused,
                                 .arg = &state};
    long long v;
    char path[1024];
    int c, rc;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'j')
            state.whole_jobs = 1;
        else if (c == 's')
            b.skip_bad = 1;
        else if (c == 'b' && cli_parse_long("--batch", optarg, 1, ENQUEUE_BATCH_MAX, &v) == 0)
            b.max_items = (size_t)v;
        else {
            enqueue_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        enqueue_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    b.http = cli_http_new(conf);
    char *q = cli_http_escape(b.http, argv[optind]);
    snprintf(path, sizeof(path), "/queues/%s/jobs", q);
    b.path = path;
    rc = enqueue_send(&b, &state, argc - optind - 1, argv + optind + 1);
    enqueue_print(conf, &b, &state);
    json_decref(state.lines);
    json_decref(state.refs);
    json_decref(state.rows);
    free(q);
    cli_http_free(b.http);
    return rc;
}
