/* Cross-process wake-ups (LISTEN/NOTIFY): two rowlock processes A and B on one database, each
 * re-checking its long-polls only every 5 s. A claim (wait_seconds 10) and a log read (wait=10)
 * waiting on A answer within 200 ms of an enqueue or a produce through B. The control runs the
 * same claim on two processes started with ROWLOCK_NOTIFY=false and must wait for the re-check
 * (over a second); ROWLOCK_TEST_NOTIFY=false starts A and B that way too, and then the first three
 * cases fail (a ledger transaction waiting on A for its input, written through B, is the third).
 * One job wakes one of three claimers on A, not all. A listener whose backend is terminated
 * reconnects (rowlock_notify_connects_total counts it) and wakes again; a process whose listener
 * cannot connect serves, says "degraded" in /readyz and rowlock_notify_listener_up 0, and its
 * long-polls fall back to the re-check. An enqueue after a quiet spell sends its notification
 * inside its own transaction (rowlock_notify_inline_total), which the other process hears and its
 * own listener ignores; with ROWLOCK_NOTIFY_INLINE=false (process C) the listener sends it after
 * the commit; and a burst of concurrent enqueues sends most of its notifications in the
 * listener's batches, not each inside its writer's transaction (whose COMMIT would then queue
 * behind the others' NOTIFY lock): at most one a quiet spell, of 250 ms in that case. Names of many
 * resources in one batch travel packed, a line each, in few NOTIFYs. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <libpq-fe.h>

#include "harness_svc.h"

#define PROMPT_S 0.2 /* the answer a wake gives, far below the 5 s re-check */

static struct th_service a, b, off_a, off_b, batched_c;
static struct th_service deg; /* the degraded one: stopped by teardown too when its case fails */

