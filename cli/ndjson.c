/* NDJSON reading and batch sending for enqueue and produce: line numbers, a byte bound per
 * batch, one request per batch, and the rule for a bad line (reported by number; the lines
 * before it are sent, nothing after it unless --skip-bad); the one-request mode of items that
 * name each other, and the look through the input that tells a command it needs that mode. */
#include "cli/ndjson.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/output.h"

#define BATCH_BYTES    (512u * 1024u) /* half the service's default body limit */
#define LINE_MAX_BYTES (1024u * 1024u)

struct pending {
    json_t *items;
    size_t bytes;
};

/* Sends the pending items as one request. Returns 0 or an exit code (printed). */
static int batch_flush(struct cli_ndjson_batch *b, struct pending *p)
{
    struct cli_reply rep;
    size_t n = json_array_size(p->items);
    if (n == 0)
        return 0;
    json_t *body = b->extra ? json_deep_copy(b->extra) : json_object();
    json_object_set(body, b->array_key, p->items);
    int rc = cli_http_call(b->http, "POST", b->path, body, b->flags, 60, &rep);
    json_decref(body);
    if (rc == 0 && rep.status >= 200 && rep.status < 300) {
        b->answer(rep.json, b->arg);
        b->sent += (long long)n;
    } else {
        rc = cli_reply_exit(&rep);
        if (b->refused != NULL)
            b->refused(rep.json, b->arg);
        if (b->one_request && rc != CLI_EXIT_UNAVAILABLE)
            cli_errorf("nothing was written: the %zu %s of lines 1 to %lld went in one request, "
                       "refused as a whole",
                       n, n == 1 ? "item" : "items", b->lines);
        else if (n > 1 || b->sent > 0)
            cli_errorf("the batch of lines %lld to %lld was not sent; %lld lines before it were",
                       b->lines - (long long)n + 1, b->lines, b->sent);
    }
    cli_reply_clear(&rep);
    json_array_clear(p->items);
    p->bytes = 0;
    cli_out_progress(b->conf, b->label, b->sent, b->size ? (double)b->bytes / (double)b->size : -1,
                     0);
    return rc;
}

/* One line's text: skips blank lines (0), adds the item (0), or reports a bad line (-1, or an
 * exit code from a flush). */
static int batch_line(struct cli_ndjson_batch *b, struct pending *p, const char *text, size_t len)
{
    char why[256] = "";
    json_error_t jerr;
    size_t k = 0;
    while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\r' || text[k] == '\n'))
        k++;
    if (k == len)
        return 0;
    json_t *value = len > LINE_MAX_BYTES ? NULL : json_loadb(text, len, JSON_DECODE_ANY, &jerr);
    json_t *item = value ? b->item(value, b->lines, b->arg, why, sizeof(why)) : NULL;
    if (!value)
        snprintf(why, sizeof(why), "invalid JSON: %s",
                 len > LINE_MAX_BYTES ? "longer than 1 MiB" : jerr.text);
    json_decref(value);
    if (!item) {
        cli_errorf("line %lld: %s", b->lines, why);
        b->bad++;
        return b->skip_bad ? 0 : -1;
    }
    char *dumped = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t size = dumped ? strlen(dumped) : 0;
    free(dumped);
    if (b->one_request && json_array_size(p->items) >= b->max_items) {
        json_decref(item);
        cli_errorf("line %lld: more than %zu items, which must all go in one request; nothing "
                   "was sent",
                   b->lines, b->max_items);
        return CLI_EXIT_USAGE;
    }
    if (!b->one_request && json_array_size(p->items) && p->bytes + size > BATCH_BYTES) {
        b->lines--; /* the flush names the lines before this one */
        int rc = batch_flush(b, p);
        b->lines++;
        if (rc)
            return rc;
    }
    json_array_append_new(p->items, item);
    p->bytes += size + 1;
    if (!b->one_request && json_array_size(p->items) >= b->max_items)
        return batch_flush(b, p);
    return 0;
}

