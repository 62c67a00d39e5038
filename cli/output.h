/* rowlock-cli's output: JSON (one compact line when stdout is not a terminal, indented on one),
 * tables on a terminal, progress on stderr. Knows nothing of HTTP. */
#ifndef CLI_OUTPUT_H
#define CLI_OUTPUT_H

#include <jansson.h>
#include <stddef.h>

#include "cli/cli.h"

/* Prints v (borrowed) on stdout: indented on a terminal, one compact line otherwise. */
void cli_out_json(const struct cli_conf *conf, const json_t *v);
/* Prints v (borrowed) as one compact line on stdout and flushes (NDJSON streams). */
void cli_out_line(const json_t *v);

/* A table of rows (array of objects, borrowed) with these columns (NULL-terminated names of
 * members; nested values shown as compact JSON, long cells cut with "..." since a table is
 * for reading, the JSON output for keeping). */
void cli_out_table(const json_t *rows, const char *const *columns);

/* Prints v (borrowed) as cli_out_json does, except on a terminal when v's member `member` is an
 * array: v is printed without it (it is removed from v), then "<title>:" and the array as a
 * table with these columns. For a record with its history (a job's attempts, a schedule's
 * fires). */
void cli_out_json_table(const struct cli_conf *conf, json_t *v, const char *member,
                        const char *title, const char *const *columns);

/* "\r<label> [====    ] <done> (<pct>%)" on stderr when it is a terminal; fraction is how much
 * of the input is done, from 0 to 1 (< 0: unknown, no bar); final prints the newline. */
void cli_out_progress(const struct cli_conf *conf, const char *label, long long done,
                      double fraction, int final);

#endif
