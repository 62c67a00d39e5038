/* rowlock-cli's topic commands: produce (NDJSON stdin, batched, producer sequences from line
 * numbers so a re-run of the same file lands once), tail (NDJSON out, long-polling, optionally
 * resuming from and committing to a consumer cursor) and head get|put|patch|delete. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/http.h"
#include "cli/ndjson.h"
#include "cli/output.h"
#include "cli/rest.h"

#define TAIL_WAIT_S 20

struct produce_counts {
    long long produced, duplicates;
    int sequences; /* a producer was named: sequence = line number */
};

static json_t *produce_item(json_t *value, long long line, void *arg, char *why, size_t whysize)
{
    const struct produce_counts *c = arg;
    if (!json_is_object(value) || !json_is_string(json_object_get(value, "key")) ||
        !json_object_get(value, "value")) {
        snprintf(why, whysize, "each line is a message {\"key\": \"...\", \"value\": ...}");
        return NULL;
    }
    json_t *item = json_copy(value);
    if (c->sequences && !json_object_get(item, "sequence"))
        json_object_set_new(item, "sequence", json_integer(line));
    return item;
}

static void produce_answer(const json_t *answer, void *arg)
{
    struct produce_counts *c = arg;
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(answer, "messages"), i, m)
    {
        const char *head = json_string_value(json_object_get(m, "head"));
        if (head && strcmp(head, "duplicate") == 0)
            c->duplicates++;
        else
            c->produced++;
    }
}

static void produce_usage(FILE *f)
{
    fprintf(f, "usage: rowlock-cli produce TOPIC [--producer P] [--batch N] [--skip-bad]\n\n"
               "Produces each line of NDJSON on stdin ({\"key\": ..., \"value\": ..., \"rank\"?})\n"
               "in batches of --batch (default 500, at most 1000) messages per request. With a\n"
               "registered --producer each message's sequence is its line number (unless the line\n"
               "has one), so running the same file again lands every message once. A bad line is\n"
               "reported by its number and nothing after it is sent, unless --skip-bad. Prints\n"
               "{\"produced\",\"duplicates\",\"lines\"}.\n");
}

int cli_cmd_produce(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"producer", required_argument, NULL, 'p'},
                                         {"batch", required_argument, NULL, 'b'},
                                         {"skip-bad", no_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct produce_counts counts = {0};
    struct cli_ndjson_batch b = {.conf = conf,
                                 .array_key = "messages",
                                 .max_items = 500,
                                 .label = "produced",
                                 .item = produce_item,
                                 .answer = produce_answer,
                                 .arg = &counts};
    const char *producer = NULL;
    char path[1024];
    long long v;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'p')
            producer = optarg;
        else if (c == 's')
            b.skip_bad = 1;
        else if (c == 'b' && cli_parse_long("--batch", optarg, 1, 1000, &v) == 0)
            b.max_items = (size_t)v;
        else {
            produce_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        produce_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    char *t = cli_escape(argv[optind]);
    snprintf(path, sizeof(path), "/topics/%s/messages", t);
    free(t);
    b.path = path;
    b.http = cli_http_new(conf);
    if (producer) {
        b.extra = json_pack("{s:s}", "producer", producer);
        b.flags = CLI_HTTP_IDEMPOTENT; /* sequences make a resend land once */
        counts.sequences = 1;
    }
    int rc = cli_ndjson_run_file(&b, stdin);
    json_t *summary =
        json_pack("{s:I, s:I, s:I}", "produced", (json_int_t)counts.produced, "duplicates",
                  (json_int_t)counts.duplicates, "lines", (json_int_t)b.lines);
    if (b.bad)
        json_object_set_new(summary, "bad_lines", json_integer(b.bad));
    cli_out_json(conf, summary);
    json_decref(summary);
    json_decref(b.extra);
    cli_http_free(b.http);
    return rc;
}

struct tail {
    const struct cli_conf *conf;
    struct cli_http *h;
    char *topic;    /* escaped */
    char *consumer; /* escaped, or NULL */
    int follow;
    long long limit, printed; /* limit 0: none */
    long long after;          /* the next read's after (without a consumer) */
    long long committed;      /* the consumer's committed offset */
};

