/* Log lines of db/ (see notice.h): the caller's log function or a plain line on stderr, and
 * libpq's notice receiver, which sends server notices to the log instead of stderr. */
#include "db/notice.h"

#include <stdio.h>
#include <string.h>

void db_log_line(db_log_fn log, void *ctx, enum db_log_level level, const char *msg,
                 const char *const *fields)
{
    if (log != NULL) {
        log(ctx, level, msg, fields);
        return;
    }
    if (level == DB_LOG_DEBUG)
        return;
    char line[1024];
    int n = snprintf(line, sizeof(line), "rowlock db: %s", msg);
    for (int i = 0; fields[i] != NULL && n > 0 && (size_t)n < sizeof(line); i += 2)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%s",
                      fields[i] + (fields[i][0] == '#'), fields[i + 1]);
    fprintf(stderr, "%s\n", line);
}

/* A message from libpq or the server, one line, without its trailing newline. */
static void trim_copy(char *out, size_t size, const char *msg)
{
    snprintf(out, size, "%s", msg ? msg : "");
    size_t n = strlen(out);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
    for (char *q = out; *q; q++)
        if (*q == '\n' || *q == '\t')
            *q = ' ';
}

/* libpq's notice receiver: server notices and warnings (and errors that arrive on an idle
 * connection, such as "terminating connection") become log lines. */
void db_log_notice(db_log_fn log, void *ctx, const PGresult *res)
{
    const char *sev = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
    const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
    char text[512];
    trim_copy(text, sizeof(text), primary ? primary : PQresultErrorMessage(res));
    enum db_log_level level = DB_LOG_WARN;
    if (sev != NULL && (strcmp(sev, "NOTICE") == 0 || strcmp(sev, "INFO") == 0 ||
                        strcmp(sev, "DEBUG") == 0 || strcmp(sev, "LOG") == 0))
        level = DB_LOG_DEBUG;
    const char *fields[] = {"severity", sev ? sev : "", "sqlstate",      state ? state : "",
                            "detail",   text,           "server_detail", detail ? detail : "",
                            NULL};
    if (detail == NULL)
        fields[6] = NULL;
    db_log_line(log, ctx, level, "database notice", fields);
}
