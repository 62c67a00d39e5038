/* Readers sharing one consumer name, racing over HTTP against a real rowlock.
 * (a) Commits from the same offset at once: THREADS threads wait at a barrier each round, then
 *     all commit {"offset": base + 1 + i, "expect": base}; exactly one answers 200 per round, the
 *     others 409 consumer_conflict naming the winner's offset, and a watcher reading the consumer
 *     all the while never sees its offset move backwards.
 * (b) Two readers sharing a name while a producer writes: each loops read the consumer's offset
 *     o, read the page after o, commit its next with expect o. The ranges (o, next] of the
 *     commits that were accepted chain from 0 to the log's end and cover every message exactly
 *     once: no message skipped unnoticed, none taken by both. A reader whose commit was refused
 *     knows its page was not its own.
 * Both fail against a build whose commit ignores expect (several winners a round; ranges taken
 * twice). */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define THREADS  8
#define ROUNDS   25
#define MESSAGES 240 /* produced while the readers of (b) run */
#define PAGE     7

static int setup(void **state)
{
    return th_svc_start("consumer_race", NULL);
}

static json_int_t int_at(json_t *j, const char *member)
{
    json_t *v = json_object_get(j, member);
    return json_is_integer(v) ? json_integer_value(v) : -1;
}

/* GET the consumer's offset (-1 on any failure: the caller counts it). */
static json_int_t read_offset(const char *topic, const char *name)
{
    char path[160];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s", topic, name);
    if (th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r) != 0)
        return -1;
    json_int_t o = r.status == 200 ? int_at(r.json, "offset") : -1;
    th_response_free(&r);
    return o;
}

/* POST a commit; returns the status (-1 transport); *at the offset the answer names. */
static long commit(const char *topic, const char *name, json_int_t offset, json_int_t expect,
                   json_int_t *at)
{
    char path[160], body[128];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/consumers/%s/commit", topic, name);
    snprintf(body, sizeof(body),
             "{\"offset\":%" JSON_INTEGER_FORMAT ",\"expect\":%" JSON_INTEGER_FORMAT "}", offset,
             expect);
    const char *const ct[] = {"Content-Type: application/json", NULL};
    if (th_http(th_svc.port, "POST", path, ct, body, strlen(body), &r) != 0)
        return -1;
    long status = r.status;
    *at = int_at(r.json, "offset");
    if (status == 409 && strcmp(th_problem_code(&r), "consumer_conflict") != 0)
        status = -409; /* a 409 of another kind */
    th_response_free(&r);
    return status;
}

/* ---- (a) ---- */

struct round_state {
    pthread_barrier_t start, done;
    json_int_t base; /* the offset every commit of the round expects */
    long status[THREADS];
    json_int_t at[THREADS];
    atomic_int stop;
    atomic_int backwards, watcher_reads;
};

struct committer {
    struct round_state *s;
    int i;
};

static void *committer_main(void *arg)
{
    struct committer *c = arg;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&c->s->start);
        json_int_t base = c->s->base;
        c->s->status[c->i] = commit("race", "shared", base + 1 + c->i, base, &c->s->at[c->i]);
        pthread_barrier_wait(&c->s->done);
    }
    return NULL;
}

static void *watcher_main(void *arg)
{
    struct round_state *s = arg;
    json_int_t last = 0;
    while (!atomic_load(&s->stop)) {
        json_int_t o = read_offset("race", "shared");
        if (o >= 0 && o < last)
            atomic_fetch_add(&s->backwards, 1);
        if (o > last)
            last = o;
        atomic_fetch_add(&s->watcher_reads, 1);
    }
    return NULL;
}

/* The race topic: one message per commit the rounds can make at most. */
static void fill_race_topic(void)
{
    json_decref(th_svc_call("PUT", "/topics/race", "{}", 201));
    char body[96];
    for (int i = 0; i < ROUNDS * THREADS; i += 100) {
        char batch[8192] = "{\"messages\":[";
        for (int j = i; j < i + 100 && j < ROUNDS * THREADS; j++) {
            snprintf(body, sizeof(body), "%s{\"key\":\"k%d\",\"value\":%d}", j > i ? "," : "", j,
                     j);
            strcat(batch, body);
        }
        strcat(batch, "]}");
        json_decref(th_svc_call("POST", "/topics/race/messages", batch, 201));
    }
}

/* A round's answers: exactly one 200, the others 409 naming the winner's offset, which the
 * consumer then has. Sets s->base for the next round. 1 when so. */
static int round_ok(struct round_state *s, int round)
{
    int winners = 0, conflicts = 0;
    json_int_t won = -1;
    for (int i = 0; i < THREADS; i++) {
        winners += s->status[i] == 200;
        conflicts += s->status[i] == 409;
        if (s->status[i] == 200)
            won = s->at[i];
    }
    for (int i = 0; i < THREADS; i++) /* every loser was told the winner's offset */
        if (s->status[i] == 409 && s->at[i] != won)
            conflicts = -1;
    json_int_t now = read_offset("race", "shared");
    int ok = winners == 1 && conflicts == THREADS - 1 && now == won;
    if (!ok)
        print_error("round %d from %" JSON_INTEGER_FORMAT ": %d winners, %d conflicts, "
                    "offset %" JSON_INTEGER_FORMAT " (won %" JSON_INTEGER_FORMAT ")\n",
                    round, s->base, winners, conflicts, now, won);
    s->base = now; /* the next round commits from where this one left it */
    return ok;
}

