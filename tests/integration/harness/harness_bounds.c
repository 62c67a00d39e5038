/* The table-driven boundary check of harness.h (th_bounds_check): every numeric input gets the
 * same hostile values, and every answer must be a 2xx or a 4xx problem with its code, never a
 * 5xx or a dropped connection, with the resource still answering afterwards. */
#include "harness.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Replaces every occurrence of token in tmpl by value; the result is malloc'd. */
static char *fill(const char *tmpl, const char *token, const char *value)
{
    size_t tl = strlen(token), vl = strlen(value), n = 0;
    for (const char *p = strstr(tmpl, token); p; p = strstr(p + tl, token))
        n++;
    char *out = malloc(strlen(tmpl) + n * vl + 1), *o = out;
    assert_non_null(out);
    for (const char *p = tmpl;;) {
        const char *q = strstr(p, token);
        size_t len = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, len);
        o += len;
        if (q == NULL)
            break;
        memcpy(o, value, vl);
        o += vl;
        p = q + tl;
    }
    *o = '\0';
    return out;
}

int th_bounds_check(int port, const struct th_bound *cases, size_t ncases)
{
    int bad = 0;
    for (size_t i = 0; i < ncases; i++) {
        const struct th_bound *b = &cases[i];
        char max[32], over[32];
        snprintf(max, sizeof(max), "%lld", b->max);
        if (b->max == INT64_MAX)
            snprintf(over, sizeof(over), "9223372036854775808");
        else
            snprintf(over, sizeof(over), "%lld", b->max + 1);
        /* JSON text in a body; the same value percent-encoded in a query */
        const char *json[] = {"0",     "-1",  max,     over,   "9223372036854775808",
                              "1e400", "1.5", "\"1\"", "true", "null"};
        const char *query[] = {"0",     "-1",  max,       over,   "9223372036854775808",
                               "1e400", "1.5", "%221%22", "true", "null"};
        for (size_t v = 0; v < sizeof(json) / sizeof(json[0]); v++) {
            char *path = fill(b->path, "{V}", query[v]);
            char *body = b->body ? fill(b->body, "@V@", json[v]) : NULL;
            char ct[96];
            snprintf(ct, sizeof(ct), "Content-Type: %s",
                     b->content_type ? b->content_type : "application/json");
            const char *headers[] = {ct, NULL};
            struct th_response r;
            memset(&r, 0, sizeof(r));
            int sent = th_http(port, b->method, path, body ? headers : NULL, body,
                               body ? strlen(body) : 0, &r);
            const char *code = sent == 0 ? th_problem_code(&r) : "";
            int ok = sent == 0 && r.status >= 200 && r.status < 500;
            /* a 400 names the input's code; in a body, 1e400 is refused whole as out of the
             * range of JSON numbers, and jansson does not read an integer past 2^63 - 1 */
            int unreadable = v == 4 || (v == 3 && b->max == INT64_MAX);
            if (ok && r.status == 400)
                ok = strcmp(code, b->code) == 0 ||
                     (body != NULL && unreadable && strcmp(code, "invalid_json") == 0) ||
                     (body != NULL && v == 5 && strcmp(code, "number_out_of_range") == 0);
            /* the documented range is the accepted one: its maximum is not refused as malformed,
             * one past it is */
            if (ok && v == 2 && r.status == 400)
                ok = 0;
            if (ok && v == 3 && r.status < 400)
                ok = 0;
            if (ok && r.status >= 400) {
                char ctype[128] = "";
                th_header(&r, "Content-Type", ctype, sizeof(ctype));
                ok = strcmp(ctype, "application/problem+json") == 0;
            }
            if (!ok) {
                fprintf(stderr, "bounds: %s %s %s -> %ld %s: %s\n", b->method, path,
                        body ? body : "", sent == 0 ? r.status : -1L, code,
                        sent == 0 && r.body ? r.body : "(no answer)");
                bad++;
            }
            th_response_free(&r);
            free(path);
            free(body);
            if (b->alive != NULL) {
                struct th_response a;
                memset(&a, 0, sizeof(a));
                if (th_http(port, "GET", b->alive, NULL, NULL, 0, &a) != 0 || a.status != 200) {
                    fprintf(stderr, "bounds: after %s %s = %s, GET %s no longer answers 200\n",
                            b->method, b->path, json[v], b->alive);
                    bad++;
                }
                th_response_free(&a);
            }
        }
    }
    return bad;
}
