/* Idempotent produce: a registered producer's sequence is written once. Interleaving forced: 16
 * threads released together send the same sequence (and, separately, the same batch of
 * sequences), round after round, then the same requests again one by one: the log holds exactly
 * one message per sequence, every response names the same offset, one answer is 201 and all the
 * others 200 with head "duplicate". A sequence without a producer is 400 and an unregistered
 * producer 404 producer_not_found, and neither writes anything. */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define SENDERS 16
#define ROUNDS  10
#define REPEATS 3
#define BATCH   4

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int setup(void **state)
{
    struct th_response r;
    if (th_svc_start("idempotent", NULL) != 0)
        return -1;
    int ok = th_http(th_svc.port, "PUT", "/topics/t", json_ct, "{}", 2, &r) == 0 && r.status == 201;
    th_response_free(&r);
    ok = ok &&
         th_http(th_svc.port, "PUT", "/topics/t/producers/p", json_ct, "{\"schema_version\":3}", 20,
                 &r) == 0 &&
         r.status == 201;
    th_response_free(&r);
    return ok ? 0 : -1;
}

/* Rows of topic t's log (holes left out) matching the SQL condition where. */
static int64_t log_count(const char *where)
{
    char sql[256];
    PGconn *c = th_pg(th_svc_dburl);
    /* the log's rows carry the topic id */
    PGresult *r = th_sql(c, "SELECT id FROM rowlock.topics WHERE name = 't'");
    snprintf(
        sql, sizeof(sql),
        "SELECT count(*) FROM rowlock.topic_messages WHERE topic_id = %s AND NOT hole AND (%s)",
        PQgetvalue(r, 0, 0), where);
    PQclear(r);
    r = th_sql(c, sql);
    int64_t n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    PQfinish(c);
    return n;
}

/* ---- many senders released at once ---- */

struct send {
    const char *body;
    pthread_barrier_t *go;
    struct th_response r;
    int rc;
};

static void *sender_main(void *arg)
{
    struct send *s = arg;
    pthread_barrier_wait(s->go);
    s->rc = th_http(th_svc.port, "POST", "/topics/t/messages", json_ct, s->body, strlen(s->body),
                    &s->r);
    return NULL;
}

/* Sends body from SENDERS threads at once; responses into out[SENDERS]. */
static void send_together(const char *body, struct send out[SENDERS])
{
    pthread_barrier_t go;
    pthread_t t[SENDERS];
    pthread_barrier_init(&go, NULL, SENDERS);
    for (int i = 0; i < SENDERS; i++) {
        out[i] = (struct send){.body = body, .go = &go};
        pthread_create(&t[i], NULL, sender_main, &out[i]);
    }
    for (int i = 0; i < SENDERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&go);
}

/* Checks one produced entry ({offset, head, ...}) of a response with status status. */
static void check_entry(json_t *m, long status, int64_t offset)
{
    const char *head = json_string_value(json_object_get(m, "head"));
    assert_non_null(head);
    assert_int_equal(json_integer_value(json_object_get(m, "offset")), offset);
    if (status == 201)
        assert_string_equal(head, "advanced");
    else
        assert_string_equal(head, "duplicate");
}

static void same_sequence_sent_concurrently_writes_one_message(void **state)
{
    int64_t before = log_count("true");
    for (int round = 0; round < ROUNDS; round++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"producer\":\"p\",\"key\":\"k%d\",\"value\":{\"round\":%d},\"sequence\":%d}",
                 round % 2, round, 100 + round);
        struct send s[SENDERS];
        int64_t offset = -1;
        for (int attempt = 0; attempt <= REPEATS; attempt++) {
            int created = 0;
            if (attempt == 0) {
                send_together(body, s);
            } else { /* later retries, one at a time */
                s[0].rc = th_http(th_svc.port, "POST", "/topics/t/messages", json_ct, body,
                                  strlen(body), &s[0].r);
            }
            for (int i = 0; i < (attempt == 0 ? SENDERS : 1); i++) {
                assert_int_equal(s[i].rc, 0);
                if (s[i].r.status != 200 && s[i].r.status != 201)
                    fail_msg("round %d: %ld %s", round, s[i].r.status, s[i].r.body);
                if (offset < 0)
                    offset = json_integer_value(json_object_get(s[i].r.json, "offset"));
                check_entry(s[i].r.json, s[i].r.status, offset);
                /* the key's head is this message; the ETag names it */
                char etag[32], want[32];
                assert_int_equal(json_integer_value(json_object_get(s[i].r.json, "head_offset")),
                                 offset);
                snprintf(want, sizeof(want), "\"%" PRId64 "\"", offset);
                assert_int_equal(th_header(&s[i].r, "ETag", etag, sizeof(etag)), 0);
                assert_string_equal(etag, want);
                created += s[i].r.status == 201;
                th_response_free(&s[i].r);
            }
            assert_int_equal(created, attempt == 0 ? 1 : 0);
        }
        char where[64];
        snprintf(where, sizeof(where), "producer = 'p' AND sequence = %d", 100 + round);
        assert_int_equal(log_count(where), 1);
    }
    assert_int_equal(log_count("true"), before + ROUNDS);
}