static int setup(void **state)
{
    const char *notify = getenv("ROWLOCK_TEST_NOTIFY"); /* "false": the negative control */
    char setting[64];
    snprintf(setting, sizeof(setting), "ROWLOCK_NOTIFY=%s", notify ? notify : "true");
    const char *env[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", setting, "ROWLOCK_NOTIFY_INLINE=true",
                         NULL};
    const char *off[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", "ROWLOCK_NOTIFY=false", NULL};
    if (th_svc_db("notify") != 0)
        return -1;
    if (th_service_start(&a, th_svc_dburl, env) != 0 ||
        th_service_start(&b, th_svc_dburl, env) != 0)
        return -1;
    if (th_service_start(&off_a, th_svc_dburl, off) != 0 ||
        th_service_start(&off_b, th_svc_dburl, off) != 0)
        return -1;
    const char *batched[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", setting,
                             "ROWLOCK_NOTIFY_INLINE=false", NULL};
    if (th_service_start(&batched_c, th_svc_dburl, batched) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    int r = th_service_stop(&a) | th_service_stop(&b);
    r |= th_service_stop(&off_a) | th_service_stop(&off_b) | th_service_stop(&batched_c);
    if (deg.pid > 0)
        th_service_stop(&deg);
    return r == 0 ? 0 : -1;
}

/* Waits up to timeout_s for series on port to reach at least v; returns the last value. */
static double await_metric(int port, const char *series, double v, double timeout_s)
{
    double got = -1, give_up = th_now() + timeout_s;
    while ((got = th_metric(port, series)) < v && th_now() < give_up)
        usleep(20000);
    return got;
}

static const char *readyz_wake_ups(int port)
{
    static char out[32];
    json_t *j = th_get_json(port, "/readyz");
    const char *w = json_string_value(json_object_get(j, "wake_ups"));
    snprintf(out, sizeof(out), "%s", w ? w : "(absent)");
    json_decref(j);
    return out;
}

struct long_poll {
    int port;
    long want; /* the long-poll's status; 0: 200 */
    const char *method, *path, *body;
    struct th_response r;
    double done_at;
    atomic_int done; /* set after done_at: read while the thread may still run */
};

static void *long_poll_main(void *arg)
{
    struct long_poll *p = arg;
    static const char *const ct[] = {"Content-Type: application/json", NULL};
    th_http(p->port, p->method, p->path, p->body ? ct : NULL, p->body,
            p->body ? strlen(p->body) : 0, &p->r);
    p->done_at = th_now();
    atomic_store(&p->done, 1);
    return NULL;
}

/* Starts p on its port, waits until it is suspended there, runs the write (method, path, body)
 * through writer_port and returns the seconds from the write's answer to the long-poll's. */
static double woken_after(struct long_poll *p, int writer_port, const char *method,
                          const char *path, const char *body)
{
    double waiting = th_metric(p->port, "rowlock_http_long_polls_waiting");
    pthread_t t;
    pthread_create(&t, NULL, long_poll_main, p);
    assert_true(await_metric(p->port, "rowlock_http_long_polls_waiting", waiting + 1, 5) >=
                waiting + 1);
    json_decref(th_call(writer_port, method, path, body, 201));
    double written = th_now();
    pthread_join(t, NULL);
    assert_int_equal(p->r.status, p->want ? p->want : 200);
    return p->done_at - written;
}

static double claim_latency(struct th_service *claimer, struct th_service *writer,
                            const char *queue)
{
    char path[128], claim[128];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_decref(th_call(writer->port, "PUT", path, "{}", 201));
    snprintf(claim, sizeof(claim), "/queues/%s/leases", queue);
    struct long_poll p = {.port = claimer->port,
                          .method = "POST",
                          .path = claim,
                          .body = "{\"owner\":\"w\",\"wait_seconds\":10}"};
    snprintf(path, sizeof(path), "/queues/%s/jobs", queue);
    double latency = woken_after(&p, writer->port, "POST", path, "{\"payload\":{\"n\":1}}");
    assert_int_equal(json_array_size(json_object_get(p.r.json, "leases")), 1);
    th_response_free(&p.r);
    fprintf(stderr, "claim on :%d answered %.4f s after the enqueue on :%d\n", claimer->port,
            latency, writer->port);
    return latency;
}

static void claim_on_a_is_woken_by_an_enqueue_on_b(void **state)
{
    double own = th_metric(b.port, "rowlock_notify_received_total");
    assert_true(claim_latency(&a, &b, "cross") < PROMPT_S);
    assert_true(th_metric(a.port, "rowlock_notify_received_total") >= 1);
    /* a quiet process: the enqueue's own transaction sent it, and B's listener ignored it */
    assert_true(th_metric(b.port, "rowlock_notify_inline_total") >= 1);
    usleep(100000);
    assert_true(th_metric(b.port, "rowlock_notify_received_total") == own);
}

static void with_inline_off_the_listener_sends_it(void **state)
{
    double sent = th_metric(batched_c.port, "rowlock_notify_sent_total");
    assert_true(claim_latency(&a, &batched_c, "cross-batched") < PROMPT_S);
    assert_true(th_metric(batched_c.port, "rowlock_notify_sent_total") >= sent + 1);
    assert_true(th_metric(batched_c.port, "rowlock_notify_inline_total") == 0);
}

#define BURST_THREADS  8
#define BURST_EACH     40
#define BURST_SPELL_MS 250 /* the burst's process coalesces for this long */

static void *burst_main(void *arg)
{
    const struct th_service *svc = arg;
    for (int i = 0; i < BURST_EACH; i++)
        json_decref(th_call(svc->port, "POST", "/queues/burst/jobs", "{\"payload\":{}}", 201));
    return NULL;
}

/* A process sends a NOTIFY at most once a quiet spell, inline or batched: so a burst of N
 * enqueues lasting T seconds sends at most T / spell + 1 inside its writers' transactions and
 * the rest in the listener's batches. The spell is 250 ms here, not the default 2 ms, so that
 * the bound holds however slowly a loaded machine (or a sanitizer) runs the burst: with 2 ms, a
 * burst slowed to 6 ms an enqueue would rightly send every one inline. */
static void a_burst_of_enqueues_is_announced_in_batches(void **state)
{
    struct th_service burst;
    char spell[64];
    snprintf(spell, sizeof(spell), "ROWLOCK_NOTIFY_COALESCE_MS=%d", BURST_SPELL_MS);
    const char *env[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", "ROWLOCK_NOTIFY_INLINE=true", spell,
                         NULL};
    assert_int_equal(th_service_start(&burst, th_svc_dburl, env), 0);
    assert_true(await_metric(burst.port, "rowlock_notify_listener_up", 1, 5) == 1);
    json_decref(th_call(burst.port, "PUT", "/queues/burst", "{}", 201));
    usleep(BURST_SPELL_MS * 1200); /* the PUT's spell over */
    double inl = th_metric(burst.port, "rowlock_notify_inline_total");
    double sent = th_metric(burst.port, "rowlock_notify_sent_total");
    pthread_t t[BURST_THREADS];
    double started = th_now();
    for (int i = 0; i < BURST_THREADS; i++)
        pthread_create(&t[i], NULL, burst_main, &burst);
    for (int i = 0; i < BURST_THREADS; i++)
        pthread_join(t[i], NULL);
    double took = th_now() - started;
    double inlined = th_metric(burst.port, "rowlock_notify_inline_total") - inl;
    double batched = await_metric(burst.port, "rowlock_notify_sent_total", sent + 1, 2) - sent;
    fprintf(stderr,
            "%d enqueues in %.2f s: %.0f notified inside their transaction, %.0f in batches\n",
            BURST_THREADS * BURST_EACH, took, inlined, batched);
    assert_int_equal(th_service_stop(&burst), 0);
    assert_true(inlined >= 1); /* the first after a quiet spell */
    assert_true(inlined <= took * 1000 / BURST_SPELL_MS + 1);
    assert_true(inlined < BURST_THREADS * BURST_EACH / 2);
    assert_true(batched >= 1);
}

/* Writes to many resources in one batch travel packed, one line per name, in few NOTIFYs:
 * PostgreSQL queues and delivers each NOTIFY to every listener. A process coalescing for 1 s
 * enqueues into 40 queues; a session LISTENing beside the processes sees every queue's line once
 * but far fewer NOTIFYs than names (one a name before packing: 40), and process A, which
 * parses the lines, receives all 40 and wakes a claim waiting on the last queue. */
#define PACKED_QUEUES 40

static void many_names_travel_packed_in_few_notifies(void **state)
{
    struct th_service packer;
    const char *env[] = {"ROWLOCK_POLL_INTERVAL_MS=5000", "ROWLOCK_NOTIFY_COALESCE_MS=1000",
                         "ROWLOCK_NOTIFY_INLINE=false", NULL};
    assert_int_equal(th_service_start(&packer, th_svc_dburl, env), 0);
    PGconn *watch = PQconnectdb(th_svc_dburl);
    assert_int_equal(PQstatus(watch), CONNECTION_OK);
    PGresult *r = PQexec(watch, "LISTEN rowlock_wake");
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    char path[64];
    for (int i = 0; i < PACKED_QUEUES; i++) {
        snprintf(path, sizeof(path), "/queues/pack-%d", i);
        json_decref(th_call(packer.port, "PUT", path, "{}", 201));
    }
    assert_true(await_metric(packer.port, "rowlock_notify_listener_up", 1, 5) == 1);
    usleep(1200000); /* past the coalescing window: the PUTs announce nothing, but be sure */
    double received = th_metric(a.port, "rowlock_notify_received_total");
    struct long_poll p = {.port = a.port,
                          .method = "POST",
                          .path = "/queues/pack-39/leases",
                          .body = "{\"owner\":\"w\",\"wait_seconds\":10}"};
    pthread_t t;
    double waiting = th_metric(a.port, "rowlock_http_long_polls_waiting");
    pthread_create(&t, NULL, long_poll_main, &p);
    assert_true(await_metric(a.port, "rowlock_http_long_polls_waiting", waiting + 1, 5) >=
                waiting + 1);
    for (int i = 0; i < PACKED_QUEUES; i++) {
        snprintf(path, sizeof(path), "/queues/pack-%d/jobs", i);
        json_decref(th_call(packer.port, "POST", path, "{\"payload\":1}", 201));
    }
    double written = th_now();
    pthread_join(t, NULL);
    assert_int_equal(p.r.status, 200);
    assert_int_equal(json_array_size(json_object_get(p.r.json, "leases")), 1);
    th_response_free(&p.r);
    /* what the LISTENing session saw of the packer's queues */
    int notifies = 0, lines = 0;
    double give_up = th_now() + 5;
    while (lines < PACKED_QUEUES && th_now() < give_up) {
        PQconsumeInput(watch);
        PGnotify *n;
        while ((n = PQnotifies(watch)) != NULL) {
            int mine = 0;
            for (const char *q = strstr(n->extra, " queue:pack-"); q != NULL;
                 q = strstr(q + 1, " queue:pack-"))
                mine++;
            notifies += mine > 0;
            lines += mine;
            PQfreemem(n);
        }
        usleep(20000);
    }
    PQfinish(watch);
    double got = await_metric(a.port, "rowlock_notify_received_total", received + PACKED_QUEUES, 5);
    fprintf(stderr,
            "packed: %d names in %d NOTIFYs; A received %.0f, its claim answered %.3f s after "
            "the last enqueue\n",
            lines, notifies, got - received, p.done_at - written);
    assert_int_equal(th_service_stop(&packer), 0);
    assert_int_equal(lines, PACKED_QUEUES);
    assert_true(notifies >= 1 && notifies <= PACKED_QUEUES / 4);
    assert_true(got >= received + PACKED_QUEUES);
    assert_true(p.done_at - written < 2.5); /* A re-checks every 5 s */
}

static void log_read_on_a_is_woken_by_a_produce_on_b(void **state)
{
    json_decref(th_call(b.port, "PUT", "/topics/crosslog", "{}", 201));
    struct long_poll p = {
        .port = a.port, .method = "GET", .path = "/topics/crosslog/messages?after=0&wait=10"};
    double latency =
        woken_after(&p, b.port, "POST", "/topics/crosslog/messages", "{\"key\":\"k\",\"value\":1}");
    fprintf(stderr, "log read on A answered %.4f s after the produce on B\n", latency);
    assert_int_equal(json_array_size(json_object_get(p.r.json, "messages")), 1);
    th_response_free(&p.r);
    assert_true(latency < PROMPT_S);
}

/* A ledger transaction waiting on A for its input's version (wait_seconds) is applied at once
 * when the transaction that writes that version commits through B. */
static void ledger_wait_on_a_is_woken_by_a_transaction_on_b(void **state)
{
    json_decref(th_call(b.port, "PUT", "/ledgers/crossledger", "{}", 201));
    struct long_poll p = {
        .port = a.port,
        .want = 201,
        .method = "POST",
        .path = "/ledgers/crossledger/transactions",
        .body = "{\"digest\":\"waiter\",\"inputs\":[{\"object_id\":\"gate\",\"version\":1}],"
                "\"writes\":[{\"object_id\":\"gate\",\"version\":2,\"type\":\"c\",\"data\":2}],"
                "\"wait_seconds\":10}"};
    double latency = woken_after(
        &p, b.port, "POST", "/ledgers/crossledger/transactions",
        "{\"digest\":\"gate\",\"writes\":[{\"object_id\":\"gate\",\"version\":1,\"type\":\"c\","
        "\"data\":1}]}");
    fprintf(stderr, "ledger transaction on A applied %.4f s after its input's on B\n", latency);
    th_response_free(&p.r);
    assert_true(latency < PROMPT_S);
}

/* One job enqueued through B wakes one of the three claims waiting on A, not all of them (the
 * notification carries the number of jobs, so a crowd of claimers is not stampeded); two more
 * jobs wake the other two. */
static void an_enqueue_wakes_as_many_claimers_as_jobs(void **state)
{
    json_decref(th_call(b.port, "PUT", "/queues/few", "{}", 201));
    double waiting = th_metric(a.port, "rowlock_http_long_polls_waiting");
    /* static: a failed assertion leaves the threads running, writing into these */
    static struct long_poll p[3];
    static pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (struct long_poll){.port = a.port,
                                  .method = "POST",
                                  .path = "/queues/few/leases",
                                  .body = "{\"owner\":\"w\",\"wait_seconds\":10}"};
        pthread_create(&t[i], NULL, long_poll_main, &p[i]);
    }
    assert_true(await_metric(a.port, "rowlock_http_long_polls_waiting", waiting + 3, 5) >=
                waiting + 3);
    double woken = th_metric(a.port, "rowlock_long_poll_wakes_total");
    double started = th_now();
    json_decref(th_call(b.port, "POST", "/queues/few/jobs", "{\"payload\":1}", 201));
    usleep(300000); /* far below the 2.5 s or more to the first re-check */
    int answered = 0;
    for (int i = 0; i < 3; i++)
        answered += atomic_load(&p[i].done);
    assert_int_equal(answered, 1);
    assert_true(th_metric(a.port, "rowlock_long_poll_wakes_total") == woken + 1);
    assert_true(th_metric(a.port, "rowlock_http_long_polls_waiting") == waiting + 2);
    json_decref(th_call(b.port, "POST", "/queues/few/jobs",
                        "{\"jobs\":[{\"payload\":2},{\"payload\":3}]}", 201));
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(p[i].r.status, 200);
        assert_int_equal(json_array_size(json_object_get(p[i].r.json, "leases")), 1);
        th_response_free(&p[i].r);
    }
    assert_true(th_now() - started < 1.0);
}

