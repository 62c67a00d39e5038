/* The checks a request passes before its handler runs (see http_internal.h): the headers
 * gathered in one pass, the target's and headers' limits, the body's framing, the route, the
 * bearer token's scope and its request rate, the body's size and media type, the JSON nesting depth
 * and the range of JSON numbers. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "service/audit.h"
#include "service/auth.h"
#include "service/clock.h"
#include "service/config.h"
#include "service/http_internal.h"

/* Is name[0..len) a token (RFC 9110 section 5.6.2): letters, digits and !#$%&'*+-.^_`|~? */
static int is_token(const char *name, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') &&
            (c == '\0' || strchr("!#$%&'*+-.^_`|~", c) == NULL))
            return 0;
    }
    return len > 0;
}

/* A NUL byte in a header value (RFC 9110 section 5.5 forbids it) is invisible in the value:
 * libmicrohttpd 0.9.75 measures a value with strlen and drops the rest of its line unseen, so
 * "Authorization: Bearer <token>\0junk" would pass as <token>. It parses the header block in place,
 * in one buffer from the method on, each name and value pointing into it and each line's CRLF (or
 * LF) turned into NULs: a value is followed by 1 or 2 bytes before the next name, and by 2 to 4
 * before the block's end (the empty line), unless a NUL hid the rest of its line. Another layout
 * (a folded line, copied elsewhere; another version of the library) gives no verdict. */
struct header_block {
    struct req_headers *h;
    uintptr_t start, end, prev_end; /* the block, and the end of the value seen last */
    const char *prev_name;
    int judge; /* 0 once the layout is not the one described */
};

/* Notes the bytes between the end of the last value seen and next (the next name, or the end of
 * the block): a line's end takes least to most of them, and more means a NUL hid the rest of that
 * value's line. */
static void block_gap(struct header_block *b, uintptr_t next, uintptr_t least, uintptr_t most)
{
    if (!b->judge || b->prev_name == NULL)
        return;
    if (next < b->prev_end + least || next > b->end) {
        b->judge = 0;
        return;
    }
    if (next > b->prev_end + most && b->h->bad_value == NULL) {
        b->h->bad_value = b->prev_name;
        b->h->bad_value_why = "a NUL byte";
    }
}

const char svc_http_cookie_stand_in[] = MHD_HTTP_HEADER_COOKIE;

/* Notes one header in the struct header_block cls (names are compared by length first). Host,
 * Content-Type and Authorization take one value, not a list (RFC 9110 section 5.3): a second one
 * is noted in h->repeated, as which of the two counts depends on who reads the request. */
static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t klen,
                                   const char *value, size_t vlen)
{
    struct header_block *b = cls;
    struct req_headers *h = b->h;
    if (key == svc_http_cookie_stand_in)
        return MHD_YES; /* not the client's */
    value = value ? value : "";
    h->total += klen + vlen + 4;
    uintptr_t at = (uintptr_t)key, end = (uintptr_t)value + vlen;
    block_gap(b, at, 1, 2);
    b->judge = b->judge && at >= b->start && end <= b->end && at + klen < (uintptr_t)value;
    b->prev_end = end;
    b->prev_name = key;
    if (h->bad_value == NULL && memchr(value, '\r', vlen) != NULL) {
        h->bad_value = key; /* a CR not followed by LF does not end a line for libmicrohttpd */
        h->bad_value_why = "a CR";
    }
    if (h->bad_name == NULL && !is_token(key, klen))
        h->bad_name = key; /* libmicrohttpd 0.9.75 keeps what stood before the colon */
    const char **first = NULL, *single = NULL;
    if (klen == 4 && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
        single = h->host++ > 0 ? MHD_HTTP_HEADER_HOST : NULL;
    } else if (klen == 12 && strcasecmp(key, "X-Request-Id") == 0) {
        first = &h->request_id;
    } else if (klen == 12 && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_TYPE) == 0) {
        first = &h->content_type;
        single = MHD_HTTP_HEADER_CONTENT_TYPE;
    } else if (klen == 13 && strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0) {
        first = &h->authorization;
        single = MHD_HTTP_HEADER_AUTHORIZATION;
    } else if (klen == 14 && strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        if (h->lengths++ > 0 && strcmp(h->content_length, value) != 0)
            h->lengths_differ = 1;
        first = &h->content_length;
    } else if (klen == 17 && strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        h->transfer_encoding++;
        first = &h->transfer_coding;
    }
    if (single != NULL && h->repeated == NULL && (first == NULL || *first != NULL))
        h->repeated = single;
    if (first != NULL && *first == NULL)
        *first = value;
    return MHD_YES;
}

