/* Bad-input tests as tables (see harness_bad.h). */
#include "harness_bad.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* GET r->get, without r->aged in the counts of its list's items. */
static json_t *read_list(const struct th_read *r)
{
    json_t *j = th_get_json(th_svc.port, r->get);
    size_t i;
    json_t *item;
    if (r->aged != NULL)
        json_array_foreach(json_object_get(j, r->name), i, item)
            json_object_del(json_object_get(item, "counts"), r->aged);
    return j;
}

char *th_bad_snapshot(const struct th_state *s)
{
    if (s->fn != NULL)
        return s->fn();
    json_t *snap = json_object();
    for (size_t i = 0; i < s->n; i++) {
        const struct th_read *r = &s->reads[i];
        json_object_set_new(snap, r->name,
                            r->get ? read_list(r) : th_sql_rows(th_svc_pg(), r->sql));
    }
    char *text = json_dumps(snap, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(snap);
    return text;
}

int th_send(int port, const char *method, const char *path, const char *ct, const char *body,
            struct th_response *r)
{
    char h[128];
    const char *headers[] = {h, NULL};
    snprintf(h, sizeof(h), "Content-Type: %s", ct ? ct : "");
    return th_http(port, method, path, ct ? headers : NULL, body, body ? strlen(body) : 0, r);
}

int th_bad_send(const char *method, const char *path, const char *ct, const char *body,
                struct th_response *r)
{
    return th_send(th_svc.port, method, path, ct, body, r);
}

void th_bad_unchanged(const struct th_state *s, const char *before)
{
    char *after = th_bad_snapshot(s);
    assert_non_null(after);
    if (strcmp(before, after) != 0)
        fprintf(stderr, "state changed:\nbefore %s\nafter  %s\n", before, after);
    assert_string_equal(before, after);
    free(after);
}

/* The table runner: every case to port, then the unchanged check. */
static void expect(int port, const struct th_state *s, const struct th_bad *cases, size_t n)
{
    char *before = th_bad_snapshot(s);
    assert_non_null(before);
    for (size_t i = 0; i < n; i++) {
        const struct th_bad *c = &cases[i];
        struct th_response r;
        assert_int_equal(th_send(port, c->method, c->path, c->ct, c->body, &r), 0);
        if (r.status != c->status || strcmp(th_problem_code(&r), c->code) != 0)
            fprintf(stderr, "%s %.200s (%s) %.300s: expected %ld %s, got %ld %.300s\n", c->method,
                    c->path, c->ct ? c->ct : "no content type", c->body ? c->body : "", c->status,
                    c->code, r.status, r.body ? r.body : "");
        th_assert_problem(&r, c->status, c->code);
        th_response_free(&r);
    }
    th_bad_unchanged(s, before);
    free(before);
}

void th_bad_expect(const struct th_state *s, const struct th_bad *cases, size_t n)
{
    expect(th_svc.port, s, cases, n);
}

void th_bad_expect_all(const struct th_state *s, const struct th_req *reqs, size_t n, long status,
                       const char *code)
{
    struct th_bad *cases = calloc(n ? n : 1, sizeof(*cases));
    assert_non_null(cases);
    for (size_t i = 0; i < n; i++)
        cases[i] =
            (struct th_bad){reqs[i].method, reqs[i].path, reqs[i].ct, reqs[i].body, status, code};
    th_bad_expect(s, cases, n);
    free(cases);
}

void th_bad_expect_bodies(const struct th_state *s, const char *method, const char *path,
                          const char *ct, const char *const *bodies, size_t n, long status,
                          const char *code)
{
    struct th_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
    assert_non_null(reqs);
    for (size_t i = 0; i < n; i++)
        reqs[i] = (struct th_req){method, path, ct, bodies[i]};
    th_bad_expect_all(s, reqs, n, status, code);
    free(reqs);
}

/* th_bad_expect_all of routes sent to paths[i] (malloc'd, as is paths; freed here). */
static void expect_on_paths(const struct th_state *s, const struct th_req *routes, char **paths,
                            size_t n, long status, const char *code)
{
    struct th_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
    assert_non_null(reqs);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(paths[i]);
        reqs[i] = (struct th_req){routes[i].method, paths[i], routes[i].ct, routes[i].body};
    }
    th_bad_expect_all(s, reqs, n, status, code);
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
    free(reqs);
}