/* After the last line or a bad one: sends what is pending and says how it ended. */
static int batch_end(struct cli_ndjson_batch *b, struct pending *p, int rc)
{
    int bad_line = rc == -1;
    if (rc == 0 || (bad_line && !b->one_request)) {
        long long line = b->lines;
        if (bad_line)
            b->lines--;
        int frc = batch_flush(b, p);
        b->lines = line;
        rc = frc ? frc : rc;
    }
    cli_out_progress(b->conf, b->label, b->sent, b->size ? (double)b->bytes / (double)b->size : -1,
                     1);
    if (bad_line && rc == -1 && b->one_request) {
        cli_errorf("stopped at line %lld: nothing was sent, since every line goes in one request "
                   "(--skip-bad skips bad lines)",
                   b->lines);
        rc = CLI_EXIT_USAGE;
    } else if (bad_line && rc == -1) {
        cli_errorf("stopped at line %lld: the %lld items before it were sent, nothing after it "
                   "(--skip-bad skips bad lines)",
                   b->lines, b->sent);
        rc = CLI_EXIT_USAGE;
    }
    json_decref(p->items);
    return rc;
}

int cli_ndjson_run_file(struct cli_ndjson_batch *b, FILE *f)
{
    struct pending p = {json_array(), 0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode))
        b->size = (long long)st.st_size; /* a file: the bar shows how much of it is done */
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        b->lines++;
        b->bytes += len;
        rc = batch_line(b, &p, line, (size_t)len);
    }
    free(line);
    return batch_end(b, &p, rc);
}

int cli_ndjson_run_args(struct cli_ndjson_batch *b, int n, char **args)
{
    struct pending p = {json_array(), 0};
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        b->lines++;
        rc = batch_line(b, &p, args[i], strlen(args[i]));
    }
    return batch_end(b, &p, rc);
}

/* Copies len bytes of text to spool (NULL: none). 0, or -1 after printing why. */
static int spool_write(FILE *spool, const char *text, size_t len)
{
    if (spool == NULL || fwrite(text, 1, len, spool) == len)
        return 0;
    cli_errorf("cannot keep a copy of the input: %s", strerror(errno));
    return -1;
}

/* A stream to read f again from its start: f rewound (0) when it can seek, else a new temporary
 * file in *spool to copy it into (0), or -1 after printing why. */
static int scan_open(FILE *f, off_t *start, FILE **spool)
{
    *spool = NULL;
    *start = ftello(f);
    if (*start >= 0 && fseeko(f, *start, SEEK_SET) == 0)
        return 0;
    if ((*spool = tmpfile()) != NULL)
        return 0;
    cli_errorf("cannot keep a copy of the input: %s", strerror(errno));
    return -1;
}

int cli_ndjson_scan(FILE *f, int (*marked)(const char *text, size_t len), FILE **replay,
                    struct cli_ndjson_scan *out)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    off_t start;
    FILE *spool;
    int rc = CLI_EXIT_OTHER;
    long long lines = 0;
    *out = (struct cli_ndjson_scan){0, 0};
    if (scan_open(f, &start, &spool) != 0)
        return rc;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lines++;
        if (spool_write(spool, line, (size_t)len) != 0)
            goto done;
        if (strspn(line, " \t\r\n") == (size_t)len)
            continue;
        out->items++;
        if (out->first_marked == 0 && marked(line, (size_t)len))
            out->first_marked = lines;
    }
    if (ferror(f)) {
        cli_errorf("cannot read the input: %s", strerror(errno));
        goto done;
    }
    if (spool != NULL ? fflush(spool) != 0 || fseeko(spool, 0, SEEK_SET) != 0
                      : fseeko(f, start, SEEK_SET) != 0) {
        cli_errorf("cannot read the input again: %s", strerror(errno));
        goto done;
    }
    *replay = spool != NULL ? spool : f;
    spool = NULL;
    rc = 0;
done:
    if (spool != NULL)
        fclose(spool);
    free(line);
    return rc;
}
