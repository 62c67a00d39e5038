/* rowlock-cli's output: JSON lines, indented JSON and tables on stdout, progress on stderr.
 * The commands decide what to print; this file only decides how. */
#include "cli/output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CELL_MAX 48

void cli_out_json(const struct cli_conf *conf, const json_t *v)
{
    size_t flags = JSON_ENCODE_ANY | (conf->out_tty ? JSON_INDENT(2) : JSON_COMPACT);
    char *text = json_dumps(v, flags);
    if (text)
        printf("%s\n", text);
    free(text);
    fflush(stdout);
}

void cli_out_line(const json_t *v)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (text)
        printf("%s\n", text);
    free(text);
    fflush(stdout);
}

/* The cell text of a member (a new string). */
static char *cell_text(const json_t *v)
{
    char *text;
    if (!v || json_is_null(v))
        text = strdup("-");
    else if (json_is_string(v))
        text = strdup(json_string_value(v));
    else
        text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (text && strlen(text) > CELL_MAX)
        strcpy(text + CELL_MAX - 3, "...");
    for (char *p = text; p && *p; p++)
        if (*p == '\n' || *p == '\t' || *p == '\r')
            *p = ' ';
    return text;
}

void cli_out_table(const json_t *rows, const char *const *columns)
{
    size_t ncol = 0, width[32] = {0}, i;
    const json_t *row;
    while (columns[ncol] && ncol < 32) {
        width[ncol] = strlen(columns[ncol]);
        ncol++;
    }
    json_array_foreach(rows, i, row)
    {
        for (size_t c = 0; c < ncol; c++) {
            char *t = cell_text(json_object_get(row, columns[c]));
            if (t && strlen(t) > width[c])
                width[c] = strlen(t);
            free(t);
        }
    }
    for (size_t c = 0; c < ncol; c++)
        printf("%-*s%s", (int)width[c], columns[c], c + 1 < ncol ? "  " : "\n");
    json_array_foreach(rows, i, row)
    {
        for (size_t c = 0; c < ncol; c++) {
            char *t = cell_text(json_object_get(row, columns[c]));
            printf("%-*s%s", (int)width[c], t ? t : "", c + 1 < ncol ? "  " : "\n");
            free(t);
        }
    }
    fflush(stdout);
}

void cli_out_json_table(const struct cli_conf *conf, json_t *v, const char *member,
                        const char *title, const char *const *columns)
{
    json_t *rows = json_object_get(v, member);
    if (!conf->out_tty || !json_is_array(rows)) {
        cli_out_json(conf, v);
        return;
    }
    json_incref(rows);
    json_object_del(v, member);
    cli_out_json(conf, v);
    printf("\n%s:\n", title);
    cli_out_table(rows, columns);
    json_decref(rows);
}

void cli_out_progress(const struct cli_conf *conf, const char *label, long long done,
                      double fraction, int final)
{
    if (!conf->err_tty)
        return;
    if (fraction >= 0) {
        int bar = (int)((fraction > 1 ? 1 : fraction) * 30);
        fprintf(stderr, "\r%s [%.*s%*s] %lld (%d%%)", label, bar,
                "==============================", 30 - bar, "", done,
                (int)((fraction > 1 ? 1 : fraction) * 100));
    } else {
        fprintf(stderr, "\r%s %lld", label, done);
    }
    if (final)
        fputc('\n', stderr);
    fflush(stderr);
}
