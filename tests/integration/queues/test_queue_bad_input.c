/* Bad input on every queue route: each request answers its problem code (problem+json) and
 * writes nothing. The queue holds a job in each state (pending, processing with a known lease,
 * succeeded, failed), and the lease bodies that are refused name that real lease with one thing
 * wrong, so that a check skipped would show as a write. After every group the whole visible state
 * is compared with a snapshot taken before it: the queue list with counts, the jobs, their bodies
 * and attempt history, the queue rows (with updated_at, so a stray update shows) and the id
 * sequences (so not even a queue id was drawn). */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness_bad.h"

static int64_t j_pending, j_processing, j_succeeded, j_failed, fence; /* fence: j_processing's */

#define JSON "application/json"
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Enqueues one job and claims it as w1; returns its id and fence. */
static int64_t claimed_job(int64_t *job_fence)
{
    json_t *e = th_svc_call("POST", "/queues/q/jobs", "{\"payload\":{\"a\":1}}", 201);
    json_t *c = th_svc_call("POST", "/queues/q/leases", "{\"owner\":\"w1\"}", 200);
    json_t *l = json_array_get(json_object_get(c, "leases"), 0);
    int64_t id = json_integer_value(json_object_get(e, "id"));
    *job_fence = json_integer_value(json_object_get(l, "fence"));
    if (json_integer_value(json_object_get(l, "job_id")) != id)
        id = 0;
    json_decref(e);
    json_decref(c);
    return id;
}

static void settle(int64_t id, int64_t f, const char *verb, const char *extra)
{
    char path[128], body[160];
    snprintf(path, sizeof(path), "/queues/q/leases/%" PRId64 "/%s", id, verb);
    snprintf(body, sizeof(body), "{\"owner\":\"w1\",\"fence\":%" PRId64 "%s}", f, extra);
    json_decref(th_svc_call("POST", path, body, 200));
}

static int setup(void **state)
{
    if (th_svc_start("qbadinput", NULL) != 0)
        return -1;
    json_decref(th_svc_call("PUT", "/queues/q", "{\"max_attempts\":2,\"lease_seconds\":300}", 201));
    int64_t f = 0;
    j_succeeded = claimed_job(&f);
    settle(j_succeeded, f, "complete", "");
    j_failed = claimed_job(&f);
    settle(j_failed, f, "fail", ",\"retry\":false");
    j_processing = claimed_job(&fence);
    json_t *p =
        th_svc_call("POST", "/queues/q/jobs", "{\"payload\":[1],\"dedupe_key\":\"d\"}", 201);
    j_pending = json_integer_value(json_object_get(p, "id"));
    json_decref(p);
    return j_succeeded > 0 && j_failed > 0 && j_processing > 0 && j_pending > 0 ? 0 : -1;
}

/* ---- the state that bad input must leave alone: everything a write could change ---- */

static const struct th_read queue_reads[] = {
    {"queues", "/queues?limit=1000", NULL, "oldest_pending_age_seconds"},
    {"jobs", "/queues/q/jobs?limit=1000", NULL, NULL},
    {"queue_rows", NULL, "SELECT * FROM rowlock.queues ORDER BY id", NULL},
    {"job_rows", NULL, "SELECT * FROM rowlock.jobs ORDER BY id", NULL},
    {"bodies", NULL, "SELECT * FROM rowlock.job_bodies ORDER BY job_id", NULL},
    {"attempts", NULL, "SELECT * FROM rowlock.job_attempts ORDER BY job_id, fence", NULL},
    {"queue_seq", NULL, "SELECT last_value, is_called FROM rowlock.queues_id_seq", NULL},
    {"key_rows", NULL, "SELECT * FROM rowlock.queue_keys ORDER BY queue_id, key", NULL},
    {"limiter_rows", NULL, "SELECT * FROM rowlock.queue_limiter ORDER BY queue_id, key", NULL},
};
static const struct th_state queue_state = {queue_reads, N(queue_reads), NULL};