void svc_http_scan_headers(struct req_headers *h, struct MHD_Connection *conn, const char *method)
{
    const union MHD_ConnectionInfo *size =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    struct header_block b = {.h = h, .start = (uintptr_t)method};
    b.judge = size != NULL && method != NULL && strcmp(MHD_get_version(), "0.9.75") == 0;
    b.end = b.judge ? b.start + size->header_size : 0;
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &b);
    block_gap(&b, b.end, 2, 4);
}

/* Why the body's framing is ambiguous (RFC 9112 section 6.3), or NULL: libmicrohttpd would take
 * the first of two different Content-Length headers, and a proxy in front may take another. */
static const char *framing_problem(const struct req_headers *h)
{
    if (h->lengths_differ)
        return "the request has Content-Length headers with different values";
    if (h->lengths > 0 && h->transfer_encoding)
        return "the request has both Content-Length and Transfer-Encoding";
    if (h->transfer_encoding > 1)
        return "the request has more than one Transfer-Encoding header; send one: chunked";
    return NULL;
}

/* The transfer codings of a Transfer-Encoding value (a list): 0 when it is "chunked" alone, the
 * one libmicrohttpd decodes; 1 when chunked is misapplied (not last, or twice: RFC 9112 section
 * 6.1) or written with parameters or whitespace libmicrohttpd does not strip, whose body cannot
 * be framed (400); 2 when it names another coding (gzip, say), which is
 * not implemented (501). libmicrohttpd takes any other value than "chunked" for a body that lasts
 * until the connection closes, and would wait for that end. */
static int transfer_codings(const char *v)
{
    const char *start = v;
    int chunked = 0, other = 0, chunked_last = 0;
    while (*v != '\0') {
        v += strspn(v, " \t,");
        size_t n = strcspn(v, " \t,;");
        if (n == 0)
            break;
        int is_chunked = n == 7 && strncasecmp(v, "chunked", 7) == 0;
        chunked += is_chunked;
        other += !is_chunked;
        chunked_last = is_chunked;
        v += n;
        v += strcspn(v, ","); /* parameters of a coding */
    }
    if (chunked == 1 && chunked_last && other == 0)
        return strcasecmp(start, "chunked") == 0 ? 0 : 1; /* parameters, whitespace */
    return chunked > 1 || (chunked == 1 && !chunked_last) || other == 0 ? 1 : 2;
}

/* A Transfer-Encoding other than chunked alone: 400 or 501 (transfer_codings), with the
 * connection closed after the answer, as its body's end is unknown. */
static int check_transfer_coding(struct svc_request *req, enum svc_outcome *out)
{
    const char *v = req->seen.transfer_coding;
    if (v == NULL)
        return 0;
    switch (transfer_codings(v)) {
    case 0:
        return 0;
    case 1:
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST),
                                 "Transfer-Encoding \"%.64s\": chunked comes once, last (RFC "
                                 "9112 section 6.1) and alone; the body's end cannot be known",
                                 v);
        return 1;
    default:
        *out = svc_reply_problem(req, SVC_P(NOT_IMPLEMENTED),
                                 "Transfer-Encoding \"%.64s\": the only transfer coding read "
                                 "is chunked, alone",
                                 v);
        return 1;
    }
}

/* Is the media type (ignoring parameters, case-insensitive) one of the route's? */
static int content_type_ok(const char *ct, enum svc_body body)
{
    if (ct == NULL)
        return 0;
    size_t len = strcspn(ct, "; \t");
    if (len == 16 && strncasecmp(ct, "application/json", 16) == 0)
        return 1;
    return body == SVC_BODY_MERGE_PATCH && len == 28 &&
           strncasecmp(ct, "application/merge-patch+json", 28) == 0;
}

