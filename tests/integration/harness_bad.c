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

size_t th_bad_bodies(struct th_bad *out, const char *method, const char *path, const char *ct,
                     const char *const *bodies, size_t n, long status, const char *code)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (struct th_bad){method, path, ct, bodies[i], status, code};
    return n;
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
