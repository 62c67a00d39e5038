/* Unit tests of service/metrics.c's Prometheus text: a family's HELP/TYPE header, samples
 * (integers without a fraction, other values to 9 digits, infinities, labels in braces only when
 * there are some), label values escaped (backslash, quote, newline), svc_metrics_family_from
 * taking one family's samples out of interleaved rows, counter vecs (several labels; a bounded
 * vec past its series limit counts new values under _other, other labels kept), the HTTP
 * counters and histograms, and an append past the buffer's bound reported as -1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "service/metrics.h"

/* Runs an append into a fresh buffer and checks it gives exactly want. */
#define ASSERT_RENDERS(want, call)                                                                 \
    do {                                                                                           \
        struct svc_buf b;                                                                          \
        svc_buf_init(&b, 1 << 16);                                                                 \
        assert_int_equal(call, 0);                                                                 \
        assert_string_equal(b.data, want);                                                         \
        svc_buf_free(&b);                                                                          \
    } while (0)

static void test_family_header(void **state)
{
    ASSERT_RENDERS("# HELP rowlock_x_total Things done\n# TYPE rowlock_x_total counter\n",
                   svc_metrics_family(&b, "rowlock_x_total", "counter", "Things done"));
}

static void test_sample_values(void **state)
{
    ASSERT_RENDERS("m 3\n", svc_metrics_sample(&b, "m", NULL, 3));
    ASSERT_RENDERS("m 0\n", svc_metrics_sample(&b, "m", "", 0));
    ASSERT_RENDERS("m{a=\"x\"} -2\n", svc_metrics_sample(&b, "m", "a=\"x\"", -2));
    ASSERT_RENDERS("m 0.25\n", svc_metrics_sample(&b, "m", NULL, 0.25));
    ASSERT_RENDERS("m 0.333333333\n", svc_metrics_sample(&b, "m", NULL, 1.0 / 3));
    ASSERT_RENDERS("m 999999999999999\n", svc_metrics_sample(&b, "m", NULL, 999999999999999.0));
    ASSERT_RENDERS("m 1e+15\n", svc_metrics_sample(&b, "m", NULL, 1e15));
    ASSERT_RENDERS("m +Inf\n", svc_metrics_sample(&b, "m", NULL, INFINITY));
    ASSERT_RENDERS("m -Inf\n", svc_metrics_sample(&b, "m", NULL, -INFINITY));
}

static void test_label_escaping(void **state)
{
    ASSERT_RENDERS("topic=\"plain\"", svc_metrics_label(&b, "topic", "plain"));
    ASSERT_RENDERS("topic=\"\"", svc_metrics_label(&b, "topic", ""));
    ASSERT_RENDERS("t=\"a\\\\b\\\"c\\nd\te\xc3\xa9\"",
                   svc_metrics_label(&b, "t", "a\\b\"c\nd\te\xc3\xa9"));
}

static void test_family_from_rows(void **state)
{
    const char *rows = "a{q=\"1\"} 1\n"
                       "a_total{q=\"1\"} 9\n"
                       "b{q=\"1\"} 2\n"
                       "a{q=\"2\"} 3\n"
                       "ab{q=\"1\"} 5\n"
                       "a{q=\"3\"} 6";
    ASSERT_RENDERS("# HELP a A\n# TYPE a gauge\na{q=\"1\"} 1\na{q=\"2\"} 3\na{q=\"3\"} 6",
                   svc_metrics_family_from(&b, rows, "a", "gauge", "A"));
    ASSERT_RENDERS("# HELP b B\n# TYPE b gauge\nb{q=\"1\"} 2\n",
                   svc_metrics_family_from(&b, rows, "b", "gauge", "B"));
    ASSERT_RENDERS("# HELP c C\n# TYPE c gauge\n",
                   svc_metrics_family_from(&b, rows, "c", "gauge", "C"));
    ASSERT_RENDERS("# HELP c C\n# TYPE c gauge\n",
                   svc_metrics_family_from(&b, NULL, "c", "gauge", "C"));
}