/* A lease body for j_processing with its real owner and fence, plus extra members. */
static const char *lease_body(char *buf, size_t size, const char *extra)
{
    snprintf(buf, size, "{\"owner\":\"w1\",\"fence\":%" PRId64 "%s}", fence, extra);
    return buf;
}

/* Every route that takes {queue}, with a valid body, for one bad queue (path-encoded); PUT
 * /queues/{queue} too unless skip_put (for a valid name it creates the queue). */
static void every_queue_route(const char *queue, long status, const char *code, int skip_put)
{
    char lease[96], items[160];
    snprintf(items, sizeof(items),
             "{\"owner\":\"w1\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":%" PRId64 "}]}",
             j_processing, fence);
    lease_body(lease, sizeof(lease), "");
    const struct th_req routes[] = {
        {"PUT", "/queues/%s", JSON, "{}"},
        {"GET", "/queues/%s", NULL, NULL},
        {"POST", "/queues/%s/jobs", JSON, "{\"payload\":1}"},
        {"POST", "/queues/%s/jobs", JSON, "{\"jobs\":[{\"payload\":1}]}"},
        {"GET", "/queues/%s/jobs?state=pending", NULL, NULL},
        {"GET", "/queues/%s/jobs/%" PRId64, NULL, NULL},
        {"DELETE", "/queues/%s/jobs/%" PRId64, NULL, NULL},
        {"POST", "/queues/%s/leases", JSON, "{\"owner\":\"w2\"}"},
        {"POST", "/queues/%s/leases", JSON, "{\"owner\":\"w2\",\"wait_seconds\":1}"},
        {"POST", "/queues/%s/leases:complete", JSON, items},
        {"PATCH", "/queues/%s/leases/%" PRId64, JSON, lease},
        {"POST", "/queues/%s/leases/%" PRId64 "/complete", JSON, lease},
        {"POST", "/queues/%s/leases/%" PRId64 "/fail", JSON, lease},
        {"POST", "/queues/%s/leases/%" PRId64 "/handback", JSON, lease},
        {"POST", "/queues/%s/leases/%" PRId64 "/release", JSON, lease},
    };
    th_bad_expect_named(&queue_state, routes + skip_put, N(routes) - (size_t)skip_put, queue,
                        j_processing, status, code);
    const struct th_req retry = {"POST", "/queues/%s/jobs/%" PRId64 "/retry", NULL, NULL};
    th_bad_expect_named(&queue_state, &retry, 1, queue, j_failed, status, code);
}

static void bad_queue_names_are_400_invalid_name_on_every_route(void **state)
{
    const char *names[TH_BAD_NAMES];
    th_bad_names(names);
    for (size_t i = 0; i < TH_BAD_NAMES; i++)
        every_queue_route(names[i], 400, "invalid_name", 0);
}

static void unknown_queue_is_404_queue_not_found_on_every_route(void **state)
{
    every_queue_route("ghost", 404, "queue_not_found", 1);
}

/* Every route that takes a job id, for one bad id (path text). */
static void every_job_id_route(const char *id, long status, const char *code)
{
    char lease[96];
    lease_body(lease, sizeof(lease), "");
    const struct th_req routes[] = {
        {"GET", "/queues/q/jobs/%s", NULL, NULL},
        {"DELETE", "/queues/q/jobs/%s", NULL, NULL},
        {"POST", "/queues/q/jobs/%s/retry", NULL, NULL},
        {"PATCH", "/queues/q/leases/%s", JSON, lease},
        {"POST", "/queues/q/leases/%s/complete", JSON, lease},
        {"POST", "/queues/q/leases/%s/fail", JSON, lease},
        {"POST", "/queues/q/leases/%s/handback", JSON, lease},
        {"POST", "/queues/q/leases/%s/release", JSON, lease},
    };
    th_bad_expect_named(&queue_state, routes, N(routes), id, 0, status, code);
}

