/* The audit trail: one "audit" log line for each operator action (a route that creates, changes
 * or deletes a resource, a job's retry or cancel, a tokens reload), refused ones included, naming
 * the token by its name (never the secret), the action, the resource and the outcome. Which
 * routes are operator actions is the route table's (svc_route_audited); writing 401/403 is
 * http_check.c's. */
#ifndef SVC_AUDIT_H
#define SVC_AUDIT_H

#include <stddef.h>

#include "service/router.h"

/* The token an audit line names when no token's name applies. A name of the tokens file starts
 * with a letter or digit, so none of these (nor _line-<n>) is ever one of them. */
#define SVC_AUDIT_OPEN    "_anonymous" /* the service runs open: no tokens file */
#define SVC_AUDIT_NONE    "_none"      /* no bearer token was sent */
#define SVC_AUDIT_INVALID "_invalid"   /* a bearer token that is not in the tokens file */
#define SVC_AUDIT_SIGNAL  "_signal"    /* a SIGHUP: whoever may signal the process */

/* True when the route is an operator action: its scope is admin, or it says so itself. */
int svc_route_audited(const struct svc_route *r);

/* One audited request, as its completion sees it. Strings are borrowed. */
struct svc_audit_request {
    const char *request_id;
    const char *token; /* a name, or one of SVC_AUDIT_*; NULL or "" as SVC_AUDIT_NONE */
    const char *method;
    const struct svc_route *route;
    const struct svc_match *match; /* its path parameters name the resource */
    int status;                    /* 0: no answer was sent */
    const char *code;              /* problem code, or NULL */
};
/* Writes the audit line of a request (whatever the log level): request id, token, action
 * ("<method> <route template>"), family (the template's first segment), resource (its first
 * parameter) and each later parameter under the singular of the segment before it ("job",
 * "producer"), status, outcome ("done" for 2xx and 3xx, "refused" for 4xx, "failed" for the
 * rest) and the problem code. */
void svc_audit_request(const struct svc_audit_request *a);

/* Writes the audit line of a tokens reload: file, outcome ("done"; "failed" with why, the old
 * tokens kept; "skipped" when the service runs open) and the count of tokens in force. */
void svc_audit_reload(const char *file, const char *outcome, size_t tokens, const char *why);

#endif
