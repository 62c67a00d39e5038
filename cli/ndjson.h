/* NDJSON input of enqueue and produce: lines read with their numbers, each turned into one item
 * of a batch request, batches sent one request at a time (up to --batch items or half the
 * service's default body limit), a bad line reported by number with nothing after it sent
 * (unless skip_bad). The commands supply how a line becomes an item and count the answers. */
#ifndef CLI_NDJSON_H
#define CLI_NDJSON_H

#include <jansson.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/http.h"

struct cli_ndjson_batch {
    const struct cli_conf *conf;
    struct cli_http *http;
    const char *path;      /* POST target */
    const char *array_key; /* "jobs" or "messages" */
    json_t *extra;         /* more members of every request body (borrowed), or NULL */
    int flags;             /* cli_http_call flags */
    size_t max_items;
    int skip_bad;
    const char *label; /* progress label */
    /* The item of one line's value (a new reference; value borrowed) or NULL with why filled. */
    json_t *(*item)(json_t *value, long long line, void *arg, char *why, size_t whysize);
    /* Counts a batch's answer (borrowed). */
    void (*answer)(const json_t *answer, void *arg);
    void *arg;
    long long lines, sent, bad; /* read, sent in answered batches, skipped */
    long long bytes, size;      /* read so far; the input's size when it is a file, else 0 */
};

/* Sends every line of f. Returns an exit code (printed when not 0). */
int cli_ndjson_run_file(struct cli_ndjson_batch *b, FILE *f);
/* Sends each of args (JSON texts) as if they were lines 1..n. */
int cli_ndjson_run_args(struct cli_ndjson_batch *b, int n, char **args);

#endif