static void bad_job_ids_are_400_invalid_parameter(void **state)
{
    const char *ids[] = {"abc",  "0",    "-1", "1.5", "1e3", "0x10", "%2B5",
                         "%205", "5%20", "5a", "00",  "-0",  "1%2F2"};
    for (size_t i = 0; i < N(ids); i++)
        every_job_id_route(ids[i], 400, "invalid_parameter");
}

/* A job id past int64 is not silently clamped to the largest one. */
static void out_of_range_job_ids_are_400_not_clamped(void **state)
{
    every_job_id_route("99999999999999999999", 400, "invalid_parameter");
    every_job_id_route("9223372036854775808", 400, "invalid_parameter");
}

static void unknown_job_is_404_job_not_found(void **state)
{
    every_job_id_route("999999", 404, "job_not_found");
    every_job_id_route("9223372036854775807", 404, "job_not_found");
}

static void invalid_config_is_400_invalid_config(void **state)
{
    const char *queues[] = {"/queues/q", "/queues/fresh"}; /* update and create */
    const char *bodies[] = {
        "{\"max_attempts\":0}",
        "{\"max_attempts\":-1}",
        "{\"max_attempts\":1.5}",
        "{\"max_attempts\":\"3\"}",
        "{\"max_attempts\":null}",
        "{\"max_attempts\":1000001}",
        "{\"lease_seconds\":\"x\"}",
        "{\"lease_seconds\":0}",
        "{\"lease_seconds\":604801}",
        "{\"backoff_base_seconds\":-1}",
        "{\"backoff_base_seconds\":\"1\"}",
        "{\"backoff_max_seconds\":-0.5}",
        "{\"retention_seconds\":0}",
        "{\"retention_seconds\":true}",
        "{\"colour\":\"red\"}",
        "{\"max_attempts\":3,\"name\":\"q\"}",
        /* limits, the queue's and every key's: below 1, over the maximum, a rate with no
         * period (or no limit), unknown members, the wrong types */
        "{\"limits\":{\"concurrency\":0}}",
        "{\"limits\":{\"concurrency\":1000001}}",
        "{\"limits\":{\"concurrency\":\"2\"}}",
        "{\"limits\":{\"concurrency\":1.5}}",
        "{\"limits\":{\"rate\":{\"limit\":5}}}",
        "{\"limits\":{\"rate\":{\"period_seconds\":1}}}",
        "{\"limits\":{\"rate\":{\"limit\":0,\"period_seconds\":1}}}",
        "{\"limits\":{\"rate\":{\"limit\":5,\"period_seconds\":0}}}",
        "{\"limits\":{\"rate\":{\"limit\":5,\"period_seconds\":86401}}}",
        "{\"limits\":{\"rate\":{\"limit\":5,\"period_seconds\":1,\"burst\":0}}}",
        "{\"limits\":{\"rate\":{\"limit\":5,\"period_seconds\":1,\"colour\":1}}}",
        "{\"limits\":{\"rate\":7}}",
        "{\"limits\":{\"colour\":1}}",
        "{\"limits\":5}",
        "{\"key_limits\":{\"concurrency\":0}}",
        "{\"key_limits\":{\"rate\":{\"limit\":5}}}",
        "{\"key_limits\":{\"rate\":{\"limit\":1000001,\"period_seconds\":1}}}",
        "{\"key_limits\":[]}",
        "[]",
        "7",
        "\"q\"",
        "null",
    };
    for (size_t q = 0; q < N(queues); q++)
        th_bad_expect_bodies(&queue_state, "PUT", queues[q], JSON, bodies, N(bodies), 400,
                             "invalid_config");
}

