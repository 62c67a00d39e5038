/* Route matching and percent-decoding (see router.h). Templates are walked segment by segment
 * against the raw path, so an encoded slash (%2F) inside a key never splits a segment. */
#include "service/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long svc_percent_decode(const char *in, size_t len, char *out, int plus_is_space)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            if (c == '\0')
                return -1;
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return (long)o;
}

/* Next segment of a path or template starting after *pos (which points at '/'). */
static int next_segment(const char *s, size_t end, size_t *pos, size_t *seg, size_t *seglen)
{
    if (*pos >= end || s[*pos] != '/')
        return 0;
    size_t start = *pos + 1, i = start;
    while (i < end && s[i] != '/')
        i++;
    *seg = start;
    *seglen = i - start;
    *pos = i;
    return 1;
}

/* Does the template fit the path? Counts literal segments into *literals. */
static int template_fits(const char *tpl, const char *path, size_t path_len, int *literals)
{
    size_t tp = 0, pp = 0, tlen = strlen(tpl);
    size_t ts, tl, ps, pl;
    *literals = 0;
    for (;;) {
        int ht = next_segment(tpl, tlen, &tp, &ts, &tl);
        int hp = next_segment(path, path_len, &pp, &ps, &pl);
        if (!ht || !hp)
            return ht == hp && tp == tlen && pp == path_len;
        if (tl >= 2 && tpl[ts] == '{' && tpl[ts + tl - 1] == '}') {
            if (pl == 0)
                return 0;
        } else {
            if (tl != pl || memcmp(tpl + ts, path + ps, tl) != 0)
                return 0;
            (*literals)++;
        }
    }
}

/* Fills m->params with the decoded params of template tpl. Returns 0 or -1 (bad encoding). */
static int extract_params(const char *tpl, const char *path, size_t path_len, struct svc_match *m)
{
    size_t tp = 0, pp = 0, tlen = strlen(tpl);
    size_t ts, tl, ps, pl;
    while (next_segment(tpl, tlen, &tp, &ts, &tl) && next_segment(path, path_len, &pp, &ps, &pl)) {
        if (!(tpl[ts] == '{' && tl >= 2) || m->nparams >= SVC_MAX_PARAMS)
            continue;
        struct svc_param *p = &m->params[m->nparams];
        p->name = tpl + ts + 1;
        p->name_len = tl - 2;
        p->value = malloc(pl + 1);
        if (p->value == NULL)
            return -1;
        m->nparams++;
        long n = svc_percent_decode(path + ps, pl, p->value, 0);
        if (n < 0)
            return -1;
        p->value_len = (size_t)n;
    }
    return 0;
}

/* Splits "a=1&b=x%20y" into m->query. Returns a svc_match_result. */
static enum svc_match_result parse_query(const char *q, struct svc_match *m)
{
    while (*q != '\0') {
        size_t len = strcspn(q, "&");
        if (len > 0) {
            if (m->nquery >= SVC_MAX_QUERY)
                return SVC_MATCH_TOO_MANY_QUERY;
            const char *eq = memchr(q, '=', len);
            size_t klen = eq ? (size_t)(eq - q) : len;
            size_t vlen = eq ? len - klen - 1 : 0;
            struct svc_param *p = &m->query[m->nquery++];
            char *key = malloc(klen + 1);
            p->value = malloc(vlen + 1);
            p->name = key;
            if (key == NULL || p->value == NULL)
                return SVC_MATCH_BAD_ENCODING;
            long kn = svc_percent_decode(q, klen, key, 1);
            long vn = svc_percent_decode(eq ? eq + 1 : "", vlen, p->value, 1);
            if (kn < 0 || vn < 0)
                return SVC_MATCH_BAD_ENCODING;
            p->name_len = (size_t)kn;
            p->value_len = (size_t)vn;
            for (size_t i = 0; i + 1 < m->nquery; i++) {
                if (strcmp(m->query[i].name, key) == 0) {
                    snprintf(m->bad_query, sizeof(m->bad_query), "%s", key);
                    return SVC_MATCH_DUPLICATE_QUERY;
                }
            }
        }
        q += len;
        if (*q == '&')
            q++;
    }
    return SVC_MATCH_OK;
}

static void allow_add(struct svc_match *m, const char *method)
{
    if (strstr(m->allow, method) != NULL)
        return;
    size_t used = strlen(m->allow);
    snprintf(m->allow + used, sizeof(m->allow) - used, "%s%s", used ? ", " : "", method);
}

enum svc_match_result svc_router_match(const struct svc_route *routes, size_t nroutes,
                                       const char *method, const char *target, struct svc_match *m)
{
    memset(m, 0, sizeof(*m));
    m->route = -1;
    if (strcmp(method, "HEAD") == 0)
        method = "GET"; /* MHD sends the headers of the GET answer without its body */
    size_t path_len = strcspn(target, "?");
    int best_literals = -1, path_known = 0;
    char first = target[0] != '\0' ? target[1] : '\0';
    for (size_t i = 0; i < nroutes; i++) {
        int literals;
        const char *tpl = routes[i].path;
        /* cheap first: a literal first segment must start with the path's first character */
        if (tpl[1] != '{' && tpl[1] != first)
            continue;
        if (!template_fits(tpl, target, path_len, &literals))
            continue;
        path_known = 1;
        if (strcmp(routes[i].method, method) != 0) {
            allow_add(m, routes[i].method);
            continue;
        }
        if (literals > best_literals) {
            best_literals = literals;
            m->route = (int)i;
        }
    }
    if (m->route < 0)
        return path_known ? SVC_MATCH_METHOD_NOT_ALLOWED : SVC_MATCH_NOT_FOUND;
    enum svc_match_result r = SVC_MATCH_OK;
    if (extract_params(routes[m->route].path, target, path_len, m) != 0)
        r = SVC_MATCH_BAD_ENCODING;
    else if (target[path_len] == '?')
        r = parse_query(target + path_len + 1, m);
    if (r != SVC_MATCH_OK) {
        svc_match_free(m);
        m->route = -1;
    }
    return r;
}

void svc_match_free(struct svc_match *m)
{
    for (size_t i = 0; i < m->nparams; i++)
        free(m->params[i].value);
    for (size_t i = 0; i < m->nquery; i++) {
        free((char *)m->query[i].name);
        free(m->query[i].value);
    }
    m->nparams = 0;
    m->nquery = 0;
}

const char *svc_match_param(const struct svc_match *m, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < m->nparams; i++)
        if (m->params[i].name_len == len && memcmp(m->params[i].name, name, len) == 0)
            return m->params[i].value;
    return NULL;
}

const char *svc_match_query(const struct svc_match *m, const char *name)
{
    for (size_t i = 0; i < m->nquery; i++)
        if (strcmp(m->query[i].name, name) == 0)
            return m->query[i].value;
    return NULL;
}
