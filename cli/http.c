/* rowlock-cli's HTTP client: libcurl easy handle per thread, Bearer token, JSON bodies, bounded
 * answers, retries with exponential backoff (Retry-After wins when the service sends it), and the
 * mapping of an answer to one readable line and an exit code. Commands live elsewhere. */
#include "cli/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BODY_MAX (64u * 1024u * 1024u) /* an answer larger than this is refused, not cut */

struct cli_http {
    const struct cli_conf *conf;
    CURL *curl;
    const atomic_int *abort;
    char extra[512];
};

struct body_buf {
    char *data;
    size_t len, cap;
    int too_large;
};

struct header_info {
    double retry_after; /* seconds, -1 when absent */
};

struct cli_http *cli_http_new(const struct cli_conf *conf)
{
    struct cli_http *h = calloc(1, sizeof(*h));
    if (!h)
        return NULL;
    h->conf = conf;
    h->curl = curl_easy_init();
    if (!h->curl) {
        free(h);
        return NULL;
    }
    return h;
}

void cli_http_free(struct cli_http *h)
{
    if (!h)
        return;
    curl_easy_cleanup(h->curl);
    free(h);
}

void cli_http_header(struct cli_http *h, const char *line)
{
    snprintf(h->extra, sizeof(h->extra), "%s", line ? line : "");
}

void cli_http_set_abort(struct cli_http *h, const atomic_int *flag)
{
    h->abort = flag;
}

char *cli_http_escape(struct cli_http *h, const char *s)
{
    char *e = curl_easy_escape(h->curl, s, 0);
    char *copy = e ? strdup(e) : NULL;
    curl_free(e);
    return copy;
}

char *cli_escape(const char *s)
{
    CURL *c = curl_easy_init();
    char *e = c ? curl_easy_escape(c, s, 0) : NULL;
    char *copy = e ? strdup(e) : NULL;
    curl_free(e);
    curl_easy_cleanup(c);
    return copy;
}

void cli_reply_clear(struct cli_reply *r)
{
    json_decref(r->json);
    memset(r, 0, sizeof(*r));
}

static size_t body_write(char *data, size_t size, size_t n, void *arg)
{
    struct body_buf *b = arg;
    size_t add = size * n;
    if (b->len + add + 1 > BODY_MAX) {
        b->too_large = 1;
        return 0;
    }
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return 0;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

static size_t header_write(char *data, size_t size, size_t n, void *arg)
{
    struct header_info *hi = arg;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof(name) - 1 && strncasecmp(data, name, sizeof(name) - 1) == 0) {
        char tmp[64];
        size_t vl = len - (sizeof(name) - 1);
        if (vl >= sizeof(tmp))
            vl = sizeof(tmp) - 1;
        memcpy(tmp, data + sizeof(name) - 1, vl);
        tmp[vl] = '\0';
        char *end;
        double v = strtod(tmp, &end);
        if (end != tmp && v >= 0)
            hi->retry_after = v;
    }
    return len;
}

/* Fills r's code and detail from a problem+json body. */
static void reply_problem(struct cli_reply *r)
{
    const char *code = json_string_value(json_object_get(r->json, "code"));
    const char *detail = json_string_value(json_object_get(r->json, "detail"));
    if (!detail)
        detail = json_string_value(json_object_get(r->json, "title"));
    snprintf(r->code, sizeof(r->code), "%s", code ? code : "");
    snprintf(r->detail, sizeof(r->detail), "%s", detail ? detail : "");
}

