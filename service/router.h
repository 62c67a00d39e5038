/* The route table type and its matcher: templates with {param} segments, percent-decoding of
 * path segments and query strings, 404 versus 405 with the Allow list. Pure functions, no HTTP
 * library; the table itself lives in routes/ and is handed to the server by main. */
#ifndef SVC_ROUTER_H
#define SVC_ROUTER_H

#include <stddef.h>

struct svc_request;

/* What a handler did with its request. */
enum svc_outcome {
    SVC_REPLIED,   /* a response (success or problem) is queued */
    SVC_SUSPENDED, /* the connection is suspended; the handler's owner resumes it later */
    SVC_FATAL      /* drop the connection */
};

typedef enum svc_outcome (*svc_handler)(struct svc_request *req);

/* Scope a route needs when authentication is on. */
enum svc_scope {
    SVC_SCOPE_OPS, /* open when open-ops is set (health, metrics, docs), else read */
    SVC_SCOPE_READ,
    SVC_SCOPE_WRITE,
    SVC_SCOPE_WORK,
    SVC_SCOPE_ADMIN,
    SVC_SCOPE_PUBLIC, /* never needs a token: the dashboard's static files, /whoami */
};

/* Request body a route takes. */
enum svc_body { SVC_BODY_NONE, SVC_BODY_JSON, SVC_BODY_MERGE_PATCH };

/* Where a handler runs. */
enum svc_run {
    SVC_RUN_WORKER, /* on a worker thread, the connection suspended meanwhile (may block) */
    SVC_RUN_INLINE  /* on the HTTP thread itself: only for handlers that never block */
};

/* Whether a route's requests are written to the audit trail (service/audit.h). */
enum svc_audit {
    SVC_AUDIT_BY_SCOPE, /* when its scope is admin (creating, changing, deleting resources) */
    SVC_AUDIT_ALWAYS    /* an operator's action under another scope (a job's retry, cancel) */
};

struct svc_route {
    const char *method; /* "GET", "PUT", ... */
    const char *path;   /* template, e.g. "/topics/{topic}/keys/{key}/head" */
    svc_handler handler;
    enum svc_scope scope;
    enum svc_body body;
    enum svc_run run;
    enum svc_audit audit;
};

#define SVC_MAX_PARAMS 8
#define SVC_MAX_QUERY  16

struct svc_param {
    const char *name; /* for path params: points into the template (not NUL-terminated) */
    size_t name_len;
    char *value; /* decoded, NUL-terminated, owned by the match */
    size_t value_len;
};

struct svc_match {
    int route; /* index into the table, -1 when none */
    size_t nparams;
    struct svc_param params[SVC_MAX_PARAMS];
    size_t nquery;
    struct svc_param query[SVC_MAX_QUERY];
    char allow[64];     /* for 405: "GET, PUT" */
    char bad_query[64]; /* for SVC_MATCH_DUPLICATE_QUERY: the name (decoded, maybe cut) */
};

enum svc_match_result {
    SVC_MATCH_OK,
    SVC_MATCH_NOT_FOUND,
    SVC_MATCH_METHOD_NOT_ALLOWED,
    SVC_MATCH_BAD_ENCODING,   /* invalid percent-encoding, or an encoded NUL */
    SVC_MATCH_TOO_MANY_QUERY, /* more than SVC_MAX_QUERY query parameters */
    SVC_MATCH_DUPLICATE_QUERY /* a query parameter given twice (its name in bad_query) */
};

/* Matches method and raw target ("/a/b%2Fc?x=1") against the table. On SVC_MATCH_OK the match
 * holds decoded params (free with svc_match_free); otherwise it holds nothing to free.
 * Among several templates matching the path, the one with more literal segments wins. HEAD
 * matches GET routes. */
enum svc_match_result svc_router_match(const struct svc_route *routes, size_t nroutes,
                                       const char *method, const char *target, struct svc_match *m);
void svc_match_free(struct svc_match *m);

/* Decodes %XX escapes (and '+' as space when plus_is_space). out must hold len+1 bytes.
 * Returns the decoded length, or -1 for a bad escape or an encoded NUL. */
long svc_percent_decode(const char *in, size_t len, char *out, int plus_is_space);

/* Path parameter / query value by name, or NULL. */
const char *svc_match_param(const struct svc_match *m, const char *name);
const char *svc_match_query(const struct svc_match *m, const char *name);

#endif