static void test_full_buffer_fails(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 16);
    assert_int_equal(svc_metrics_family(&b, "rowlock_long_name", "counter", "help"), -1);
    svc_buf_free(&b);
    svc_buf_init(&b, 12);
    assert_int_equal(svc_metrics_label(&b, "t", "\"\"\"\"\"\"\"\"\""), -1);
    svc_buf_free(&b);
    svc_buf_init(&b, 40);
    assert_int_equal(svc_metrics_family_from(&b, "a{q=\"1\"} 1\na{q=\"2\"} 2\n", "a", "gauge", "A"),
                     -1);
    svc_buf_free(&b);
}

static int teardown(void **state)
{
    svc_metrics_shutdown();
    svc_metrics_set_series_limit(100);
    return 0;
}

static void test_vec_labels(void **state)
{
    struct svc_counter_vec *one = svc_counter_vec_new("one_total", "One", "topic");
    struct svc_counter_vec *two = svc_counter_vec_new("two_total", "Two", "queue,reason");
    svc_counter_vec_add(one, "t\"1", 2);
    svc_counter_vec_add(one, "t2", 1);
    svc_counter_vec_add(one, "t\"1", 3);
    svc_counter_vec_add(two,
                        "q\x1f"
                        "expired",
                        1);
    svc_counter_vec_add(two, "q", 4);  /* a missing value renders empty */
    svc_counter_vec_add(NULL, "x", 1); /* no family: nothing */
    ASSERT_RENDERS("# HELP two_total Two\n# TYPE two_total counter\n"
                   "two_total{queue=\"q\",reason=\"expired\"} 1\n"
                   "two_total{queue=\"q\",reason=\"\"} 4\n"
                   "# HELP one_total One\n# TYPE one_total counter\n"
                   "one_total{topic=\"t\\\"1\"} 5\n"
                   "one_total{topic=\"t2\"} 1\n",
                   svc_metrics_render_vecs(&b));
}

static void test_bounded_vec_other(void **state)
{
    svc_metrics_set_series_limit(3);
    struct svc_counter_vec *v = svc_counter_vec_new("b_total", "B", "queue,reason");
    struct svc_counter_vec *free_vec = svc_counter_vec_new("f_total", "F", "queue");
    svc_counter_vec_bound(v);
    svc_counter_vec_add(v, "q1\x1fgone", 1);
    svc_counter_vec_add(v, "q2\x1fgone", 1);
    svc_counter_vec_add(v, "q3\x1fgone", 1); /* the third and last series kept */
    svc_counter_vec_add(v,
                        "q4\x1f"
                        "failed",
                        2); /* ...no: 3 kept, then _other */
    svc_counter_vec_add(v,
                        "q5\x1f"
                        "failed",
                        3);
    svc_counter_vec_add(v, "q6\x1fgone", 1);
    svc_counter_vec_add(v, "q1\x1fgone", 10); /* a kept series still counts */
    for (int i = 0; i < 10; i++)
        svc_counter_vec_add(free_vec, i % 2 ? "odd" : (char[]){(char)('a' + i), 0}, 1);
    ASSERT_RENDERS("# HELP f_total F\n# TYPE f_total counter\n"
                   "f_total{queue=\"a\"} 1\nf_total{queue=\"odd\"} 5\nf_total{queue=\"c\"} 1\n"
                   "f_total{queue=\"e\"} 1\nf_total{queue=\"g\"} 1\nf_total{queue=\"i\"} 1\n"
                   "# HELP b_total B\n# TYPE b_total counter\n"
                   "b_total{queue=\"q1\",reason=\"gone\"} 11\n"
                   "b_total{queue=\"q2\",reason=\"gone\"} 1\n"
                   "b_total{queue=\"q3\",reason=\"gone\"} 1\n"
                   "b_total{queue=\"_other\",reason=\"failed\"} 5\n"
                   "b_total{queue=\"_other\",reason=\"gone\"} 1\n",
                   svc_metrics_render_vecs(&b));
}

/* Many labels, each added in turn and then again in reverse: every one keeps its own count in
 * the order it was first added, through every growth of the vec's index. */
