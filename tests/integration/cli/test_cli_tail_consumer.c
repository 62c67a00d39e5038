/* rowlock-cli tail --consumer against a real rowlock while messages keep arriving: a reader
 * killed with SIGKILL mid-stream and another started on the same consumer, then two readers
 * sharing one consumer at once. Every produced message is printed by some reader (at least
 * once: a page printed but not yet committed when its reader died comes again), and the
 * consumer's committed offset, sampled after every produce, never moves backwards, since every
 * commit is a compare-and-set on the offset the reader started its page from. And produce
 * with a producer lands a file once however often it is run. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define MESSAGES 500

static char dir[256];
static long long offsets[MESSAGES];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/rowlock-cli-tail-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    return th_svc_start("clitail", NULL);
}

static int teardown(void **state)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return -1;
    return th_svc_teardown(state);
}

/* Starts `rowlock-cli tail TOPIC --consumer NAME --follow`, stdout to dir/<out>. */
static pid_t reader_start(const char *topic, const char *consumer, const char *out)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char url[64], path[512], errpath[512];
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", th_svc.port);
        snprintf(path, sizeof(path), "%s/%s", dir, out);
        snprintf(errpath, sizeof(errpath), "%s/%s.err", dir, out);
        setenv("ROWLOCK_URL", url, 1);
        if (!freopen(path, "w", stdout) || !freopen(errpath, "w", stderr))
            _exit(99);
        execl(ROWLOCK_CLI_BINARY, "rowlock-cli", "tail", topic, "--consumer", consumer, "--follow",
              "--from", "beginning", (char *)NULL);
        _exit(98);
    }
    return pid;
}

static void reader_stop(pid_t pid, int sig)
{
    int status;
    kill(pid, sig);
    waitpid(pid, &status, 0);
}

/* The consumer's committed offset, or -1 before it exists. */
static long long committed(const char *topic, const char *consumer)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s", topic, consumer);
    assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
    long long off = r.status == 200 ? json_integer_value(json_object_get(r.json, "offset")) : -1;
    assert_true(r.status == 200 || r.status == 404);
    th_response_free(&r);
    return off;
}

/* Produces message i to topic, keeps its offset, and checks the committed offset has not moved
 * backwards since *last. */
static void produce_and_sample(const char *topic, const char *consumer, int i, long long *last)
{
    char path[128], body[128];
    snprintf(path, sizeof(path), "/topics/%s/messages", topic);
    snprintf(body, sizeof(body), "{\"key\": \"k%d\", \"value\": %d}", i % 17, i);
    json_t *ans = th_call(th_svc.port, "POST", path, body, 201);
    offsets[i] = json_integer_value(json_object_get(ans, "offset"));
    json_decref(ans);
    long long now = committed(topic, consumer);
    if (now < *last)
        fprintf(stderr, "committed offset moved back from %lld to %lld\n", *last, now);
    assert_true(now >= *last);
    *last = now;
    usleep(2000);
}

/* Waits up to 15 s for the consumer to commit the last offset, sampling as it goes. */
static void await_committed(const char *topic, const char *consumer, long long *last)
{
    for (int i = 0; i < 1500 && *last < offsets[MESSAGES - 1]; i++) {
        long long now = committed(topic, consumer);
        assert_true(now >= *last);
        *last = now;
        usleep(10000);
    }
    assert_int_equal(*last, offsets[MESSAGES - 1]);
}

/* Marks in seen[] every offset dir/<out> printed; returns the lines read. */
static int printed(const char *out, char *seen)
{
    char path[512], line[4096];
    int n = 0;
    snprintf(path, sizeof(path), "%s/%s", dir, out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        json_t *m = json_loads(line, 0, NULL);
        long long off = json_integer_value(json_object_get(m, "offset"));
        for (int i = 0; i < MESSAGES; i++)
            if (offsets[i] == off)
                seen[i] = 1;
        json_decref(m);
        n++;
    }
    fclose(f);
    return n;
}

