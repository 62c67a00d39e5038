/* The dashboard: its static page, script and style sheet (routes/ui/, embedded at build time by
 * service/embed.cmake) served at /ui with a strict Content-Security-Policy and an ETag, and
 * /ui/ redirected there, and /whoami, which tells a client the scopes of its bearer token so that
 * the page shows only the actions it may take. The page holds no data: everything it shows comes
 * from the JSON API. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "routes/etag.h"
#include "routes/routes.h"
#include "service/app.h"

extern const char svc_ui_index_html[], svc_ui_app_js[], svc_ui_app_css[];
extern const size_t svc_ui_index_html_len, svc_ui_app_js_len, svc_ui_app_css_len;

/* The page loads its script and style from itself only; the script talks to this origin only.
 * No inline script or style, no frames, no form posts elsewhere. */
static const char ui_csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

struct ui_asset {
    const char *body;
    const size_t *len;
    const char *type;
    char etag[24]; /* "<16 hex digits>" of the content, set once */
};

static struct ui_asset ui_assets[] = {
    {svc_ui_index_html, &svc_ui_index_html_len, "text/html; charset=utf-8", ""},
    {svc_ui_app_js, &svc_ui_app_js_len, "text/javascript; charset=utf-8", ""},
    {svc_ui_app_css, &svc_ui_app_css_len, "text/css; charset=utf-8", ""},
};

static pthread_once_t ui_etags_once = PTHREAD_ONCE_INIT;

/* FNV-1a, 64 bits: a validator of embedded constants, not a defence against anyone. */
static void ui_etags_compute(void)
{
    for (size_t i = 0; i < sizeof(ui_assets) / sizeof(ui_assets[0]); i++) {
        uint64_t h = 14695981039346656037ull;
        for (size_t k = 0; k < *ui_assets[i].len; k++) {
            h ^= (unsigned char)ui_assets[i].body[k];
            h *= 1099511628211ull;
        }
        snprintf(ui_assets[i].etag, sizeof(ui_assets[i].etag), "\"%016llx\"",
                 (unsigned long long)h);
    }
}

static enum svc_outcome ui_serve(struct svc_request *req, struct ui_asset *a)
{
    pthread_once(&ui_etags_once, ui_etags_compute);
    if (svc_req_add_header(req, "Content-Security-Policy", ui_csp) != 0 ||
        svc_req_add_header(req, "X-Content-Type-Options", "nosniff") != 0 ||
        svc_req_add_header(req, "Referrer-Policy", "no-referrer") != 0 ||
        svc_req_add_header(req, "Cache-Control", "no-cache") != 0 ||
        svc_req_add_header(req, "ETag", a->etag) != 0)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot add the response headers");
    if (route_etag_listed(svc_req_header(req, "If-None-Match"), a->etag, ROUTE_ETAG_WEAK))
        return svc_reply_static(req, 304, a->type, "", 0);
    return svc_reply_static(req, 200, a->type, a->body, *a->len);
}

static enum svc_outcome route_ui_page(struct svc_request *req)
{
    return ui_serve(req, &ui_assets[0]);
}

/* /ui/ is where people type the page: 308 to /ui (a fragment such as #/queues survives it, the
 * browser keeps it). */
static enum svc_outcome route_ui_slash(struct svc_request *req)
{
    static const char body[] = "The dashboard is at /ui\n";
    if (svc_req_add_header(req, "Location", "/ui") != 0)
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "cannot add the Location header");
    return svc_reply_static(req, 308, "text/plain; charset=utf-8", body, sizeof(body) - 1);
}

static enum svc_outcome route_ui_script(struct svc_request *req)
{
    return ui_serve(req, &ui_assets[1]);
}

static enum svc_outcome route_ui_style(struct svc_request *req)
{
    return ui_serve(req, &ui_assets[2]);
}

/* The scopes the Authorization header's token holds (every scope when the service runs open);
 * 401 for a missing or unknown token. No scope is needed to ask. */
static enum svc_outcome route_whoami(struct svc_request *req)
{
    static const struct {
        const char *name;
        enum svc_scope scope;
    } scopes[] = {{"read", SVC_SCOPE_READ},
                  {"write", SVC_SCOPE_WRITE},
                  {"work", SVC_SCOPE_WORK},
                  {"admin", SVC_SCOPE_ADMIN}};
    const struct svc_app *app = svc_req_app(req);
    const char *authorization = svc_req_header(req, "Authorization");
    json_t *list = json_array();
    for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
        enum svc_auth_result ar = app->auth == NULL ? SVC_AUTH_OK
                                                    : svc_auth_check(app->auth, authorization,
                                                                     scopes[i].scope, NULL, NULL);
        if (ar == SVC_AUTH_MISSING || ar == SVC_AUTH_INVALID) {
            json_decref(list);
            svc_req_add_header(req, "WWW-Authenticate", "Bearer realm=\"rowlock\"");
            return svc_reply_problem(req, SVC_P(UNAUTHORIZED), "%s",
                                     ar == SVC_AUTH_MISSING ? "send Authorization: Bearer <token>"
                                                            : "the bearer token is not valid");
        }
        if (ar == SVC_AUTH_OK)
            json_array_append_new(list, json_string(scopes[i].name));
    }
    return svc_reply_json(req, 200,
                          json_pack("{s:b, s:o}", "open", app->auth == NULL, "scopes", list));
}

static const struct svc_route ui_routes[] = {
    {"GET", "/ui", route_ui_page, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/ui/", route_ui_slash, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/ui/app.js", route_ui_script, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/ui/app.css", route_ui_style, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
    {"GET", "/whoami", route_whoami, SVC_SCOPE_PUBLIC, SVC_BODY_NONE, SVC_RUN_INLINE,
     SVC_AUDIT_BY_SCOPE},
};

const struct svc_family route_ui_family = {
    .name = "ui",
    .routes = ui_routes,
    .nroutes = sizeof(ui_routes) / sizeof(ui_routes[0]),
};