static void one_commit_wins_each_round(void **state)
{
    (void)state;
    fill_race_topic();
    json_decref(
        th_svc_call("PUT", "/topics/race/consumers/shared", "{\"start\":\"beginning\"}", 201));
    struct round_state s;
    memset(&s, 0, sizeof(s));
    pthread_barrier_init(&s.start, NULL, THREADS + 1);
    pthread_barrier_init(&s.done, NULL, THREADS + 1);
    pthread_t th[THREADS], watcher;
    struct committer c[THREADS];
    for (int i = 0; i < THREADS; i++) {
        c[i] = (struct committer){&s, i};
        pthread_create(&th[i], NULL, committer_main, &c[i]);
    }
    pthread_create(&watcher, NULL, watcher_main, &s);
    int bad_rounds = 0;
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_wait(&s.start); /* all commit from s.base at once */
        pthread_barrier_wait(&s.done);
        bad_rounds += !round_ok(&s, round);
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_join(watcher, NULL);
    pthread_barrier_destroy(&s.start);
    pthread_barrier_destroy(&s.done);
    if (bad_rounds > 0)
        fail_msg("%d of %d rounds did not have exactly one winner", bad_rounds, ROUNDS);
    assert_true(atomic_load(&s.watcher_reads) > 0);
    assert_int_equal(atomic_load(&s.backwards), 0);
}

/* ---- (b) ---- */

struct claim {
    json_int_t from, to; /* the page (from, to] a reader's accepted commit took */
    int reader;
};

struct shared {
    pthread_mutex_t mu;
    struct claim claims[4096];
    int nclaims, refused, errors;
    atomic_int produced_all;
    json_int_t end; /* the log's last offset, once the producer is done */
};

struct reader {
    struct shared *s;
    int id;
    int pages, messages;
};

/* One turn: the offset, the page after it, the commit. 1 when caught up at the end. */
static int reader_turn(struct reader *rd)
{
    struct shared *s = rd->s;
    json_int_t o = read_offset("pair", "shared");
    char path[160];
    snprintf(path, sizeof(path), "/topics/pair/messages?after=%" JSON_INTEGER_FORMAT "&limit=%d", o,
             PAGE);
    struct th_response r;
    if (o < 0 || th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r) != 0 || r.status != 200) {
        pthread_mutex_lock(&s->mu);
        s->errors++;
        pthread_mutex_unlock(&s->mu);
        if (o >= 0)
            th_response_free(&r);
        return 1;
    }
    json_int_t next = int_at(r.json, "next");
    size_t n = json_array_size(json_object_get(r.json, "messages"));
    th_response_free(&r);
    if (next == o) /* nothing new */
        return atomic_load(&s->produced_all) && o == s->end;
    json_int_t at = 0;
    long st = commit("pair", "shared", next, o, &at);
    pthread_mutex_lock(&s->mu);
    if (st == 200 && s->nclaims < 4096)
        s->claims[s->nclaims++] = (struct claim){o, next, rd->id};
    else if (st == 409)
        s->refused++; /* noticed: this page was not ours */
    else
        s->errors++;
    pthread_mutex_unlock(&s->mu);
    rd->pages++;
    rd->messages += (int)n;
    return 0;
}

static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    double until = th_now() + 60;
    while (th_now() < until && !reader_turn(rd))
        ;
    return NULL;
}

static int by_from(const void *a, const void *b)
{
    const struct claim *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

static void shared_readers_never_skip(void **state)
{
    (void)state;
    json_decref(th_svc_call("PUT", "/topics/pair", "{}", 201));
    json_decref(th_svc_call("PUT", "/topics/pair/consumers/shared", "{\"start\":\"end\"}", 201));
    static struct shared s;
    memset(&s, 0, sizeof(s));
    pthread_mutex_init(&s.mu, NULL);
    struct reader rd[2] = {{&s, 0, 0, 0}, {&s, 1, 0, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, reader_main, &rd[i]);
    json_int_t last = 0;
    for (int i = 0; i < MESSAGES; i++) {
        char body[96];
        snprintf(body, sizeof(body), "{\"key\":\"k%d\",\"value\":%d}", i % 13, i);
        json_t *p = th_svc_call("POST", "/topics/pair/messages", body, 201);
        last = int_at(p, "offset");
        json_decref(p);
    }
    s.end = last;
    atomic_store(&s.produced_all, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(s.errors, 0);
    /* the accepted pages chain from 0 to the end: each starts where the one before ended */
    qsort(s.claims, (size_t)s.nclaims, sizeof(s.claims[0]), by_from);
    json_int_t at = 0;
    int gaps_or_overlaps = 0;
    for (int i = 0; i < s.nclaims; i++) {
        if (s.claims[i].from != at) {
            print_error("accepted page (%" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                        "] of reader %d does not start at %" JSON_INTEGER_FORMAT "\n",
                        s.claims[i].from, s.claims[i].to, s.claims[i].reader, at);
            gaps_or_overlaps++;
        }
        at = s.claims[i].to > at ? s.claims[i].to : at;
    }
    if (gaps_or_overlaps > 0)
        fail_msg("%d accepted pages overlap or leave a gap", gaps_or_overlaps);
    assert_int_equal(at, last);
    json_t *c = th_svc_get("/topics/pair/consumers/shared");
    assert_int_equal(int_at(c, "offset"), last);
    assert_int_equal(int_at(c, "lag_messages"), 0);
    json_decref(c);
    /* both readers took part, and at least once one of them was told its page was taken */
    print_message("readers: %d and %d pages, %d accepted, %d refused\n", rd[0].pages, rd[1].pages,
                  s.nclaims, s.refused);
    assert_true(rd[0].pages > 0 && rd[1].pages > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(one_commit_wins_each_round),
        cmocka_unit_test(shared_readers_never_skip),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