/* The control: without notifications only the re-check (2.5 s or more away) finds the job. */
static void without_notify_the_claim_waits_for_the_recheck(void **state)
{
    assert_string_equal(readyz_wake_ups(off_a.port), "off");
    double latency = claim_latency(&off_a, &off_b, "control");
    assert_true(latency > 1.0);
    assert_true(th_metric(off_a.port, "rowlock_long_poll_rechecks_total") >= 1);
}

/* The listeners' backends are terminated (as a failover or an idle-session killer would): each
 * process reconnects with backoff and the next write wakes across processes again. */
static void a_terminated_listener_reconnects_and_wakes_again(void **state)
{
    PGconn *c = th_pg(th_svc_dburl);
    PQclear(th_sql(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                      "WHERE application_name = 'rowlock-listener' "
                      "AND datname = current_database()"));
    PQfinish(c);
    assert_true(await_metric(a.port, "rowlock_notify_connects_total", 2, 10) >= 2);
    assert_true(await_metric(b.port, "rowlock_notify_connects_total", 2, 10) >= 2);
    assert_true(await_metric(a.port, "rowlock_notify_listener_up", 1, 10) == 1);
    assert_true(await_metric(b.port, "rowlock_notify_listener_up", 1, 10) == 1);
    assert_string_equal(readyz_wake_ups(a.port), "cross_process");
    assert_true(claim_latency(&a, &b, "again") < PROMPT_S);
}

