/* First updates of a new key compose: in each of many rounds, WRITERS threads released together
 * by a barrier send one merge-patch PATCH each ({"f<i>": i}) to a key that has no row yet. The
 * locked read's headless-row insert makes every writer but one lose the insert race and then
 * wait on the winner's row lock, so the patches apply one after another: the final head holds
 * all WRITERS fields, the responses carry values of sizes 1..WRITERS, and the log holds exactly
 * WRITERS messages for the key. The second case runs the same rounds against rowlock-unlocked
 * (no headless-row insert: a brand-new key is not locked) and requires a lost update, which
 * shows that the first case would catch that bug (both with ROWLOCK_KEY_WRITERS=0, so that all
 * WRITERS reach the row lock; another case runs the rounds behind the default per-key gate). A
 * further case forces the interleaving behind
 * the composition deterministically: a PATCH that waits on the row lock of a key while the lock
 * holder moves its head must patch the head the holder committed, not an older one or none. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define ROUNDS  100
#define WRITERS 8

static const char *const merge_patch[] = {"Content-Type: application/merge-patch+json", NULL};
static const char *const json_body[] = {"Content-Type: application/json", NULL};

struct writer {
    int port;
    char path[128];
    char body[64];
    pthread_barrier_t *start;
    struct th_response r;
    int rc;
};

static void *patch_one(void *arg)
{
    struct writer *w = arg;
    pthread_barrier_wait(w->start);
    w->rc = th_http(w->port, "PATCH", w->path, merge_patch, w->body, strlen(w->body), &w->r);
    return NULL;
}

static void create_topic(int port, const char *topic)
{
    char path[64];
    const char *body = "{\"headless_ttl_seconds\": 3600}";
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s", topic);
    assert_int_equal(th_http(port, "PUT", path, json_body, body, strlen(body), &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
}

/* Reads the log from *cursor to its end, paging with next; counts the messages and those of
 * key; advances *cursor. */
