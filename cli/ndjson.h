/* NDJSON input of enqueue and produce: lines read with their numbers, each turned into one item
 * of a batch request, batches sent one request at a time (up to --batch items or half the
 * service's default body limit), a bad line reported by number with nothing after it sent
 * (unless skip_bad); or, for input whose items refer to each other, every item in one request
 * and nothing sent unless all of it can be. The commands supply how a line becomes an item and
 * count the answers. */
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
    /* Every item in one request (items that name each other, as a job graph's refs): nothing is
     * sent before the last line, and a bad line (without skip_bad) stops with nothing sent. */
    int one_request;
    const char *label; /* progress label */
    /* The item of one line's value (a new reference; value borrowed) or NULL with why filled. */
    json_t *(*item)(json_t *value, long long line, void *arg, char *why, size_t whysize);
    /* Counts a batch's answer (borrowed). */
    void (*answer)(const json_t *answer, void *arg);
    /* Called with a refused batch's problem (borrowed, NULL when not JSON) after it is printed,
     * to say more of it (NULL: nothing more). */
    void (*refused)(const json_t *problem, void *arg);
    void *arg;
    long long lines, sent, bad; /* read, sent in answered batches, skipped */
    long long bytes, size;      /* read so far; the input's size when it is a file, else 0 */
};

/* Sends every line of f. Returns an exit code (printed when not 0). */
int cli_ndjson_run_file(struct cli_ndjson_batch *b, FILE *f);
/* Sends each of args (JSON texts) as if they were lines 1..n. */
int cli_ndjson_run_args(struct cli_ndjson_batch *b, int n, char **args);

/* What a look through the input before sending found: its non-blank lines and the first line
 * that marked() was true of (0: none). */
struct cli_ndjson_scan {
    long long items, first_marked;
};

/* Reads f to its end, calling marked(text, len) on each non-blank line until one is true, and
 * sets *replay to a stream that reads the same lines again from the start: f itself rewound
 * when it can seek, else a temporary file holding a copy (the caller fcloses *replay when it is
 * not f). Returns 0, or CLI_EXIT_OTHER after printing why (a read or write error). */
int cli_ndjson_scan(FILE *f, int (*marked)(const char *text, size_t len), FILE **replay,
                    struct cli_ndjson_scan *out);

#endif
