/* Per-token limits of a running rowlock with a tokens file: a token past its rate and burst is
 * answered 429 rate_limited with Retry-After and nothing done, and passes again once its bucket
 * refilled, while another token is unaffected; a token at its long-poll cap is answered 429
 * too_many_long_polls for one more waiting claim until the first returns; /metrics counts the
 * refusals per token name; a SIGHUP reload applies new limits; with no tokens file the settings
 * hold every request together; bad limits refuse the tokens file. Timing is asserted as bounds
 * that a slow machine only loosens (a token bucket's property), never as exact instants. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define DEPLOYER "deployer-token-0123456789"
#define VIEWER   "viewer-token-01234567890"
#define WORKER   "worker-token-01234567890"

static char tokens_path[] = "/tmp/rowlock-test-limit-tokens-XXXXXX";

static void write_tokens(const char *text)
{
    FILE *f = fopen(tokens_path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    int fd = mkstemp(tokens_path);
    if (fd < 0)
        return -1;
    close(fd);
    return th_svc_db("token_limits");
}

static int teardown(void **state)
{
    unlink(tokens_path);
    return 0;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* method path under token (NULL: none) with body (JSON text, NULL: none); r is the caller's. */
static void send_as(int port, const char *token, const char *method, const char *path,
                    const char *body, struct th_response *r)
{
    char auth[128];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    const char *headers[] = {"Content-Type: application/json", token ? auth : NULL, NULL};
    memset(r, 0, sizeof(*r));
    assert_int_equal(th_http(port, method, path, headers, body, body ? strlen(body) : 0, r), 0);
}

/* The status of method path under token; the answer is dropped. */
static long status_as(int port, const char *token, const char *method, const char *path,
                      const char *body)
{
    struct th_response r;
    send_as(port, token, method, path, body, &r);
    long status = r.status;
    th_response_free(&r);
    return status;
}

/* Asserts a 429 problem of code with a Retry-After of whole seconds, at least 1; returns it. */
static long assert_limited(const struct th_response *r, const char *code)
{
    th_assert_problem(r, 429, code);
    char after[32];
    assert_int_equal(th_header(r, "Retry-After", after, sizeof(after)), 0);
    char *end = NULL;
    long s = strtol(after, &end, 10);
    assert_true(end != after && (*end == '\0' || *end == '\r'));
    assert_true(s >= 1);
    return s;
}

static double limited_total(int port, const char *token, const char *reason)
{
    char series[160];
    snprintf(series, sizeof(series), "rowlock_http_limited_total{token=\"%s\",reason=\"%s\"}",
             token, reason);
    return th_metric(port, series);
}

static struct th_service start_with_tokens(const char *text, const char *extra)
{
    write_tokens(text);
    struct th_service svc;
    char env_tokens[256];
    snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
    const char *env[] = {env_tokens, extra, NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    return svc;
}

/* Creates topics lim-0, lim-1, ... as DEPLOYER (rate=2 burst=2) until one is refused: the first
 * two pass (the bucket starts full), and no more pass than the burst plus what the rate refilled
 * meanwhile. The refused one created nothing, VIEWER (a bucket of its own, burst=20) is not held
 * back, and after its Retry-After (and a second more) DEPLOYER passes again. */
static void rate_and_burst_then_refill(void **state)
{
    struct th_service svc =
        start_with_tokens(DEPLOYER " admin name=deployer rate=2 burst=2\n" VIEWER
                                   " read name=viewer rate=1 burst=20\n",
                          NULL);
    struct th_response r = {0};
    char path[64];
    int passed = 0;
    double start = th_now();
    for (; passed < 20; passed++) {
        snprintf(path, sizeof(path), "/topics/lim-%d", passed);
        send_as(svc.port, DEPLOYER, "PUT", path, "{}", &r);
        if (r.status != 201)
            break;
        th_response_free(&r);
    }
    double elapsed = th_now() - start;
    assert_true(passed >= 2);
    assert_true((double)passed <= 2.0 + 2.0 * elapsed + 1e-9);
    long after = assert_limited(&r, "rate_limited");
    th_response_free(&r);

    /* nothing done: the refused topic does not exist; the other token is not limited */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(status_as(svc.port, VIEWER, "GET", path, NULL), 404);
        assert_int_equal(status_as(svc.port, VIEWER, "GET", "/topics/lim-0", NULL), 200);
    }
    assert_int_equal(th_svc_sql_intf("SELECT count(*) FROM rowlock.topics WHERE name = '%s'",
                                     path + strlen("/topics/")),
                     0);
    assert_true(limited_total(svc.port, "deployer", "rate") == 1.0);
    assert_true(limited_total(svc.port, "viewer", "rate") == 0.0); /* never refused */