static void invalid_jobs_are_400_invalid_job(void **state)
{
    char long_dedupe[1100];
    snprintf(long_dedupe, sizeof(long_dedupe), "{\"payload\":1,\"dedupe_key\":\"%01025d\"}", 0);
    char long_key[1100];
    snprintf(long_key, sizeof(long_key), "{\"payload\":1,\"concurrency_key\":\"%01025d\"}", 0);
    const char *bodies[] = {
        "{}",
        "{\"dedupe_key\":\"k\"}",
        "{\"payload\":1,\"colour\":\"red\"}",
        "{\"payload\":1,\"run_at\":\"not a time\"}",
        "{\"payload\":1,\"run_at\":\"2024-13-45T00:00:00Z\"}",
        "{\"payload\":1,\"run_at\":5}",
        "{\"payload\":1,\"run_at\":\"2024-05-01T13:00:00Z\",\"delay_seconds\":5}",
        "{\"payload\":1,\"delay_seconds\":-1}",
        "{\"payload\":1,\"delay_seconds\":\"5\"}",
        "{\"payload\":1,\"delay_seconds\":315360001}",
        "{\"payload\":1,\"priority\":1.5}",
        "{\"payload\":1,\"priority\":1000001}",
        "{\"payload\":1,\"max_attempts\":0}",
        "{\"payload\":1,\"max_attempts\":\"2\"}",
        "{\"payload\":1,\"dedupe_key\":\"\"}",
        "{\"payload\":1,\"dedupe_key\":7}",
        "{\"payload\":1,\"dedupe_key\":null}",
        long_dedupe,
        "{\"payload\":1,\"concurrency_key\":\"\"}",
        "{\"payload\":1,\"concurrency_key\":7}",
        "{\"payload\":1,\"concurrency_key\":[\"k\"]}",
        long_key,
        "{\"jobs\":[]}",
        "{\"jobs\":{}}",
        "{\"jobs\":null}",
        "{\"jobs\":[{\"payload\":1}],\"payload\":1}",
        "{\"jobs\":[1]}",
        "[{\"payload\":1}]",
        "\"job\"",
        "null",
    };
    th_bad_expect_bodies(&queue_state, "POST", "/queues/q/jobs", JSON, bodies, N(bodies), 400,
                         "invalid_job");
}

/* run_at is an RFC 3339 timestamp with its offset: PostgreSQL's other readings ("infinity",
 * "tomorrow", a date alone, a time without offset read in the session's zone) are refused too.
 * ("-infinity" accepted would make GET /queues/{queue} fail while the job is pending.) */
static void run_at_that_is_not_rfc3339_is_400_invalid_job(void **state)
{
    const char *values[] = {"infinity",
                            "-infinity",
                            "tomorrow",
                            "epoch",
                            "now",
                            "2025-01-01",
                            "Jan 5 2025",
                            "2025-01-01T00:00:00",
                            "1999-01-08 04:05:06 PST"};
    char text[N(values)][128];
    const char *bodies[N(values)];
    for (size_t i = 0; i < N(values); i++) {
        snprintf(text[i], sizeof(text[i]), "{\"payload\":1,\"run_at\":\"%s\"}", values[i]);
        bodies[i] = text[i];
    }
    th_bad_expect_bodies(&queue_state, "POST", "/queues/q/jobs", JSON, bodies, N(bodies), 400,
                         "invalid_job");
}

static void bad_batches_write_none_of_their_jobs(void **state)
{
    static const struct th_batch_shape jobs = {"/queues/q/jobs", "jobs",
                                               "{\"payload\":%d,\"dedupe_key\":\"b%d\"}", "job"};
    static const struct th_batch_case bad[] = {
        {5, 4, "{\"dedupe_key\":\"x\"}", 1},
        {5, 2, "{\"payload\":1,\"colour\":\"red\"}", 0},
        {5, 1, "{\"payload\":1,\"run_at\":\"2030-01-01T00:00:00Z\",\"delay_seconds\":1}", 0},
        /* these two pass the route's checks; PostgreSQL refuses the value, mid-transaction */
        {5, 3, "{\"payload\":1,\"run_at\":\"yesterday-ish\"}", 0},
        {1000, 999, "{\"payload\":1,\"run_at\":\"2024-02-30T00:00:00Z\"}", 0},
    };
    th_bad_expect_batches(&queue_state, &jobs, bad, N(bad), "invalid_job");
}