void th_bad_expect_named(const struct th_state *s, const struct th_req *routes, size_t n,
                         const char *name, int64_t id, long status, const char *code)
{
    char **paths = calloc(n ? n : 1, sizeof(*paths));
    assert_non_null(paths);
    for (size_t i = 0; i < n; i++)
        if (asprintf(&paths[i], routes[i].path, name, id) < 0)
            paths[i] = NULL;
    expect_on_paths(s, routes, paths, n, status, code);
}

void th_bad_expect_gets(const struct th_state *s, const char *prefix, const char *const *suffixes,
                        size_t n, long status, const char *code)
{
    static const struct th_req get = {"GET", NULL, NULL, NULL};
    struct th_req *gets = calloc(n ? n : 1, sizeof(*gets));
    char **paths = calloc(n ? n : 1, sizeof(*paths));
    assert_true(gets != NULL && paths != NULL);
    for (size_t i = 0; i < n; i++) {
        gets[i] = get;
        if (asprintf(&paths[i], "%s%s", prefix, suffixes[i]) < 0)
            paths[i] = NULL;
    }
    expect_on_paths(s, gets, paths, n, status, code);
    free(gets);
}

void th_bad_names(const char *out[TH_BAD_NAMES])
{
    static char long_name[130];
    memset(long_name, 'a', 129);
    const char *names[TH_BAD_NAMES] = {".lead", "-lead", "_lead",  long_name, "a%2Fb",
                                       "a%20b", "a+b",   "%C3%A9", "a%3Bb",   "a*"};
    memcpy(out, names, sizeof(names));
}

char *th_bad_batch(const char *member, const char *item_fmt, int n, int bad_at, const char *bad)
{
    size_t cap = (size_t)n * 64 + strlen(member) + (bad ? strlen(bad) : 0) + 256;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t o = (size_t)snprintf(b, cap, "{\"%s\":[", member);
    for (int i = 0; i < n; i++) {
        if (i > 0)
            b[o++] = ',';
        if (i == bad_at)
            o += (size_t)snprintf(b + o, cap - o, "%s", bad);
        else
            o += (size_t)snprintf(b + o, cap - o, item_fmt, i, i);
    }
    snprintf(b + o, cap - o, "]}");
    return b;
}

void th_assert_unchanged(th_snapshot_fn snapshot, const char *before)
{
    const struct th_state s = {.fn = snapshot};
    th_bad_unchanged(&s, before);
}

void th_expect_problems(int port, th_snapshot_fn snapshot, const struct th_bad *cases, size_t n)
{
    const struct th_state s = {.fn = snapshot};
    expect(port, &s, cases, n);
}

/* Sends body to shape's path and asserts its problem's detail holds want. */
static void assert_detail_names(const struct th_batch_shape *shape, const char *body,
                                const char *want)
{
    struct th_response r;
    assert_int_equal(th_bad_send("POST", shape->path, "application/json", body, &r), 0);
    const char *detail = json_string_value(json_object_get(r.json, "detail"));
    if (detail == NULL || strstr(detail, want) == NULL)
        fprintf(stderr, "POST %s: the detail does not name %s: %.300s\n", shape->path, want,
                r.body ? r.body : "");
    assert_non_null(detail);
    assert_non_null(strstr(detail, want));
    th_response_free(&r);
}

void th_bad_expect_batches(const struct th_state *s, const struct th_batch_shape *shape,
                           const struct th_batch_case *cases, size_t n, const char *code)
{
    char **bodies = calloc(n ? n : 1, sizeof(*bodies));
    assert_non_null(bodies);
    for (size_t i = 0; i < n; i++)
        bodies[i] =
            th_bad_batch(shape->member, shape->item_fmt, cases[i].n, cases[i].at, cases[i].item);
    char *too_big = th_bad_batch(shape->member, shape->item_fmt, 1001, -1, NULL);
    th_bad_expect_bodies(s, "POST", shape->path, "application/json", (const char *const *)bodies, n,
                         400, code);
    th_bad_expect_bodies(s, "POST", shape->path, "application/json", (const char *const[]){too_big},
                         1, 400, "batch_too_large");
    /* the refusal names the bad item of a batch, and the limit */
    char want[64];
    for (size_t i = 0; i < n; i++) {
        snprintf(want, sizeof(want), "%s %d", shape->word, cases[i].at);
        if (cases[i].named)
            assert_detail_names(shape, bodies[i], want);
    }
    assert_detail_names(shape, too_big, "1000");
    for (size_t i = 0; i < n; i++)
        free(bodies[i]);
    free(bodies);
    free(too_big);
}