static void test_vec_many_labels(void **state)
{
    (void)state;
    enum { N = 3000 };
    struct svc_counter_vec *v = svc_counter_vec_new("m_total", "M", "topic");
    char label[32];
    for (int i = 0; i < N; i++) {
        snprintf(label, sizeof(label), "t%d", i);
        svc_counter_vec_add(v, label, (uint64_t)i);
    }
    for (int i = N - 1; i >= 0; i--) {
        snprintf(label, sizeof(label), "t%d", i);
        svc_counter_vec_add(v, label, 1);
    }
    struct svc_buf b;
    svc_buf_init(&b, 1 << 22);
    assert_int_equal(svc_metrics_render_vecs(&b), 0);
    const char *at = b.data;
    for (int i = 0; i < N; i++) {
        char want[64];
        snprintf(want, sizeof(want), "m_total{topic=\"t%d\"} %d\n", i, i + 1);
        const char *found = strstr(at, want);
        if (found == NULL)
            fail_msg("no %s in order after %d labels", want, i);
        at = found + strlen(want);
    }
    svc_buf_free(&b);
}

static enum svc_outcome no_handler(struct svc_request *req)
{
    (void)req;
    return SVC_REPLIED;
}

static void test_http_counters(void **state)
{
    struct svc_buf b;
    svc_buf_init(&b, 1 << 20);
    assert_int_equal(svc_metrics_render_http(&b), -1); /* before init */
    svc_buf_free(&b);
    static const struct svc_route routes[] = {
        {.method = "GET", .path = "/q/{queue}", .handler = no_handler}};
    assert_int_equal(svc_metrics_init(routes, 1), 0);
    svc_metrics_observe_http(0, 200, 0.0005); /* on a bucket's bound: in it */
    svc_metrics_observe_http(0, 200, 0.003);
    svc_metrics_observe_http(0, 404, 20);
    svc_metrics_observe_http(-1, 999, 0.01); /* unmatched, a status out of range */
    svc_buf_init(&b, 1 << 20);
    assert_int_equal(svc_metrics_render_http(&b), 0);
    static const char *const want[] = {
        "rowlock_http_requests_total{route=\"/q/{queue}\",method=\"GET\",status=\"200\"} 2\n",
        "rowlock_http_requests_total{route=\"/q/{queue}\",method=\"GET\",status=\"404\"} 1\n",
        "rowlock_http_requests_total{route=\"unmatched\",method=\"\",status=\"0\"} 1\n",
        "rowlock_http_request_duration_seconds_bucket{route=\"/q/{queue}\",method=\"GET\","
        "le=\"0.0005\"} 1\n",
        "rowlock_http_request_duration_seconds_bucket{route=\"/q/{queue}\",method=\"GET\","
        "le=\"0.001\"} 1\n",
        "rowlock_http_request_duration_seconds_bucket{route=\"/q/{queue}\",method=\"GET\","
        "le=\"0.005\"} 2\n",
        "rowlock_http_request_duration_seconds_bucket{route=\"/q/{queue}\",method=\"GET\","
        "le=\"10\"} 2\n",
        "rowlock_http_request_duration_seconds_bucket{route=\"/q/{queue}\",method=\"GET\","
        "le=\"+Inf\"} 3\n",
        "rowlock_http_request_duration_seconds_sum{route=\"/q/{queue}\",method=\"GET\"} 20.0035\n",
        "rowlock_http_request_duration_seconds_count{route=\"/q/{queue}\",method=\"GET\"} 3\n",
        "rowlock_http_request_duration_seconds_count{route=\"unmatched\",method=\"\"} 1\n",
        "# TYPE rowlock_http_request_duration_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (strstr(b.data, want[i]) == NULL)
            fail_msg("missing %s in:\n%s", want[i], b.data);
    assert_null(strstr(b.data, "status=\"999\""));
    svc_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_family_header),
        cmocka_unit_test(test_sample_values),
        cmocka_unit_test(test_label_escaping),
        cmocka_unit_test(test_family_from_rows),
        cmocka_unit_test(test_full_buffer_fails),
        cmocka_unit_test_teardown(test_vec_labels, teardown),
        cmocka_unit_test_teardown(test_bounded_vec_other, teardown),
        cmocka_unit_test_teardown(test_vec_many_labels, teardown),
        cmocka_unit_test_teardown(test_http_counters, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