static void bad_claims_are_400_invalid_lease(void **state)
{
    const char *bodies[] = {
        "{}",
        "{\"owner\":\"\"}",
        "{\"owner\":5}",
        "{\"owner\":null}",
        "{\"max_jobs\":1}",
        "{\"owner\":\"w2\",\"max_jobs\":0}",
        "{\"owner\":\"w2\",\"max_jobs\":1001}",
        "{\"owner\":\"w2\",\"max_jobs\":\"1\"}",
        "{\"owner\":\"w2\",\"lease_seconds\":0}",
        "{\"owner\":\"w2\",\"lease_seconds\":604801}",
        "{\"owner\":\"w2\",\"wait_seconds\":-1}",
        "{\"owner\":\"w2\",\"wait_seconds\":31}",
        "{\"owner\":\"w2\",\"wait_seconds\":0.5}",
        "{\"owner\":\"w2\",\"fence\":1}",
        "{\"owner\":\"w2\",\"colour\":\"red\"}",
        "[\"w2\"]",
        "\"w2\"",
    };
    th_bad_expect_bodies(&queue_state, "POST", "/queues/q/leases", JSON, bodies, N(bodies), 400,
                         "invalid_lease");
    char long_owner[300];
    snprintf(long_owner, sizeof(long_owner), "{\"owner\":\"%0256d\"}", 0);
    th_bad_expect_bodies(&queue_state, "POST", "/queues/q/leases", JSON,
                         (const char *[]){long_owner}, 1, 400, "invalid_lease");
}

/* Each lease write with the real lease of j_processing and one thing wrong. */
static void bad_lease_writes_are_400_invalid_lease(void **state)
{
    char path[5][128], unknown[128], f0[64], fstr[64], fneg[64];
    const char *verbs[] = {"", "/complete", "/fail", "/handback", "/release"};
    for (size_t v = 0; v < N(verbs); v++)
        snprintf(path[v], sizeof(path[v]), "/queues/q/leases/%" PRId64 "%s", j_processing,
                 verbs[v]);
    lease_body(unknown, sizeof(unknown), ",\"colour\":\"red\"");
    snprintf(f0, sizeof(f0), "{\"owner\":\"w1\",\"fence\":0}");
    snprintf(fstr, sizeof(fstr), "{\"owner\":\"w1\",\"fence\":\"%" PRId64 "\"}", fence);
    snprintf(fneg, sizeof(fneg), "{\"owner\":\"w1\",\"fence\":-%" PRId64 "}", fence);
    char no_owner[64], no_fence[] = "{\"owner\":\"w1\"}", empty_owner[64], bad_retry[96],
                       bad_lease_s[96], result_on_hb[96];
    snprintf(no_owner, sizeof(no_owner), "{\"fence\":%" PRId64 "}", fence);
    snprintf(empty_owner, sizeof(empty_owner), "{\"owner\":\"\",\"fence\":%" PRId64 "}", fence);
    lease_body(bad_retry, sizeof(bad_retry), ",\"retry\":\"yes\"");
    lease_body(bad_lease_s, sizeof(bad_lease_s), ",\"lease_seconds\":0");
    lease_body(result_on_hb, sizeof(result_on_hb), ",\"result\":1");
    const char *common[] = {no_owner, no_fence, empty_owner, f0, fstr, fneg, unknown, "[]", "1"};
    for (size_t v = 0; v < N(verbs); v++)
        th_bad_expect_bodies(&queue_state, v == 0 ? "PATCH" : "POST", path[v], JSON, common,
                             N(common), 400, "invalid_lease");
    const struct th_req one_wrong[] = {
        {"POST", path[2], JSON, bad_retry},     {"PATCH", path[0], JSON, bad_lease_s},
        {"PATCH", path[0], JSON, result_on_hb}, {"POST", path[1], JSON, bad_lease_s},
        {"POST", path[3], JSON, result_on_hb},
    };
    th_bad_expect_all(&queue_state, one_wrong, N(one_wrong), 400, "invalid_lease");
}