/* One page from the log; prints its messages. *empty: nothing new could be shown. */
static int tail_page(struct tail *t, long wait_s, int print, int *empty)
{
    char path[1024], wait[32] = "";
    struct cli_reply rep;
    long long want = t->limit ? t->limit - t->printed : 1000;
    if (wait_s)
        snprintf(wait, sizeof(wait), "&wait=%ld", wait_s);
    if (t->consumer)
        snprintf(path, sizeof(path), "/topics/%s/messages?consumer=%s&limit=%lld%s", t->topic,
                 t->consumer, want < 1000 ? want : 1000, wait);
    else
        snprintf(path, sizeof(path), "/topics/%s/messages?after=%lld&limit=%lld%s", t->topic,
                 t->after, want < 1000 ? want : 1000, wait);
    cli_http_call(t->h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, wait_s + 30, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0) {
        json_t *msgs = json_object_get(rep.json, "messages"), *m;
        long long next = json_integer_value(json_object_get(rep.json, "next"));
        size_t i;
        json_array_foreach(msgs, i, m)
        {
            if (print)
                cli_out_line(m);
        }
        t->printed += print ? (long long)json_array_size(msgs) : 0;
        *empty = json_array_size(msgs) == 0 && next == (t->consumer ? t->committed : t->after);
        t->after = next;
    }
    cli_reply_clear(&rep);
    return rc;
}

/* The consumer's committed offset into t->committed. */
static int consumer_offset(struct tail *t)
{
    char path[1024];
    struct cli_reply rep;
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s", t->topic, t->consumer);
    cli_http_call(t->h, "GET", path, NULL, CLI_HTTP_IDEMPOTENT, 30, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0)
        t->committed = json_integer_value(json_object_get(rep.json, "offset"));
    cli_reply_clear(&rep);
    return rc;
}

/* Creates the consumer when missing (start: from), then reads its offset. */
static int consumer_open(struct tail *t, const char *from)
{
    char path[1024];
    struct cli_reply rep;
    long long off = 0;
    json_t *body = strcmp(from, "beginning") == 0 || strcmp(from, "end") == 0
                       ? json_pack("{s:s}", "start", from)
                   : cli_parse_long("--from", from, 0, INT64_MAX, &off) == 0
                       ? json_pack("{s:I}", "offset", (json_int_t)off)
                       : NULL;
    if (!body)
        return CLI_EXIT_USAGE;
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s", t->topic, t->consumer);
    cli_http_call(t->h, "PUT", path, body, CLI_HTTP_IDEMPOTENT, 30, &rep);
    int rc = cli_reply_exit(&rep);
    cli_reply_clear(&rep);
    json_decref(body);
    return rc ? rc : consumer_offset(t);
}

/* Commits t->after as the consumer's offset, expecting t->committed. A conflict (another
 * reader moved it) re-reads the offset and goes on from there. */
static int consumer_commit(struct tail *t)
{
    char path[1024];
    struct cli_reply rep;
    if (t->after == t->committed)
        return 0;
    json_t *body =
        json_pack("{s:I, s:I}", "offset", (json_int_t)t->after, "expect", (json_int_t)t->committed);
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s/commit", t->topic, t->consumer);
    cli_http_call(t->h, "POST", path, body, CLI_HTTP_IDEMPOTENT, 30, &rep);
    json_decref(body);
    int rc = 0;
    if (rep.status == 200) {
        t->committed = t->after;
    } else if (rep.status == 409) {
        cli_errorf("%s: %s; going on from its committed offset", rep.code, rep.detail);
        rc = consumer_offset(t);
    } else {
        rc = cli_reply_exit(&rep);
    }
    cli_reply_clear(&rep);
    return rc;
}

/* Where a read without a consumer starts: 0, OFFSET, or the end of the log (read up to it). */
static int tail_start(struct tail *t, const char *from)
{
    int empty = 0, rc = 0;
    if (strcmp(from, "beginning") == 0)
        return 0;
    if (strcmp(from, "end") != 0)
        return cli_parse_long("--from", from, 0, INT64_MAX, &t->after) ? CLI_EXIT_USAGE : 0;
    long long limit = t->limit;
    t->limit = 0;
    while (rc == 0 && !empty)
        rc = tail_page(t, 0, 0, &empty);
    t->limit = limit;
    return rc;
}

static void tail_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli tail TOPIC [--follow] [--from beginning|end|OFFSET]\n"
            "                            [--consumer NAME] [--limit N]\n\n"
            "Prints the topic's log as NDJSON, one message per line, from --from (default:\n"
            "the beginning; OFFSET: the messages after it). --follow keeps long-polling for new\n"
            "messages. --consumer NAME reads after the consumer's committed offset (creating\n"
            "it at --from when it does not exist) and commits each page once printed\n"
            "(compare-and-set: a conflict with another reader is reported and reading goes on\n"
            "from the offset it committed). --limit stops after N messages.\n");
}

