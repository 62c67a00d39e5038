/* What an audit line holds and writing it (see audit.h); which requests are audited is decided
 * in the completion callback (http.c) from the route table, and the token's name comes from
 * the auth check (http_check.c). */
#include "service/audit.h"

#include <stdio.h>
#include <string.h>

#include "service/log.h"

int svc_route_audited(const struct svc_route *r)
{
    return r->scope == SVC_SCOPE_ADMIN || r->audit == SVC_AUDIT_ALWAYS;
}

/* The literal segment of template right before the parameter that starts at param, without a
 * plural's final 's' ("/queues/{queue}/jobs/{id}", at "{id}": "job"), into out. */
static void segment_before(const char *template, const char *param, char *out, size_t outlen)
{
    const char *end = param > template ? param - 1 : template; /* the '/' before the param */
    const char *start = end;
    while (start > template && start[-1] != '/')
        start--;
    size_t n = (size_t)(end - start);
    if (n > 1 && start[n - 1] == 's')
        n--;
    snprintf(out, outlen, "%.*s", (int)n, start);
}

/* Longest parameter value written (bytes, before escaping): a resource's name is at most 128
 * characters and a job id a number, so only a request refused for its path is ever cut, and the
 * line always fits (a line too long would be dropped whole). */
#define VALUE_MAX 512

static const char *outcome_of(int status)
{
    if (status >= 200 && status < 400)
        return "done";
    return status >= 400 && status < 500 ? "refused" : "failed";
}

void svc_audit_request(const struct svc_audit_request *a)
{
    const char *fields[2 * (7 + SVC_MAX_PARAMS)];
    char action[96], family[32], keys[SVC_MAX_PARAMS][32], values[SVC_MAX_PARAMS][VALUE_MAX + 1];
    char status[16];
    size_t n = 0;
    const char *path = a->route->path;
    snprintf(action, sizeof(action), "%s %s", a->method, path);
    snprintf(family, sizeof(family), "%.*s", (int)strcspn(path + 1, "/"), path + 1);
    snprintf(status, sizeof(status), "%d", a->status);
    fields[n++] = "request_id";
    fields[n++] = a->request_id;
    fields[n++] = "token";
    fields[n++] = a->token != NULL && a->token[0] != '\0' ? a->token : SVC_AUDIT_NONE;
    fields[n++] = "action";
    fields[n++] = action;
    fields[n++] = "family";
    fields[n++] = family;
    for (size_t i = 0; i < a->match->nparams; i++) {
        const struct svc_param *p = &a->match->params[i];
        segment_before(path, p->name - 1, keys[i], sizeof(keys[i])); /* name follows '{' */
        fields[n++] = i == 0 ? "resource" : keys[i];
        snprintf(values[i], sizeof(values[i]), "%s", p->value); /* cut: see VALUE_MAX */
        fields[n++] = values[i];
    }
    fields[n++] = SVC_NUM("status");
    fields[n++] = status;
    fields[n++] = "outcome";
    fields[n++] = outcome_of(a->status);
    if (a->code != NULL) {
        fields[n++] = "code";
        fields[n++] = a->code;
    }
    svc_log_fields(SVC_LOG_INFO, 1, "audit", fields, n / 2);
}

void svc_audit_reload(const char *file, const char *outcome, size_t tokens, const char *why)
{
    char count[24];
    snprintf(count, sizeof(count), "%zu", tokens);
    const char *fields[] = {
        "token", SVC_AUDIT_SIGNAL, "action", "reload",          "family", "tokens", "resource",
        file,    "outcome",        outcome,  SVC_NUM("tokens"), count,    "detail", why};
    svc_log_fields(SVC_LOG_INFO, 1, "audit", fields, why != NULL ? 7 : 6);
}