static void bad_settlements_are_400_and_settle_nothing(void **state)
{
    char dup[256], no_fence[128], fence0[256], unknown[192], no_owner[192], top[192], item_bad[192];
    const char *item_fmt = "{\"job_id\":%" PRId64 ",\"fence\":%" PRId64 "}";
    char item[96];
    snprintf(item, sizeof(item), item_fmt, j_processing, fence);
    snprintf(dup, sizeof(dup), "{\"owner\":\"w1\",\"items\":[%s,%s]}", item, item);
    snprintf(no_fence, sizeof(no_fence), "{\"owner\":\"w1\",\"items\":[{\"job_id\":%" PRId64 "}]}",
             j_processing);
    snprintf(fence0, sizeof(fence0),
             "{\"owner\":\"w1\",\"items\":[%s,{\"job_id\":%" PRId64 ",\"fence\":0}]}", item,
             j_pending);
    snprintf(unknown, sizeof(unknown),
             "{\"owner\":\"w1\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":%" PRId64
             ",\"colour\":1}]}",
             j_processing, fence);
    snprintf(no_owner, sizeof(no_owner), "{\"items\":[%s]}", item);
    snprintf(top, sizeof(top), "{\"owner\":\"w1\",\"items\":[%s],\"colour\":1}", item);
    snprintf(item_bad, sizeof(item_bad), "{\"owner\":\"w1\",\"items\":[%s,7]}", item);
    char *too_many = malloc(1001 * 40 + 64);
    size_t o = (size_t)sprintf(too_many, "{\"owner\":\"w1\",\"items\":[%s", item);
    for (int i = 1; i < 1001; i++)
        o += (size_t)sprintf(too_many + o, ",{\"job_id\":%d,\"fence\":1}", 1000000 + i);
    strcpy(too_many + o, "]}");
    const char *p = "/queues/q/leases:complete";
    const char *bodies[] = {dup,
                            "{\"owner\":\"w1\",\"items\":[]}",
                            "{\"owner\":\"w1\",\"items\":{}}",
                            "{\"owner\":\"w1\"}",
                            no_fence,
                            fence0,
                            unknown,
                            no_owner,
                            top,
                            item_bad,
                            "[]"};
    th_bad_expect_bodies(&queue_state, "POST", p, JSON, bodies, N(bodies), 400, "invalid_lease");
    th_bad_expect_bodies(&queue_state, "POST", p, JSON, (const char *[]){too_many}, 1, 400,
                         "batch_too_large");
    free(too_many);
}

static void bad_list_parameters_are_400_invalid_parameter(void **state)
{
    const char *q[] = {"state=done",
                       "state=",
                       "state=PENDING",
                       "state=pending,failed",
                       "limit=0",
                       "limit=1001",
                       "limit=x",
                       "limit=",
                       "after=-1",
                       "after=x",
                       "after=1.5",
                       "limit=5x",
                       "after=0x10",
                       "after=99999999999999999999",
                       "limit=99999999999999999999"};
    th_bad_expect_gets(&queue_state, "/queues/q/jobs?", q, N(q), 400, "invalid_parameter");
    const char *list[] = {"limit=0", "limit=abc", "limit=1001"};
    th_bad_expect_gets(&queue_state, "/queues?", list, N(list), 400, "invalid_parameter");
}

