/* Bad-input tests as tables (see harness_bad.h). */
#include "harness_bad.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

int th_send(int port, const char *method, const char *path, const char *ct, const char *body,
            struct th_response *r)
{
    char h[128];
    const char *headers[] = {h, NULL};
    snprintf(h, sizeof(h), "Content-Type: %s", ct ? ct : "");
    return th_http(port, method, path, ct ? headers : NULL, body, body ? strlen(body) : 0, r);
}

void th_assert_unchanged(th_snapshot_fn snapshot, const char *before)
{
    char *after = snapshot();
    assert_non_null(after);
    if (strcmp(before, after) != 0)
        fprintf(stderr, "state changed:\nbefore %s\nafter  %s\n", before, after);
    assert_string_equal(before, after);
    free(after);
}

void th_expect_problems(int port, th_snapshot_fn snapshot, const struct th_bad *cases, size_t n)
{
    char *before = snapshot();
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
    th_assert_unchanged(snapshot, before);
    free(before);
}