static void assert_all_seen(const char *seen)
{
    int missing = 0;
    for (int i = 0; i < MESSAGES; i++)
        if (!seen[i]) {
            fprintf(stderr, "message %d (offset %lld) was never printed\n", i, offsets[i]);
            missing++;
        }
    assert_int_equal(missing, 0);
}

static void reader_killed_and_restarted(void **state)
{
    static char seen[MESSAGES];
    long long last = -1;
    json_decref(th_call(th_svc.port, "PUT", "/topics/t1", "{}", 201));
    pid_t a = reader_start("t1", "g", "a.out"), b = 0;
    for (int i = 0; i < MESSAGES; i++) {
        if (i == MESSAGES * 2 / 5)
            reader_stop(a, SIGKILL); /* mid-stream, maybe between a print and its commit */
        if (i == MESSAGES / 2)
            b = reader_start("t1", "g", "b.out");
        produce_and_sample("t1", "g", i, &last);
    }
    await_committed("t1", "g", &last);
    reader_stop(b, SIGTERM);
    int na = printed("a.out", seen), nb = printed("b.out", seen);
    fprintf(stderr, "reader a printed %d, reader b %d of %d\n", na, nb, MESSAGES);
    assert_true(na > 0 && nb > 0);
    assert_all_seen(seen);
}

static void two_readers_share_a_consumer(void **state)
{
    static char seen[MESSAGES];
    long long last = -1;
    json_decref(th_call(th_svc.port, "PUT", "/topics/t2", "{}", 201));
    pid_t c = reader_start("t2", "h", "c.out"), d = reader_start("t2", "h", "d.out");
    for (int i = 0; i < MESSAGES; i++)
        produce_and_sample("t2", "h", i, &last);
    await_committed("t2", "h", &last);
    reader_stop(c, SIGTERM);
    reader_stop(d, SIGTERM);
    int nc = printed("c.out", seen), nd = printed("d.out", seen);
    fprintf(stderr, "readers printed %d and %d of %d\n", nc, nd, MESSAGES);
    assert_all_seen(seen);
}

/* rowlock-cli produce with a producer: each line's sequence is its line number, so producing
 * the same file again writes nothing new (every line a duplicate) and the log holds it once. */
static void produce_rerun_lands_once(void **state)
{
    char path[512], cmd[1024];
    json_decref(th_call(th_svc.port, "PUT", "/topics/t3", "{}", 201));
    json_decref(th_call(th_svc.port, "PUT", "/topics/t3/producers/loader", "{}", 201));
    snprintf(path, sizeof(path), "%s/in.ndjson", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 1200; i++)
        fprintf(f, "{\"key\": \"k%d\", \"value\": %d}\n", i % 50, i);
    fclose(f);
    for (int run = 0; run < 2; run++) {
        char out[256] = "";
        snprintf(cmd, sizeof(cmd),
                 "ROWLOCK_URL=http://127.0.0.1:%d '%s' produce t3 --producer loader --batch 500 "
                 "< '%s'",
                 th_svc.port, ROWLOCK_CLI_BINARY, path);
        assert_int_equal(th_run(cmd, out, sizeof(out)), 0);
        json_t *counts = json_loads(out, 0, NULL);
        fprintf(stderr, "run %d: %s", run + 1, out);
        assert_int_equal(json_integer_value(json_object_get(counts, "produced")),
                         run == 0 ? 1200 : 0);
        assert_int_equal(json_integer_value(json_object_get(counts, "duplicates")),
                         run == 0 ? 0 : 1200);
        json_decref(counts);
    }
    json_t *topic = th_get_json(th_svc.port, "/topics/t3");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(topic, "counts"), "messages")), 1200);
    json_decref(topic);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reader_killed_and_restarted),
        cmocka_unit_test(two_readers_share_a_consumer),
        cmocka_unit_test(produce_rerun_lands_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