static void wrong_content_type_is_415(void **state)
{
    char lease[96], hb[128], complete[128], items[160];
    lease_body(lease, sizeof(lease), "");
    snprintf(hb, sizeof(hb), "/queues/q/leases/%" PRId64, j_processing);
    snprintf(complete, sizeof(complete), "/queues/q/leases/%" PRId64 "/complete", j_processing);
    snprintf(items, sizeof(items),
             "{\"owner\":\"w1\",\"items\":[{\"job_id\":%" PRId64 ",\"fence\":%" PRId64 "}]}",
             j_processing, fence);
    const char *cts[] = {"text/plain", NULL, "application/merge-patch+json", "application/jsonx",
                         "application/xml"};
    const struct th_req routes[] = {
        {"PUT", "/queues/q", NULL, "{}"},
        {"PUT", "/queues/fresh", NULL, "{}"},
        {"POST", "/queues/q/jobs", NULL, "{\"payload\":1}"},
        {"POST", "/queues/q/leases", NULL, "{\"owner\":\"w2\"}"},
        {"PATCH", hb, NULL, lease},
        {"POST", complete, NULL, lease},
        {"POST", "/queues/q/leases:complete", NULL, items},
    };
    struct th_req sent[N(cts) * N(routes)];
    size_t n = 0;
    for (size_t r = 0; r < N(routes); r++)
        for (size_t c = 0; c < N(cts); c++)
            sent[n++] = (struct th_req){routes[r].method, routes[r].path, cts[c], routes[r].body};
    th_bad_expect_all(&queue_state, sent, n, 415, "unsupported_media_type");
}

static void malformed_json_is_400_invalid_json(void **state)
{
    char hb[128], complete[128];
    snprintf(hb, sizeof(hb), "/queues/q/leases/%" PRId64, j_processing);
    snprintf(complete, sizeof(complete), "/queues/q/leases/%" PRId64 "/complete", j_processing);
    const struct th_req bad[] = {
        {"PUT", "/queues/q", JSON, "{"},
        {"PUT", "/queues/fresh", JSON, "{'max_attempts':1}"},
        {"PUT", "/queues/fresh", JSON, ""},
        {"POST", "/queues/q/jobs", JSON, "{\"payload\":}"},
        {"POST", "/queues/q/jobs", JSON, "{\"payload\":1} {}"},
        {"POST", "/queues/q/jobs", JSON, "{\"payload\":\"a\\u0000b\"}"},
        {"POST", "/queues/q/jobs", JSON, "{\"payload\":\"\xff\"}"},
        {"POST", "/queues/q/jobs", JSON, ""},
        {"POST", "/queues/q/leases", JSON, "{\"owner\":\"w2\""},
        {"POST", "/queues/q/leases", JSON, "{\"owner\":\"w2\",}"},
        {"PATCH", hb, JSON, "{\"owner\":\"w1\",\"fence\":1,}"},
        {"POST", complete, JSON, "{\"owner\":\"w1\",\"fence\":tru}"},
        {"POST", "/queues/q/leases:complete", JSON, "{\"items\":["},
    };
    th_bad_expect_all(&queue_state, bad, N(bad), 400, "invalid_json");
}

static void retry_of_a_job_not_failed_is_409_job_not_failed(void **state)
{
    char p[3][96];
    int64_t ids[] = {j_pending, j_processing, j_succeeded};
    for (int i = 0; i < 3; i++)
        snprintf(p[i], sizeof(p[i]), "/queues/q/jobs/%" PRId64 "/retry", ids[i]);
    const struct th_req bad[] = {
        {"POST", p[0], NULL, NULL},
        {"POST", p[1], NULL, NULL},
        {"POST", p[2], NULL, NULL},
    };
    th_bad_expect_all(&queue_state, bad, N(bad), 409, "job_not_failed");
}

static void cancel_of_a_finished_job_is_409_job_terminal(void **state)
{
    char p[2][96];
    snprintf(p[0], sizeof(p[0]), "/queues/q/jobs/%" PRId64, j_succeeded);
    snprintf(p[1], sizeof(p[1]), "/queues/q/jobs/%" PRId64, j_failed);
    const struct th_req bad[] = {{"DELETE", p[0], NULL, NULL}, {"DELETE", p[1], NULL, NULL}};
    th_bad_expect_all(&queue_state, bad, N(bad), 409, "job_terminal");
}