static void read_log(int port, const char *topic, const char *key, int64_t *cursor, int *total,
                     int *of_key)
{
    *total = *of_key = 0;
    for (;;) {
        char path[128];
        struct th_response r;
        snprintf(path, sizeof(path), "/topics/%s/messages?after=%lld&limit=3", topic,
                 (long long)*cursor);
        assert_int_equal(th_http(port, "GET", path, NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        json_t *msgs = json_object_get(r.json, "messages");
        size_t n = json_array_size(msgs);
        for (size_t i = 0; i < n; i++) {
            const char *k = json_string_value(json_object_get(json_array_get(msgs, i), "key"));
            *of_key += k != NULL && strcmp(k, key) == 0;
        }
        *total += (int)n;
        int64_t next = json_integer_value(json_object_get(r.json, "next"));
        th_response_free(&r);
        if (n == 0 && next == *cursor)
            return;
        *cursor = next;
    }
}

/* One round on key round<i>: returns how many of the WRITERS fields the head ends up with.
 * strict: also require that the patches were applied one after another. */
static int run_round(int port, const char *topic, int round, int64_t *cursor, int strict)
{
    pthread_barrier_t start;
    struct writer w[WRITERS];
    pthread_t t[WRITERS];
    char key[32];
    snprintf(key, sizeof(key), "round%d", round);
    pthread_barrier_init(&start, NULL, WRITERS);
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].port = port;
        w[i].start = &start;
        snprintf(w[i].path, sizeof(w[i].path), "/topics/%s/keys/%s/head", topic, key);
        snprintf(w[i].body, sizeof(w[i].body), "{\"f%d\": %d}", i, i);
        pthread_create(&t[i], NULL, patch_one, &w[i]);
    }
    int sizes_seen = 0; /* bit s-1 set: a response value had s fields */
    for (int i = 0; i < WRITERS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(w[i].rc, 0);
        if (w[i].r.status != 200)
            fprintf(stderr, "PATCH %s: %ld %s\n", w[i].path, w[i].r.status, w[i].r.body);
        assert_int_equal(w[i].r.status, 200);
        assert_true(json_is_true(json_object_get(w[i].r.json, "produced")));
        size_t fields = json_object_size(json_object_get(w[i].r.json, "value"));
        if (fields >= 1 && fields <= WRITERS)
            sizes_seen |= 1 << (fields - 1);
        th_response_free(&w[i].r);
    }
    pthread_barrier_destroy(&start);
    if (strict)
        assert_int_equal(sizes_seen, (1 << WRITERS) - 1);

    struct th_response r;
    assert_int_equal(th_http(port, "GET", w[0].path, NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    json_t *value = json_object_get(r.json, "value");
    int present = 0;
    for (int i = 0; i < WRITERS; i++) {
        char f[16];
        snprintf(f, sizeof(f), "f%d", i);
        json_t *v = json_object_get(value, f);
        present += v != NULL && json_integer_value(v) == i;
    }
    if (strict && present != WRITERS)
        fprintf(stderr, "round %d: head %s\n", round, r.body);
    th_response_free(&r);

    int total = 0, of_key = 0;
    read_log(port, topic, key, cursor, &total, &of_key);
    assert_int_equal(of_key, WRITERS);
    assert_int_equal(total, WRITERS); /* nothing else was written this round */
    return present;
}

static void *patch_alone(void *arg)
{
    struct writer *w = arg;
    w->rc = th_http(w->port, "PATCH", w->path, merge_patch, w->body, strlen(w->body), &w->r);
    return NULL;
}

/* Runs the rounds against binary, with ROWLOCK_KEY_WRITERS=writers (0: every PATCH goes on to
 * the row lock, so that the rounds race the database's locking alone); returns the number of
 * rounds that lost an update. */
static int run_rounds(const char *binary, const char *db, const char *writers, int strict)
{
    char gate[64];
    snprintf(gate, sizeof(gate), "ROWLOCK_KEY_WRITERS=%s", writers);
    const char *env[] = {"ROWLOCK_THREADS=16", "ROWLOCK_POOL_SIZE=16",
                         "ROWLOCK_STATEMENT_TIMEOUT_MS=20000", gate, NULL};
    assert_int_equal(th_svc_db(db), 0);
    assert_int_equal(th_service_start_binary(&th_svc, binary, th_svc_dburl, env), 0);
    create_topic(th_svc.port, "t");
    int64_t cursor = 0;
    int lossy = 0;
    double t0 = th_now();
    for (int round = 0; round < ROUNDS; round++) {
        int present = run_round(th_svc.port, "t", round, &cursor, strict);
        if (present < WRITERS)
            lossy++;
        if (strict)
            assert_int_equal(present, WRITERS);
    }
    fprintf(stderr, "%s: %d of %d rounds of %d concurrent first PATCHes lost an update (%.1f s)\n",
            binary, lossy, ROUNDS, WRITERS, th_now() - t0);
    return lossy;
}

static void concurrent_first_patches_of_a_new_key_all_apply(void **state)
{
    assert_int_equal(run_rounds(ROWLOCK_BINARY, "first_updates", "0", 1), 0);
}

/* The same with the default per-key gate: two of the writers at a time reach the lock. */
static void concurrent_first_patches_compose_behind_the_key_gate(void **state)
{
    assert_int_equal(run_rounds(ROWLOCK_BINARY, "first_updates_gated", "2", 1), 0);
}

static void unlocked_build_loses_first_updates(void **state)
{
    assert_true(run_rounds(ROWLOCK_UNLOCKED_BINARY, "first_updates_unlocked", "0", 0) > 0);
}

/* Holds the row lock of key k of topic w while w's PATCH runs and waits on it, then moves the
 * head to {"a": 1, "c": 3} (a message and the head update, as a produce commits them) and
 * commits; returns when the PATCH has answered. */
static void move_head_while_a_patch_waits(const char *dburl, struct writer *w)
{
    PGconn *holder = th_pg(dburl), *observer = th_pg(dburl);
    PGresult *r = th_sql(holder, "SELECT id FROM rowlock.topics WHERE name = 'w'");
    char id[32], seq[96], sql[1024];
    snprintf(id, sizeof(id), "%s", PQgetvalue(r, 0, 0));
    snprintf(seq, sizeof(seq), "rowlock.topic_offsets_%s", id);
    PQclear(r);
    PQclear(th_sql(holder, "BEGIN"));
    snprintf(sql, sizeof(sql),
             "SELECT key FROM rowlock.topic_heads WHERE topic_id = %s AND key = 'k' FOR UPDATE",
             id);
    PQclear(th_sql(holder, sql));

    pthread_t t;
    pthread_create(&t, NULL, patch_alone, w);
    th_wait_lock_waiter(observer, "the row lock");
    snprintf(sql, sizeof(sql),
             "WITH m AS (INSERT INTO rowlock.topic_messages (topic_id, \"offset\", key, value, "
             "schema_version, rank) "
             "SELECT %s, o, 'k', '{\"a\": 1, \"c\": 3}', 1, o FROM nextval('%s') o "
             "RETURNING \"offset\") "
             "UPDATE rowlock.topic_heads h SET head_id = m.\"offset\", schema_version = 1, "
             "compaction_rank = m.\"offset\", updated_at = now() FROM m "
             "WHERE h.topic_id = %s AND h.key = 'k'",
             id, seq, id);
    PQclear(th_sql(holder, sql));
    PQclear(th_sql(holder, "COMMIT"));
    pthread_join(t, NULL);
    PQfinish(holder);
    PQfinish(observer);
}

/* Interleaving: the test locks the row of a key whose head is {"a": 1} (as a locked read does);
 * a PATCH {"b": 2} comes to wait on that lock; the holder moves the head to {"a": 1, "c": 3} and
 * commits; the PATCH must then apply to the head the holder committed. */
static void patch_waiting_on_the_row_lock_patches_the_holders_head(void **state)
{
    const char *env[] = {"ROWLOCK_STATEMENT_TIMEOUT_MS=20000", NULL};
    assert_int_equal(th_svc_start("first_updates_waiter", env), 0);
    create_topic(th_svc.port, "w");
    struct writer w = {.port = th_svc.port, .path = "/topics/w/keys/k/head"};
    snprintf(w.body, sizeof(w.body), "{\"a\": 1}");
    patch_alone(&w);
    assert_int_equal(w.rc, 0);
    assert_int_equal(w.r.status, 200);
    th_response_free(&w.r);

    snprintf(w.body, sizeof(w.body), "{\"b\": 2}");
    move_head_while_a_patch_waits(th_svc_dburl, &w);
    assert_int_equal(w.rc, 0);
    json_t *want = json_pack("{s:i, s:i, s:i}", "a", 1, "b", 2, "c", 3);
    if (w.r.status != 200 || !json_equal(json_object_get(w.r.json, "value"), want))
        fprintf(stderr, "the waiting PATCH answered %ld %s\n", w.r.status, w.r.body);
    assert_int_equal(w.r.status, 200);
    assert_true(json_equal(json_object_get(w.r.json, "value"), want));
    th_response_free(&w.r);
    struct th_response g;
    assert_int_equal(th_http(th_svc.port, "GET", w.path, NULL, NULL, 0, &g), 0);
    assert_int_equal(g.status, 200);
    assert_true(json_equal(json_object_get(g.json, "value"), want));
    th_response_free(&g);
    json_decref(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(concurrent_first_patches_of_a_new_key_all_apply, th_svc_teardown),
        cmocka_unit_test_teardown(concurrent_first_patches_compose_behind_the_key_gate,
                                  th_svc_teardown),
        cmocka_unit_test_teardown(unlocked_build_loses_first_updates, th_svc_teardown),
        cmocka_unit_test_teardown(patch_waiting_on_the_row_lock_patches_the_holders_head,
                                  th_svc_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