/* The headers' total (the target's length is on_uri's, in http.c: a target past the URL limit
 * is answered before its headers are read). */
static int check_limits(struct svc_request *req, enum svc_outcome *out)
{
    const struct svc_config *cfg = req->server->cfg;
    if (req->seen.total > (size_t)cfg->header_limit) {
        *out = svc_reply_problem(req, SVC_P(HEADERS_TOO_LARGE),
                                 "request headers total more than %ld bytes", cfg->header_limit);
        return 1;
    }
    return 0;
}

/* The headers' form (RFC 9110, 9112): names that are tokens, each of Host, Content-Type and
 * Authorization at most once, and an unambiguous framing of the body in a transfer coding read. */
static int check_headers(struct svc_request *req, enum svc_outcome *out)
{
    const char *name = req->seen.bad_name;
    if (name != NULL) {
        *out = svc_reply_problem(
            req, SVC_P(BAD_REQUEST),
            name[strcspn(name, " \t")] != '\0'
                ? "the header name \"%.64s\" holds whitespace: nothing may stand between a "
                  "header's name and its colon (RFC 9112 section 5.1)"
                : "the header name \"%.64s\" holds a character a name may not: letters, digits "
                  "and !#$%%&'*+-.^_`|~ only (RFC 9110 section 5.6.2)",
            name);
        return 1;
    }
    if (req->seen.bad_value != NULL) {
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST),
                                 "the value of the %.64s header holds %s; a header value may not "
                                 "hold NUL, CR or LF (RFC 9110 section 5.5)",
                                 req->seen.bad_value, req->seen.bad_value_why);
        return 1;
    }
    if (req->seen.repeated != NULL) {
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST),
                                 "the request has more than one %s header; send it once: it "
                                 "takes one value, not a list (RFC 9110)",
                                 req->seen.repeated);
        return 1;
    }
    const char *framing = req->http11 && !req->seen.host
                              ? "an HTTP/1.1 request carries a Host header (RFC 9112)"
                              : framing_problem(&req->seen);
    if (framing != NULL) {
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST), "%s", framing);
        return 1;
    }
    return check_transfer_coding(req, out);
}

/* The route of the method and target (req->match). */
static int check_route(struct svc_request *req, enum svc_outcome *out)
{
    struct svc_server *s = req->server;
    switch (svc_router_match(s->routes, s->nroutes, req->method, req->target, &req->match)) {
    case SVC_MATCH_OK:
        req->matched = 1;
        return 0;
    case SVC_MATCH_NOT_FOUND:
        *out = svc_reply_problem(req, SVC_P(ROUTE_NOT_FOUND), "no route matches %s", req->target);
        return 1;
    case SVC_MATCH_METHOD_NOT_ALLOWED: {
        char allow[sizeof(req->match.allow)];
        memcpy(allow, req->match.allow, sizeof(allow));
        svc_req_add_header(req, "Allow", allow);
        *out = svc_reply_problem(req, SVC_P(METHOD_NOT_ALLOWED),
                                 "%s is not allowed here; allowed: %s", req->method, allow);
        return 1;
    }
    case SVC_MATCH_BAD_ENCODING:
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST),
                                 "the request target has an invalid percent-encoding");
        return 1;
    case SVC_MATCH_TOO_MANY_QUERY:
        *out = svc_reply_problem(req, SVC_P(BAD_REQUEST), "more than %d query parameters",
                                 SVC_MAX_QUERY);
        return 1;
    case SVC_MATCH_DUPLICATE_QUERY:
        *out = svc_reply_problem(req, SVC_P(INVALID_PARAMETER),
                                 "query parameter %s is given more than once; send it once",
                                 req->match.bad_query);
        return 1;
    }
    return 1;
}

/* The limits a request under token name (its line's in tl, -1 where it sets none) is held to:
 * the settings' where the line is silent. */