/* A concurrency key's own limits: a body that sets none or breaks a rule is 400 invalid_config,
 * a key that breaks the key rules 400 invalid_key, an unknown queue 404, and taking back the
 * limits of a key without its own 404 key_not_found; nothing changes. */
static void bad_key_limits_are_refused(void **state)
{
    const char *bodies[] = {
        "{}",
        "{\"limits\":null}",
        "{\"limits\":{}}",
        "{\"limits\":{\"concurrency\":0}}",
        "{\"limits\":{\"concurrency\":1000001}}",
        "{\"limits\":{\"rate\":{\"limit\":1}}}",
        "{\"limits\":{\"rate\":{\"limit\":1,\"period_seconds\":-1}}}",
        "{\"limits\":{\"concurrency\":1},\"colour\":1}",
        "{\"concurrency\":1}",
        "[]",
    };
    th_bad_expect_bodies(&queue_state, "PUT", "/queues/q/keys/k", JSON, bodies, N(bodies), 400,
                         "invalid_config");
    char long_key[1100] = "/queues/q/keys/";
    memset(long_key + strlen(long_key), 'k', 1025);
    const struct th_req bad_keys[] = {
        {"PUT", "/queues/q/keys/%FF", JSON, "{\"limits\":{\"concurrency\":1}}"},
        {"GET", "/queues/q/keys/%FF", NULL, NULL},
        {"DELETE", "/queues/q/keys/%FF", NULL, NULL},
        {"PUT", long_key, JSON, "{\"limits\":{\"concurrency\":1}}"},
    };
    th_bad_expect_all(&queue_state, bad_keys, N(bad_keys), 400, "invalid_key");
    const struct th_req unknown[] = {
        {"PUT", "/queues/nosuch/keys/k", JSON, "{\"limits\":{\"concurrency\":1}}"},
        {"GET", "/queues/nosuch/keys/k", NULL, NULL},
        {"DELETE", "/queues/nosuch/keys/k", NULL, NULL},
        {"GET", "/queues/nosuch/keys", NULL, NULL},
    };
    th_bad_expect_all(&queue_state, unknown, N(unknown), 404, "queue_not_found");
    const struct th_req none[] = {{"DELETE", "/queues/q/keys/k", NULL, NULL}};
    th_bad_expect_all(&queue_state, none, N(none), 404, "key_not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_queue_names_are_400_invalid_name_on_every_route),
        cmocka_unit_test(unknown_queue_is_404_queue_not_found_on_every_route),
        cmocka_unit_test(bad_job_ids_are_400_invalid_parameter),
        cmocka_unit_test(out_of_range_job_ids_are_400_not_clamped),
        cmocka_unit_test(unknown_job_is_404_job_not_found),
        cmocka_unit_test(invalid_config_is_400_invalid_config),
        cmocka_unit_test(invalid_jobs_are_400_invalid_job),
        cmocka_unit_test(bad_batches_write_none_of_their_jobs),
        cmocka_unit_test(bad_claims_are_400_invalid_lease),
        cmocka_unit_test(bad_lease_writes_are_400_invalid_lease),
        cmocka_unit_test(bad_settlements_are_400_and_settle_nothing),
        cmocka_unit_test(bad_list_parameters_are_400_invalid_parameter),
        cmocka_unit_test(wrong_content_type_is_415),
        cmocka_unit_test(malformed_json_is_400_invalid_json),
        cmocka_unit_test(retry_of_a_job_not_failed_is_409_job_not_failed),
        cmocka_unit_test(cancel_of_a_finished_job_is_409_job_terminal),
        cmocka_unit_test(bad_key_limits_are_refused),
        /* last: a value accepted here leaves a job that could upset the snapshots of others */
        cmocka_unit_test(run_at_that_is_not_rfc3339_is_400_invalid_job),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