    nap_ms(after * 1000 + 1000);
    assert_int_equal(status_as(svc.port, DEPLOYER, "PUT", path, "{}"), 201);
    assert_int_equal(th_service_stop(&svc), 0);
}

struct claim {
    int port;
    const char *token;
    const char *body;
    long status;
    double took;
};

static void *claim_run(void *arg)
{
    struct claim *c = arg;
    double start = th_now();
    c->status = status_as(c->port, c->token, "POST", "/queues/lp/leases", c->body);
    c->took = th_now() - start;
    return NULL;
}

/* WORKER may have one long-poll: while its first claim waits, another request that asks to
 * wait (a claim, a log read, a ledger transaction) is refused, counted and does nothing, a
 * claim that does not wait is served, and once the first returned a waiting claim is served
 * again. */
static void long_poll_cap(void **state)
{
    struct th_service svc = start_with_tokens(
        DEPLOYER " admin name=deployer\n" WORKER " read,write,work name=worker long_polls=1\n",
        NULL);
    assert_int_equal(status_as(svc.port, DEPLOYER, "PUT", "/queues/lp", "{}"), 201);
    assert_int_equal(status_as(svc.port, DEPLOYER, "PUT", "/topics/lpt", "{}"), 201);
    assert_int_equal(status_as(svc.port, DEPLOYER, "PUT", "/ledgers/lpl", "{}"), 201);
    struct claim first = {svc.port, WORKER, "{\"owner\":\"a\",\"wait_seconds\":4}", 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, claim_run, &first), 0);
    for (int i = 0; i < 500 && th_metric(svc.port, "rowlock_http_long_polls_waiting") < 1; i++)
        nap_ms(10);
    assert_true(th_metric(svc.port, "rowlock_http_long_polls_waiting") >= 1);

    struct th_response r;
    send_as(svc.port, WORKER, "POST", "/queues/lp/leases", "{\"owner\":\"b\",\"wait_seconds\":2}",
            &r);
    assert_limited(&r, "too_many_long_polls");
    th_response_free(&r);
    send_as(svc.port, WORKER, "GET", "/topics/lpt/messages?wait=2", NULL, &r);
    assert_limited(&r, "too_many_long_polls");
    th_response_free(&r);
    send_as(svc.port, WORKER, "POST", "/ledgers/lpl/transactions",
            "{\"digest\":\"d1\",\"writes\":[{\"object_id\":\"o\",\"type\":\"t\",\"version\":1,"
            "\"value\":{}}],\"wait_seconds\":2}",
            &r);
    assert_limited(&r, "too_many_long_polls");
    th_response_free(&r);
    assert_int_equal(status_as(svc.port, WORKER, "GET", "/ledgers/lpl/transactions/d1", NULL), 404);
    assert_int_equal(status_as(svc.port, WORKER, "POST", "/queues/lp/leases", "{\"owner\":\"b\"}"),
                     200);
    assert_true(limited_total(svc.port, "worker", "long_polls") == 3.0);

    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(first.status, 200);
    assert_true(first.took >= 3.0); /* it did wait: the refusals were the others' */
    struct claim again = {svc.port, WORKER, "{\"owner\":\"b\",\"wait_seconds\":1}", 0, 0};
    claim_run(&again);
    assert_int_equal(again.status, 200);
    assert_true(again.took >= 0.5);
    assert_true(limited_total(svc.port, "worker", "long_polls") == 3.0);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* Quick GETs of /topics under token (NULL: none) until the first refusal, at most n. */
struct run {
    int passed;
    int refused; /* the run ended on a 429 rate_limited */
};

static struct run get_until_refused(int port, const char *token, int n, long rate, long burst)
{
    struct run run = {0, 0};
    double start = th_now();
    struct th_response r = {0};
    for (; run.passed < n; run.passed++) {
        send_as(port, token, "GET", "/topics", NULL, &r);
        if (r.status != 200)
            break;
        th_response_free(&r);
    }
    double elapsed = th_now() - start;
    if (run.passed < n) {
        assert_limited(&r, "rate_limited");
        run.refused = 1;
    }
    th_response_free(&r);
    /* a token bucket's bound: what it held, and what it refilled meanwhile */
    if (rate > 0)
        assert_true((double)run.passed <= (double)burst + (double)rate * elapsed + 1e-9);
    return run;
}