static void limits_of(struct svc_request *req, const struct svc_limit *tl)
{
    const struct svc_config *cfg = req->server->cfg;
    req->limited = req->server->limits != NULL;
    req->limit.rate = tl->rate >= 0 ? tl->rate : cfg->rate_limit;
    req->limit.burst = tl->burst >= 0 ? tl->burst : cfg->rate_burst;
    req->limit.long_polls = tl->long_polls >= 0 ? tl->long_polls : cfg->long_poll_limit;
}

/* The bearer token's scopes against the route's (with tokens configured). The routes that need
 * no token (the dashboard's files, and the ops endpoints when open) have no limits either; with
 * no tokens, every other request is under the one anonymous name's. */
static int check_auth(struct svc_request *req, const struct svc_route *route, enum svc_outcome *out)
{
    struct svc_server *s = req->server;
    struct svc_limit tl = {-1, -1, -1};
    int open_route =
        route->scope == SVC_SCOPE_PUBLIC || (route->scope == SVC_SCOPE_OPS && s->cfg->open_ops);
    if (s->auth == NULL) {
        snprintf(req->token, sizeof(req->token), "%s", SVC_AUDIT_OPEN);
        if (!open_route)
            limits_of(req, &tl);
    }
    if (s->auth == NULL || open_route)
        return 0;
    static const char *const scope_names[] = {"read", "read", "write", "work", "admin", ""};
    enum svc_auth_result ar =
        svc_auth_check(s->auth, req->seen.authorization, route->scope, req->token, &tl);
    if (ar == SVC_AUTH_MISSING || ar == SVC_AUTH_INVALID) {
        snprintf(req->token, sizeof(req->token), "%s",
                 ar == SVC_AUTH_MISSING ? SVC_AUDIT_NONE : SVC_AUDIT_INVALID);
        svc_req_add_header(req, "WWW-Authenticate", "Bearer realm=\"rowlock\"");
        *out = svc_reply_problem(req, SVC_P(UNAUTHORIZED), "%s",
                                 ar == SVC_AUTH_MISSING ? "send Authorization: Bearer <token>"
                                                        : "the bearer token is not valid");
        return 1;
    }
    if (ar == SVC_AUTH_FORBIDDEN) {
        *out = svc_reply_problem(req, SVC_P(FORBIDDEN), "this route needs the %s scope",
                                 scope_names[route->scope]);
        return 1;
    }
    limits_of(req, &tl);
    return 0;
}

int svc_req_has_scope(const struct svc_request *req, int scope)
{
    const struct svc_server *s = req->server;
    return s->auth == NULL || svc_auth_check(s->auth, req->seen.authorization,
                                             (enum svc_scope)scope, NULL, NULL) == SVC_AUTH_OK;
}

/* The token's request rate, once it is authenticated: past its burst, a 429 with Retry-After
 * (whole seconds until a request would pass), before the handler has done anything. */
static int check_rate(struct svc_request *req, enum svc_outcome *out)
{
    if (!req->limited || req->limit.rate == 0)
        return 0;
    long wait = svc_limits_take(req->server->limits, req->token, &req->limit, svc_now());
    if (wait == 0)
        return 0;
    char after[24];
    snprintf(after, sizeof(after), "%ld", wait);
    svc_req_add_header(req, "Retry-After", after);
    *out = svc_reply_problem(req, SVC_P(RATE_LIMITED),
                             "the token %s may make %ld requests a second, %ld at once, in this "
                             "process; try again in %ld s",
                             req->token, req->limit.rate, req->limit.burst, wait);
    return 1;
}

/* The announced body's size and its media type. */
static int check_body(struct svc_request *req, const struct svc_route *route, enum svc_outcome *out)
{
    const struct svc_config *cfg = req->server->cfg;
    const char *cl = req->seen.content_length;
    if (cl != NULL && strtoull(cl, NULL, 10) > (unsigned long long)cfg->body_limit) {
        *out = svc_reply_problem(req, SVC_P(PAYLOAD_TOO_LARGE),
                                 "the body is %s bytes; the limit is %ld", cl, cfg->body_limit);
        return 1;
    }
    if (route->body != SVC_BODY_NONE && !content_type_ok(req->seen.content_type, route->body)) {
        *out =
            svc_reply_problem(req, SVC_P(UNSUPPORTED_MEDIA_TYPE), "send Content-Type: %s",
                              route->body == SVC_BODY_MERGE_PATCH ? "application/merge-patch+json"
                                                                  : "application/json");
        return 1;
    }
    return 0;
}

