/* rowlock-cli's shapes of a command on a REST resource: a body from an argument or stdin, one
 * printed call, every page of a name-cursor list (keys, queues, schedules). Nothing here knows
 * a resource; the commands name the paths, members and columns. */
#include "cli/rest.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/output.h"

json_t *cli_rest_body(int argc, char **argv, int at, const char *what)
{
    json_error_t err;
    json_t *v = at < argc ? json_loads(argv[at], JSON_DECODE_ANY, &err)
                          : json_loadf(stdin, JSON_DECODE_ANY, &err);
    if (!v)
        cli_errorf("usage: %s is not JSON: %s", what, err.text);
    return v;
}

int cli_rest_print(const struct cli_conf *conf, struct cli_http *h, const char *method,
                   const char *path, const json_t *body, int flags)
{
    struct cli_reply rep;
    cli_http_call(h, method, path, body, flags, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0)
        cli_out_json(conf, rep.json);
    cli_reply_clear(&rep);
    return rc;
}

/* One page of the list into rows (on a terminal) or stdout; *after becomes the escaped cursor of
 * the next page (free()), or NULL after the last. Returns the exit code. */
static int list_page(const struct cli_conf *conf, struct cli_http *h, const char *path,
                     const char *member, json_t *rows, char **after)
{
    char url[4096];
    struct cli_reply rep;
    snprintf(url, sizeof(url), "%s?limit=1000%s%s", path, *after ? "&after=" : "",
             *after ? *after : "");
    free(*after);
    *after = NULL;
    cli_http_call(h, "GET", url, NULL, CLI_HTTP_IDEMPOTENT, 60, &rep);
    int rc = cli_reply_exit(&rep);
    if (rc == 0) {
        size_t i;
        json_t *row, *next = json_object_get(rep.json, "next");
        json_array_foreach(json_object_get(rep.json, member), i, row)
        {
            if (conf->out_tty)
                json_array_append(rows, row);
            else
                cli_out_line(row);
        }
        if (json_is_string(next))
            *after = cli_http_escape(h, json_string_value(next));
    }
    cli_reply_clear(&rep);
    return rc;
}

int cli_rest_list(const struct cli_conf *conf, struct cli_http *h, const char *path,
                  const char *member, const char *const *columns)
{
    json_t *rows = json_array();
    char *after = NULL;
    int rc;
    do
        rc = list_page(conf, h, path, member, rows, &after);
    while (rc == 0 && after != NULL);
    if (rc == 0 && conf->out_tty)
        cli_out_table(rows, columns);
    json_decref(rows);
    return rc;
}