/* One attempt. Returns the CURLcode; r->status 0 when no answer. */
static CURLcode http_once(struct cli_http *h, const char *method, const char *path,
                          const char *body, double timeout_s, struct cli_reply *r,
                          struct header_info *hi)
{
    char url[4096];
    char auth[1024];
    struct curl_slist *hdrs = NULL;
    struct body_buf b = {0};
    CURL *c = h->curl;
    snprintf(url, sizeof(url), "%s%s", h->conf->url, path);
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000.0));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_write);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, hi);
    if (h->conf->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, h->conf->ca_file);
    if (h->conf->token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", h->conf->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (h->extra[0])
        hdrs = curl_slist_append(hdrs, h->extra);
    if (body) {
        hdrs = curl_slist_append(hdrs, strcmp(method, "PATCH") == 0 && strstr(path, "/head")
                                           ? "Content-Type: application/merge-patch+json"
                                           : "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    hi->retry_after = -1;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        if (b.data)
            r->json = json_loadb(b.data, b.len, JSON_DECODE_ANY, NULL);
        reply_problem(r);
    } else if (b.too_large) {
        snprintf(r->detail, sizeof(r->detail), "answer larger than %u bytes", BODY_MAX);
    } else {
        snprintf(r->detail, sizeof(r->detail), "%s: %s", h->conf->url, curl_easy_strerror(rc));
    }
    curl_slist_free_all(hdrs);
    free(b.data);
    return rc;
}

/* Whether a failed attempt may be sent again under flags. */
static int retryable(CURLcode rc, const struct cli_reply *r, int flags)
{
    if (flags & CLI_HTTP_ONCE)
        return 0;
    /* a certificate that did not verify (or an unreadable CA file) will not on a retry either */
    if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CACERT_BADFILE)
        return 0;
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
        return 1;
    if (rc != CURLE_OK)
        return (flags & CLI_HTTP_IDEMPOTENT) != 0;
    if (r->status != 503)
        return 0;
    return strcmp(r->code, "outcome_unknown") != 0 || (flags & CLI_HTTP_IDEMPOTENT);
}

/* Sleeps up to seconds, waking early when the abort flag is raised. */
static void backoff_sleep(const struct cli_http *h, double seconds)
{
    while (seconds > 0 && !(h->abort && *h->abort)) {
        double step = seconds < 0.05 ? seconds : 0.05;
        struct timespec ts = {0, (long)(step * 1e9)};
        nanosleep(&ts, NULL);
        seconds -= step;
    }
}

int cli_http_call(struct cli_http *h, const char *method, const char *path, const json_t *body,
                  int flags, double timeout_s, struct cli_reply *r)
{
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    double delay = 0.25;
    int result = CLI_EXIT_UNAVAILABLE;
    memset(r, 0, sizeof(*r));
    if (body && !text) {
        snprintf(r->detail, sizeof(r->detail), "out of memory");
        return CLI_EXIT_OTHER;
    }
    for (int attempt = 0;; attempt++) {
        struct header_info hi;
        cli_reply_clear(r);
        CURLcode rc = http_once(h, method, path, text, timeout_s, r, &hi);
        if (!retryable(rc, r, flags)) {
            result = rc == CURLE_OK ? 0 : CLI_EXIT_UNAVAILABLE;
            break;
        }
        if (attempt >= h->conf->retries || (h->abort && *h->abort))
            break;
        double wait = hi.retry_after >= 0 ? hi.retry_after : delay;
        if (wait > 30)
            wait = 30;
        backoff_sleep(h, wait);
        delay = delay * 2 > 8 ? 8 : delay * 2;
    }
    if (result == CLI_EXIT_UNAVAILABLE && r->status == 503 && !r->code[0])
        snprintf(r->code, sizeof(r->code), "unavailable");
    free(text);
    return result;
}

int cli_status_exit(long status)
{
    if (status >= 200 && status < 300)
        return CLI_EXIT_OK;
    if (status == 404)
        return CLI_EXIT_NOT_FOUND;
    if (status == 409 || status == 412)
        return CLI_EXIT_CONFLICT;
    if (status == 0 || status == 503)
        return CLI_EXIT_UNAVAILABLE;
    if (status >= 500)
        return CLI_EXIT_SERVER;
    if (status == 400 || status == 413 || status == 414 || status == 415 || status == 431)
        return CLI_EXIT_USAGE;
    return CLI_EXIT_OTHER;
}

int cli_reply_exit(const struct cli_reply *r)
{
    int code = cli_status_exit(r->status);
    if (code == CLI_EXIT_OK)
        return code;
    if (r->status == 0)
        cli_errorf("unavailable: %s", r->detail);
    else if (r->code[0])
        cli_errorf("%s: %s", r->code, r->detail);
    else
        cli_errorf("http_%ld: %s", r->status, r->detail[0] ? r->detail : "unexpected answer");
    return code;
}