int svc_http_request_check(struct svc_request *req, enum svc_outcome *out)
{
    if (check_limits(req, out) || check_headers(req, out) || check_route(req, out))
        return 1;
    const struct svc_route *route = &req->server->routes[req->match.route];
    return check_auth(req, route, out) || check_rate(req, out) || check_body(req, route, out);
}

/* Depth of the deepest array/object nesting in JSON text, stopping once past limit. */
long svc_http_json_depth(const char *p, size_t len, long limit)
{
    long depth = 0, max = 0;
    int in_string = 0;
    for (size_t i = 0; i < len && max <= limit; i++) {
        char c = p[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            if (++depth > max)
                max = depth;
        } else if (c == ']' || c == '}') {
            depth--;
        }
    }
    return max;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads the JSON number at p (len bytes left): its length in *n, whether it is out of range
 * (svc_http_json_numbers), and in *plain the length PostgreSQL's numeric writes it back with in
 * plain notation (sign, integer digits, and a point and the digits of its scale). */
static int number_read(const char *p, size_t len, size_t *n, size_t *plain)
{
    size_t i = p[0] == '-' ? 1 : 0, start = i, frac = 0;
    long lead = LONG_MIN; /* the power of ten of the first non-zero digit, before the exponent */
    while (i < len && is_digit(p[i]))
        i++;
    for (size_t k = start; k < i && lead == LONG_MIN; k++)
        if (p[k] != '0')
            lead = (long)(i - k - 1);
    if (i < len && p[i] == '.') {
        start = ++i;
        while (i < len && is_digit(p[i]))
            i++;
        frac = i - start;
        for (size_t k = start; k < i && lead == LONG_MIN; k++)
            if (p[k] != '0')
                lead = -(long)(k - start + 1);
    }
    long exp = 0;
    if (i < len && (p[i] == 'e' || p[i] == 'E')) {
        int neg = ++i < len && p[i] == '-';
        i += i < len && (p[i] == '-' || p[i] == '+');
        for (; i < len && is_digit(p[i]); i++)
            if (exp < 1000000000L) /* far past any limit: no overflow below */
                exp = exp * 10 + (p[i] - '0');
        exp = neg ? -exp : exp;
    }
    *n = i;
    if (exp > SVC_JSON_EXPONENT_MAX || exp < -SVC_JSON_EXPONENT_MAX)
        return 1;
    long scale = (long)frac - exp, whole = lead == LONG_MIN ? 1 : lead + exp + 1;
    *plain = (p[0] == '-') + (size_t)(whole > 1 ? whole : 1) + (scale > 0 ? 1 + (size_t)scale : 0);
    return lead != LONG_MIN && (lead + exp >= 308 || lead + exp < -307);
}

enum svc_json_numbers svc_http_json_numbers(const char *p, size_t len, size_t *at, size_t *n,
                                            size_t *grow)
{
    size_t more = 0;
    for (size_t i = 0; i < len;) {
        char c = p[i];
        if (c == '"') { /* a string, up to its closing quote */
            for (i++; i < len && p[i] != '"'; i++)
                if (p[i] == '\\')
                    i++;
            i++;
        } else if (c == '-' || is_digit(c)) {
            size_t k, plain = 0;
            if (number_read(p + i, len - i, &k, &plain)) {
                *at = i;
                *n = k;
                return SVC_JSON_NUMBER_RANGE;
            }
            more += plain > k ? plain - k : 0;
            i += k > 0 ? k : 1;
        } else {
            i++;
        }
    }
    *grow = more;
    return more > len + SVC_JSON_EXPANSION_SLACK ? SVC_JSON_NUMBERS_EXPAND : SVC_JSON_NUMBERS_OK;
}
