/* rowlock-cli enqueue --jobs with a job graph from NDJSON: once a line has "ref", "parents" or
 * "on_parent_failure", every line goes in one request whatever --batch says, so a diamond lands
 * with the parents its refs name (checked through GET) from a file and from a pipe (read to
 * its end before sending), and each job's line, ref, id and state is printed. A cycle exits 2
 * with the service's reason, the line of the job it names and the cycle, and enqueues nothing,
 * not even a line without parents that --batch 1 would have sent alone; an unknown parent id
 * exits 2; so do a line that is not JSON in a graph and a graph of more jobs than one request
 * takes, with nothing sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"

static char out[65536], err[8192];

static int setup(void **state)
{
    (void)state;
    return th_svc_start("cligraph", NULL);
}

static int64_t jobs_of(const char *queue)
{
    return th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs j JOIN rowlock.queues q ON q.id = "
                           "j.queue_id WHERE q.name = '%s'",
                           queue);
}

static void make_queue(const char *queue)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s", queue);
    json_decref(th_svc_call("PUT", path, "{}", 201));
}

/* The ids of integers (a JSON array) as a string "[1,2]", to compare with want. */
static void assert_ids(const json_t *ids, const char *want)
{
    char *got = json_dumps(ids, JSON_COMPACT);
    assert_non_null(got);
    if (strcmp(got, want) != 0)
        fail_msg("ids %s, not %s", got, want);
    free(got);
}

/* The diamond a -> (b, c) -> d, a blank line among them; d runs even if a parent fails. */
static const char diamond[] =
    "{\"ref\":\"a\",\"payload\":{\"step\":\"a\"}}\n"
    "{\"ref\":\"b\",\"payload\":{\"step\":\"b\"},\"parents\":[\"a\"]}\n"
    "\n"
    "{\"ref\":\"c\",\"payload\":{\"step\":\"c\"},\"parents\":[\"a\"]}\n"
    "{\"ref\":\"d\",\"payload\":{\"step\":\"d\"},\"parents\":[\"b\",\"c\"],"
    "\"on_parent_failure\":\"run\"}\n";

/* Checks the printed jobs (lines of out before the summary) of the diamond: their lines, refs and
 * states in input order; their ids into ids[4]. */
static void printed_diamond(int64_t ids[4])
{
    static const char *const refs[] = {"a", "b", "c", "d"};
    static const int lines[] = {1, 2, 4, 5};
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    for (int i = 0; i < 4; i++, line = strtok_r(NULL, "\n", &save)) {
        assert_non_null(line);
        json_t *row = json_loads(line, 0, NULL);
        assert_non_null(row);
        assert_string_equal(json_string_value(json_object_get(row, "ref")), refs[i]);
        assert_int_equal(json_integer_value(json_object_get(row, "line")), lines[i]);
        assert_string_equal(json_string_value(json_object_get(row, "state")),
                            i == 0 ? "pending" : "waiting");
        ids[i] = json_integer_value(json_object_get(row, "id"));
        assert_true(ids[i] > 0);
        json_decref(row);
    }
    assert_non_null(line);
    assert_string_equal(line, "{\"created\":4,\"duplicates\":0,\"lines\":5}");
}

/* GET of job id of queue; the caller's. */
static json_t *job(const char *queue, int64_t id)
{
    char path[128];
    snprintf(path, sizeof(path), "/queues/%s/jobs/%lld", queue, (long long)id);
    return th_svc_call("GET", path, NULL, 200);
}

/* What the service holds of the diamond whose ids are id[4]: each job's parents and children by
 * id, how many parents each waits on, and d's policy. */
static void landed_diamond(const char *queue, const int64_t id[4])
{
    char want[128];
    json_t *a = job(queue, id[0]), *b = job(queue, id[1]), *c = job(queue, id[2]),
           *d = job(queue, id[3]);
    assert_ids(json_object_get(a, "parents"), "[]");
    snprintf(want, sizeof(want), "[%lld,%lld]", (long long)id[1], (long long)id[2]);
    assert_ids(json_object_get(a, "children"), want);
    snprintf(want, sizeof(want), "[%lld]", (long long)id[0]);
    assert_ids(json_object_get(b, "parents"), want);
    assert_ids(json_object_get(c, "parents"), want);
    snprintf(want, sizeof(want), "[%lld,%lld]", (long long)id[1], (long long)id[2]);
    assert_ids(json_object_get(d, "parents"), want);
    assert_int_equal(json_integer_value(json_object_get(d, "waiting_on")), 2);
    assert_string_equal(json_string_value(json_object_get(d, "state")), "waiting");
    assert_string_equal(json_string_value(json_object_get(d, "on_parent_failure")), "run");
    assert_string_equal(json_string_value(json_object_get(b, "on_parent_failure")), "cancel");
    assert_true(json_is_null(json_object_get(a, "on_parent_failure")));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
}