static int tail_options(int argc, char **argv, struct tail *t, const char **from)
{
    static const struct option opts[] = {
        {"follow", no_argument, NULL, 'f'},         {"from", required_argument, NULL, 'F'},
        {"consumer", required_argument, NULL, 'c'}, {"limit", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "hf", opts, NULL)) != -1) {
        if (c == 'f')
            t->follow = 1;
        else if (c == 'F')
            *from = optarg;
        else if (c == 'c')
            t->consumer = cli_escape(optarg);
        else if (c != 'l' || cli_parse_long("--limit", optarg, 1, INT64_MAX, &t->limit) != 0) {
            tail_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? -1 : CLI_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        tail_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    t->topic = cli_escape(argv[optind]);
    return 0;
}

int cli_cmd_tail(const struct cli_conf *conf, int argc, char **argv)
{
    struct tail t = {.conf = conf};
    const char *from = "beginning";
    int empty = 0, rc = tail_options(argc, argv, &t, &from);
    if (rc)
        goto done;
    t.h = cli_http_new(conf);
    rc = t.consumer ? consumer_open(&t, from) : tail_start(&t, from);
    while (rc == 0 && (!t.limit || t.printed < t.limit)) {
        rc = tail_page(&t, t.follow && empty ? TAIL_WAIT_S : 0, 1, &empty);
        if (rc == 0 && t.consumer)
            rc = consumer_commit(&t);
        if (empty && !t.follow)
            break;
    }
done:
    free(t.topic);
    free(t.consumer);
    cli_http_free(t.h);
    return rc < 0 ? 0 : rc;
}

static void head_usage(FILE *f)
{
    fprintf(f, "usage: rowlock-cli head get TOPIC KEY\n"
               "       rowlock-cli head put TOPIC KEY [JSON] [--if-match ETAG] [--producer P]\n"
               "       rowlock-cli head patch TOPIC KEY [JSON] [--producer P]\n"
               "       rowlock-cli head delete TOPIC KEY [--producer P]\n\n"
               "A key's head: get prints it, put replaces the value, patch merges an RFC 7396\n"
               "patch onto it, delete writes a tombstone. Without JSON the body is read from\n"
               "stdin. --if-match makes put conditional (exit 4 when the head moved).\n");
}

int cli_cmd_head(const struct cli_conf *conf, int argc, char **argv)
{
    static const struct option opts[] = {{"if-match", required_argument, NULL, 'm'},
                                         {"producer", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    static const char *const verbs[][2] = {
        {"get", "GET"}, {"put", "PUT"}, {"patch", "PATCH"}, {"delete", "DELETE"}};
    const char *if_match = NULL, *producer = NULL, *method = NULL;
    char path[4096], header[512];
    struct cli_reply rep;
    json_t *body = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'm')
            if_match = optarg;
        else if (c == 'p')
            producer = optarg;
        else {
            head_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? 0 : CLI_EXIT_USAGE;
        }
    }
    for (size_t i = 0; optind < argc && i < 4; i++)
        if (strcmp(argv[optind], verbs[i][0]) == 0)
            method = verbs[i][1];
    if (!method || argc - optind < 3) {
        head_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    int writes = strcmp(method, "PUT") == 0 || strcmp(method, "PATCH") == 0;
    if (writes && !(body = cli_rest_body(argc, argv, optind + 3, "the value")))
        return CLI_EXIT_USAGE;
    char *t = cli_escape(argv[optind + 1]), *k = cli_escape(argv[optind + 2]);
    char *p = producer ? cli_escape(producer) : NULL;
    snprintf(path, sizeof(path), "/topics/%s/keys/%s/head%s%s", t, k, p ? "?producer=" : "",
             p ? p : "");
    struct cli_http *h = cli_http_new(conf);
    if (if_match) {
        snprintf(header, sizeof(header), "If-Match: %s%s%s", if_match[0] == '"' ? "" : "\"",
                 if_match, if_match[0] == '"' ? "" : "\"");
        cli_http_header(h, header);
    }
    int flags = strcmp(method, "PATCH") == 0 ? 0 : CLI_HTTP_IDEMPOTENT;
    cli_http_call(h, method, path, body, flags, 30, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0)
        cli_out_json(conf, rep.json);
    cli_reply_clear(&rep);
    cli_http_free(h);
    json_decref(body);
    free(t);
    free(k);
    free(p);
    return rc;
}