static void same_batch_sent_concurrently_writes_each_sequence_once(void **state)
{
    int64_t before = log_count("true");
    for (int round = 0; round < ROUNDS / 2; round++) {
        char body[1024];
        int n = snprintf(body, sizeof(body), "{\"producer\":\"p\",\"messages\":[");
        for (int b = 0; b < BATCH; b++)
            n += snprintf(body + n, sizeof(body) - (size_t)n,
                          "%s{\"key\":\"b%d\",\"value\":%d,\"sequence\":%d}", b ? "," : "", b,
                          round, 1000 + round * BATCH + b);
        snprintf(body + n, sizeof(body) - (size_t)n, "]}");
        struct send s[SENDERS];
        send_together(body, s);
        int64_t offsets[BATCH];
        int created = 0;
        for (int i = 0; i < SENDERS; i++) {
            assert_int_equal(s[i].rc, 0);
            if (s[i].r.status != 200 && s[i].r.status != 201)
                fail_msg("batch round %d: %ld %s", round, s[i].r.status, s[i].r.body);
            json_t *msgs = json_object_get(s[i].r.json, "messages");
            assert_int_equal(json_array_size(msgs), BATCH);
            for (int b = 0; b < BATCH; b++) {
                json_t *m = json_array_get(msgs, (size_t)b);
                if (i == 0)
                    offsets[b] = json_integer_value(json_object_get(m, "offset"));
                check_entry(m, s[i].r.status, offsets[b]);
            }
            created += s[i].r.status == 201;
            th_response_free(&s[i].r);
        }
        assert_int_equal(created, 1);
        for (int b = 1; b < BATCH; b++)
            assert_true(offsets[b] > offsets[b - 1]); /* input order */
    }
    assert_int_equal(log_count("true"), before + ROUNDS / 2 * BATCH);
}

/* The log read back over HTTP holds each of the producer's sequences once. */
static void log_holds_each_sequence_once(void **state)
{
    int64_t after = 0, read = 0;
    for (;;) {
        char path[128];
        struct th_response r;
        snprintf(path, sizeof(path), "/topics/t/messages?after=%" PRId64 "&limit=1000", after);
        assert_int_equal(th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        json_t *msgs = json_object_get(r.json, "messages");
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m)
        {
            assert_string_equal(json_string_value(json_object_get(m, "producer")), "p");
            assert_int_equal(json_integer_value(json_object_get(m, "schema_version")), 3);
        }
        size_t n = json_array_size(msgs);
        read += (int64_t)n;
        after = json_integer_value(json_object_get(r.json, "next"));
        th_response_free(&r);
        if (n == 0)
            break;
    }
    assert_int_equal(read, ROUNDS + ROUNDS / 2 * BATCH);
    /* sequences are not in the read model; count them in the table */
    PGconn *c = th_pg(th_svc_dburl);
    PGresult *id = th_sql(c, "SELECT id FROM rowlock.topics WHERE name = 't'");
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT sequence, count(*) FROM rowlock.topic_messages WHERE topic_id = %s "
             "AND NOT hole GROUP BY sequence ORDER BY sequence",
             PQgetvalue(id, 0, 0));
    PQclear(id);
    PGresult *r = th_sql(c, sql);
    for (int i = 0; i < PQntuples(r); i++) {
        if (strcmp(PQgetvalue(r, i, 1), "1") != 0)
            fail_msg("sequence %s is in the log %s times", PQgetvalue(r, i, 0),
                     PQgetvalue(r, i, 1));
    }
    assert_int_equal(PQntuples(r), ROUNDS + ROUNDS / 2 * BATCH);
    PQclear(r);
    PQfinish(c);
}

static void sequence_without_producer_is_400_and_writes_nothing(void **state)
{
    int64_t before = log_count("true");
    const char *bodies[] = {
        "{\"key\":\"a\",\"value\":1,\"sequence\":7}",
        "{\"messages\":[{\"key\":\"a\",\"value\":1,\"sequence\":7}]}",
        "{\"messages\":[{\"key\":\"a\",\"value\":1},{\"key\":\"b\",\"value\":2,\"sequence\":8}]}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, "POST", "/topics/t/messages", json_ct, bodies[i],
                                 strlen(bodies[i]), &r),
                         0);
        th_assert_problem(&r, 400, "invalid_message");
        assert_non_null(strstr(json_string_value(json_object_get(r.json, "detail")), "producer"));
        th_response_free(&r);
    }
    assert_int_equal(log_count("true"), before);
}

static void unknown_producer_is_404_and_writes_nothing(void **state)
{
    int64_t before = log_count("true");
    const char *bodies[] = {
        "{\"producer\":\"ghost\",\"key\":\"a\",\"value\":1,\"sequence\":7}",
        "{\"producer\":\"ghost\",\"key\":\"a\",\"value\":1}",
        "{\"producer\":\"ghost\",\"messages\":[{\"key\":\"a\",\"value\":1,\"sequence\":1}]}",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct th_response r;
        assert_int_equal(th_http(th_svc.port, "POST", "/topics/t/messages", json_ct, bodies[i],
                                 strlen(bodies[i]), &r),
                         0);
        th_assert_problem(&r, 404, "producer_not_found");
        th_response_free(&r);
    }
    assert_int_equal(log_count("true"), before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(same_sequence_sent_concurrently_writes_one_message),
        cmocka_unit_test(same_batch_sent_concurrently_writes_each_sequence_once),
        cmocka_unit_test(log_holds_each_sequence_once),
        cmocka_unit_test(sequence_without_producer_is_400_and_writes_nothing),
        cmocka_unit_test(unknown_producer_is_404_and_writes_nothing),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