/* From a file on stdin, with --batch 2 (which would split the refs from their jobs). */
static void diamond_from_a_file_lands_with_its_parents(void **state)
{
    (void)state;
    int64_t ids[4];
    make_queue("gfile");
    assert_int_equal(cli_run(NULL, diamond, "enqueue gfile --jobs --batch 2", out, sizeof(out), err,
                             sizeof(err)),
                     0);
    printed_diamond(ids);
    landed_diamond("gfile", ids);
    assert_int_equal(jobs_of("gfile"), 4);
}

/* From a pipe (no seeking back: the input is kept in a temporary file while it is read). */
static void diamond_from_a_pipe_lands_with_its_parents(void **state)
{
    (void)state;
    char path[] = "/tmp/rowlock-cli-graph-XXXXXX", cmd[1024];
    int64_t ids[4];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, diamond, strlen(diamond)), (ssize_t)strlen(diamond));
    close(fd);
    make_queue("gpipe");
    snprintf(cmd, sizeof(cmd),
             "cat %s | env ROWLOCK_URL=http://127.0.0.1:%d '%s' enqueue gpipe --jobs --batch 1",
             path, th_svc.port, ROWLOCK_CLI_BINARY);
    int rc = th_run(cmd, out, sizeof(out));
    unlink(path);
    assert_int_equal(rc, 0);
    printed_diamond(ids);
    landed_diamond("gpipe", ids);
}

/* a waits for c, c for b, b for a; a line without parents before them, alone in its batch of 1
 * if the graph did not go as one request. */
static void cycle_exits_2_and_enqueues_nothing(void **state)
{
    (void)state;
    make_queue("gcycle");
    assert_int_equal(cli_run(NULL,
                             "{\"payload\":0}\n"
                             "\n"
                             "{\"ref\":\"a\",\"payload\":1,\"parents\":[\"c\"]}\n"
                             "{\"ref\":\"b\",\"payload\":2,\"parents\":[\"a\"]}\n"
                             "{\"ref\":\"c\",\"payload\":3,\"parents\":[\"b\"]}\n",
                             "enqueue gcycle --jobs --batch 1", out, sizeof(out), err, sizeof(err)),
                     2);
    assert_non_null(strstr(err, "dependency_cycle: job 1: ref \"a\" waits for itself"));
    assert_non_null(strstr(err, "job 1 is line 3 of the input"));
    assert_non_null(strstr(err, "[\"a\",\"c\",\"b\",\"a\"]"));
    assert_non_null(strstr(err, "nothing was written"));
    assert_int_equal(jobs_of("gcycle"), 0);
    /* a parent by id that names no job */
    assert_int_equal(cli_run(NULL, "{\"payload\":1,\"parents\":[987654321]}\n",
                             "enqueue gcycle --jobs", out, sizeof(out), err, sizeof(err)),
                     2);
    assert_non_null(strstr(err, "unknown_parent: parent 987654321 names no job"));
    assert_int_equal(jobs_of("gcycle"), 0);
    /* a line that is not JSON after a job with a ref: the line before it is not sent either */
    assert_int_equal(cli_run(NULL, "{\"ref\":\"a\",\"payload\":1}\nnot json\n",
                             "enqueue gcycle --jobs --batch 1", out, sizeof(out), err, sizeof(err)),
                     2);
    assert_non_null(strstr(err, "stopped at line 2: nothing was sent"));
    assert_int_equal(jobs_of("gcycle"), 0);
}

/* 1001 jobs, the last with a parent: more than one request takes, so none is sent. */
static void graph_past_the_batch_limit_sends_nothing(void **state)
{
    (void)state;
    static char input[32768];
    size_t n = 0;
    make_queue("gbig");
    for (int i = 0; i < 1000; i++)
        n += (size_t)snprintf(input + n, sizeof(input) - n, "{\"ref\":\"j%d\",\"payload\":%d}\n", i,
                              i);
    snprintf(input + n, sizeof(input) - n, "{\"payload\":0,\"parents\":[\"j0\"]}\n");
    assert_int_equal(
        cli_run(NULL, input, "enqueue gbig --jobs", out, sizeof(out), err, sizeof(err)), 2);
    assert_non_null(strstr(err, "all 1001 jobs must go in one request, and the service takes at "
                                "most 1000 jobs in one: nothing was sent"));
    assert_int_equal(jobs_of("gbig"), 0);
    assert_int_equal(cli_run(NULL, NULL, "enqueue --help", out, sizeof(out), err, sizeof(err)), 0);
    assert_non_null(strstr(out, "Job graphs: with --jobs, stdin is read to its end"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(diamond_from_a_file_lands_with_its_parents),
        cmocka_unit_test(diamond_from_a_pipe_lands_with_its_parents),
        cmocka_unit_test(cycle_exits_2_and_enqueues_nothing),
        cmocka_unit_test(graph_past_the_batch_limit_sends_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