/* A listener that cannot connect: the process serves, says so, and falls back to re-checks. */
static void an_unreachable_listener_degrades_but_never_strands(void **state)
{
    const char *env[] = {"ROWLOCK_POLL_INTERVAL_MS=300",
                         "ROWLOCK_NOTIFY_DATABASE_URL=postgresql://127.0.0.1:1/none", NULL};
    assert_int_equal(th_service_start(&deg, th_svc_dburl, env), 0);
    assert_true(await_metric(deg.port, "rowlock_notify_failures_total", 1, 10) >= 1);
    assert_true(th_metric(deg.port, "rowlock_notify_listener_up") == 0);
    assert_true(th_metric(deg.port, "rowlock_notify_enabled") == 1);
    assert_string_equal(readyz_wake_ups(deg.port), "degraded");
    assert_true(th_service_logged(&deg, "cross-process wake-ups degraded"));
    /* it serves writes (their announcement is dropped, counted) and long-polls */
    json_decref(th_call(deg.port, "PUT", "/queues/degraded", "{}", 201));
    json_decref(th_call(deg.port, "POST", "/queues/degraded/jobs", "{\"payload\":1}", 201));
    assert_true(th_metric(deg.port, "rowlock_notify_dropped_total") >= 1);
    json_t *got = th_call(deg.port, "POST", "/queues/degraded/leases", "{\"owner\":\"w\"}", 200);
    assert_int_equal(json_array_size(json_object_get(got, "leases")), 1);
    json_decref(got);
    /* a write through another process reaches its waiter at the re-check: late, not lost */
    double latency = claim_latency(&deg, &b, "fallback");
    assert_true(latency < 2.0);
    assert_true(th_metric(deg.port, "rowlock_long_poll_rechecks_total") >= 1);
    int stopped = th_service_stop(&deg);
    deg.pid = 0;
    assert_int_equal(stopped, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(claim_on_a_is_woken_by_an_enqueue_on_b),
        cmocka_unit_test(with_inline_off_the_listener_sends_it),
        cmocka_unit_test(a_burst_of_enqueues_is_announced_in_batches),
        cmocka_unit_test(many_names_travel_packed_in_few_notifies),
        cmocka_unit_test(log_read_on_a_is_woken_by_a_produce_on_b),
        cmocka_unit_test(ledger_wait_on_a_is_woken_by_a_transaction_on_b),
        cmocka_unit_test(an_enqueue_wakes_as_many_claimers_as_jobs),
        cmocka_unit_test(without_notify_the_claim_waits_for_the_recheck),
        cmocka_unit_test(a_terminated_listener_reconnects_and_wakes_again),
        cmocka_unit_test(an_unreachable_listener_degrades_but_never_strands),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