/* SIGHUP reads the tokens file again: its new limits apply at once (a limit lifted, another
 * set); a file with a bad limit is refused and the limits in force stay. */
static void reload_applies_new_limits(void **state)
{
    struct th_service svc = start_with_tokens(
        DEPLOYER " admin name=deployer rate=1 burst=1\n" VIEWER " read name=viewer\n", NULL);
    struct run run = get_until_refused(svc.port, DEPLOYER, 30, 1, 1);
    assert_true(run.refused && run.passed >= 1);
    assert_false(get_until_refused(svc.port, VIEWER, 30, 0, 0).refused);

    write_tokens(DEPLOYER " admin name=deployer rate=1000 burst=1000\n" VIEWER
                          " read name=viewer rate=1 burst=1\n");
    th_service_signal(&svc, SIGHUP);
    for (int i = 0; i < 500 && !th_service_logged(&svc, "\"outcome\":\"done\""); i++)
        nap_ms(10);
    assert_true(th_service_logged(&svc, "\"outcome\":\"done\""));
    nap_ms(100); /* a thousand a second refills the emptied bucket in a millisecond */
    assert_false(get_until_refused(svc.port, DEPLOYER, 30, 1000, 1000).refused);
    run = get_until_refused(svc.port, VIEWER, 30, 1, 1);
    assert_true(run.refused && run.passed >= 1);
    assert_true(limited_total(svc.port, "viewer", "rate") == 1.0);

    /* a bad file is refused: the viewer keeps rate=1, far below 30 requests at once */
    write_tokens(DEPLOYER " admin name=deployer rate=fast\n" VIEWER " read name=viewer\n");
    th_service_signal(&svc, SIGHUP);
    for (int i = 0; i < 500 && !th_service_logged(&svc, "\"outcome\":\"failed\""); i++)
        nap_ms(10);
    assert_true(th_service_logged(&svc, "line 1: bad rate="));
    assert_true(get_until_refused(svc.port, VIEWER, 30, 1, 1).refused);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* No tokens file: the settings hold all requests together under "_anonymous", and the ops
 * endpoints (open) are never limited. */
static void anonymous_bucket_without_tokens(void **state)
{
    struct th_service svc;
    const char *env[] = {"ROWLOCK_RATE_LIMIT=1", "ROWLOCK_RATE_BURST=2", NULL};
    assert_int_equal(th_service_start(&svc, th_svc_dburl, env), 0);
    struct run run = get_until_refused(svc.port, NULL, 30, 1, 2);
    assert_true(run.refused && run.passed >= 2);
    for (int i = 0; i < 10; i++)
        assert_int_equal(status_as(svc.port, NULL, "GET", "/healthz", NULL), 200);
    assert_true(limited_total(svc.port, "_anonymous", "rate") == 1.0);
    assert_int_equal(th_service_stop(&svc), 0);
}

/* A bad limit on a line stops the start (exit 2) with the line and the rule. */
static void bad_limits_refuse_the_file(void **state)
{
    static const struct {
        const char *word, *why;
    } bad[] = {
        {"rate=-1", "line 2: bad rate="},
        {"rate=1000001", "line 2: bad rate="},
        {"rate=", "line 2: bad rate="},
        {"rate=5x", "line 2: bad rate="},
        {"burst=0", "line 2: bad burst="},
        {"long_polls=many", "line 2: bad long_polls="},
        {"rate=1 rate=2", "line 2: a limit given twice"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), VIEWER " read\n" DEPLOYER " admin name=deployer %s\n",
                 bad[i].word);
        write_tokens(text);
        char env_tokens[256];
        snprintf(env_tokens, sizeof(env_tokens), "ROWLOCK_TOKENS_FILE=%s", tokens_path);
        const char *env[] = {env_tokens, NULL};
        struct th_service svc;
        assert_int_equal(th_service_start(&svc, th_svc_dburl, env), -1);
        assert_int_equal(svc.exit_code, 2);
        if (!th_service_logged(&svc, bad[i].why))
            fail_msg("%s: no \"%s\" logged", bad[i].word, bad[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rate_and_burst_then_refill),
        cmocka_unit_test(long_poll_cap),
        cmocka_unit_test(reload_applies_new_limits),
        cmocka_unit_test(anonymous_bucket_without_tokens),
        cmocka_unit_test(bad_limits_refuse_the_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
