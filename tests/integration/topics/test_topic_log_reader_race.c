/* Log readers racing writers whose offsets commit out of order. Interleavings forced: HTTP
 * producers (single and batch) race SQL transactions that take an offset early and roll back, or
 * commit late, while one reader follows GET .../messages?after= and another long-polls with
 * wait=1: each must see every committed offset exactly once, in increasing order, and no
 * rolled-back one. A naive reader (offset > after, no gap handling) under the same race misses a
 * commit made after it read past that offset, which shows the checks can fail. Then the two
 * single interleavings by hand: an in-progress offset stops readers until it commits, and a
 * rolled-back (or never inserted) offset becomes a hole that never stalls them. */
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define WRITE_SECONDS 3.0
#define READ_LIMIT    50
#define LATE_COMMITS  3

static const char *const json_ct[] = {"Content-Type: application/json", NULL};

static int setup(void **state)
{
    return th_svc_start("lograce", NULL);
}

/* ---- a growing, locked list of offsets ---- */

struct offsets {
    pthread_mutex_t mu;
    int64_t *v;
    size_t n, cap;
};

static void offsets_init(struct offsets *o)
{
    memset(o, 0, sizeof(*o));
    pthread_mutex_init(&o->mu, NULL);
}

static void offsets_add(struct offsets *o, int64_t x)
{
    pthread_mutex_lock(&o->mu);
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 256;
        o->v = realloc(o->v, o->cap * sizeof(int64_t));
    }
    o->v[o->n++] = x;
    pthread_mutex_unlock(&o->mu);
}

static void offsets_free(struct offsets *o)
{
    free(o->v);
    pthread_mutex_destroy(&o->mu);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int contains(const int64_t *sorted, size_t n, int64_t x)
{
    return bsearch(&x, sorted, n, sizeof(int64_t), cmp_i64) != NULL;
}

/* ---- topics ---- */

/* Creates the topic over HTTP and returns its id from the catalogue. */
static int64_t topic_create(const char *name)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s", name);
    assert_int_equal(th_http(th_svc.port, "PUT", path, json_ct, "{}", 2, &r), 0);
    assert_int_equal(r.status, 201);
    th_response_free(&r);
    PGconn *c = th_pg(th_svc_dburl);
    const char *params[] = {name};
    PGresult *res = PQexecParams(c, "SELECT id FROM rowlock.topics WHERE name = $1", 1, NULL,
                                 params, NULL, NULL, 0);
    assert_int_equal(PQntuples(res), 1);
    int64_t id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    PQfinish(c);
    return id;
}

/* One message over HTTP; returns its offset, or -1 (printed) on anything but 201. */
static int64_t produce_http(const char *topic, const char *key)
{
    char path[256], body[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/messages", topic);
    int n = snprintf(body, sizeof(body), "{\"key\":\"%s\",\"value\":{\"k\":\"%s\"}}", key, key);
    int64_t off = -1;
    if (th_http(th_svc.port, "POST", path, json_ct, body, (size_t)n, &r) == 0 && r.status == 201)
        off = json_integer_value(json_object_get(r.json, "offset"));
    else
        fprintf(stderr, "produce %s: %ld %s\n", key, r.status, r.body ? r.body : "");
    th_response_free(&r);
    return off;
}

/* GET .../messages?after=&limit=[&wait=]: appends the offsets read to seen (may be NULL) and
 * returns how many, setting *next; -1 (printed) on anything but 200. */
static int read_log(const char *topic, int64_t after, int wait, int64_t *next, struct offsets *seen)
{
    char path[256];
    struct th_response r;
    snprintf(path, sizeof(path), "/topics/%s/messages?after=%" PRId64 "&limit=%d%s", topic, after,
             READ_LIMIT, wait ? "&wait=1" : "");
    if (th_http(th_svc.port, "GET", path, NULL, NULL, 0, &r) != 0 || r.status != 200) {
        fprintf(stderr, "read %s: %ld %s\n", path, r.status, r.body ? r.body : "");
        th_response_free(&r);
        return -1;
    }
    json_t *msgs = json_object_get(r.json, "messages");
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        if (seen != NULL)
            offsets_add(seen, json_integer_value(json_object_get(m, "offset")));
    }
    *next = json_integer_value(json_object_get(r.json, "next"));
    int n = (int)json_array_size(msgs);
    th_response_free(&r);
    return n;
}

/* ---- the race ---- */

struct race {
    const char *topic;
    int64_t id;
    double until; /* writers stop taking new work at this time */
    int late_commits;
    atomic_int writers_done;
    atomic_llong target; /* once writers are done: the highest committed offset */
    atomic_llong naive_after;
    atomic_int errors, stolen;
    struct offsets committed, rolled_back, late;
};

struct reader {
    struct race *race;
    int wait;  /* 1: long-polls */
    int naive; /* 1: offset > after through libpq, no gap handling */
    struct offsets seen;
    int64_t next;
};

struct sql_writer {
    struct race *race;
    int commit; /* 1: commit late; 0: roll back */
    unsigned seed;
};

struct producer {
    struct race *race;
    int id;
};

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    struct race *rc = p->race;
    char path[256];
    snprintf(path, sizeof(path), "/topics/%s/messages", rc->topic);
    for (int i = 0; th_now() < rc->until; i++) {
        int batch = (i % 3 == 2) ? 1 + (i % 7) : 0; /* every third request: a batch of 1-7 */
        char body[2048];
        int n;
        if (batch == 0) {
            n = snprintf(body, sizeof(body), "{\"key\":\"p%d-%d\",\"value\":%d}", p->id, i % 13, i);
        } else {
            n = snprintf(body, sizeof(body), "{\"messages\":[");
            for (int b = 0; b < batch; b++)
                n += snprintf(body + n, sizeof(body) - (size_t)n,
                              "%s{\"key\":\"p%d-b%d\",\"value\":[%d,%d]}", b ? "," : "", p->id, b,
                              i, b);
            n += snprintf(body + n, sizeof(body) - (size_t)n, "]}");
        }
        struct th_response r;
        if (th_http(th_svc.port, "POST", path, json_ct, body, (size_t)n, &r) != 0 ||
            r.status != 201) {
            fprintf(stderr, "producer %d: %ld %s\n", p->id, r.status, r.body ? r.body : "");
            atomic_fetch_add(&rc->errors, 1);
        } else if (batch == 0) {
            offsets_add(&rc->committed, json_integer_value(json_object_get(r.json, "offset")));
        } else {
            size_t k;
            json_t *m;
            json_array_foreach(json_object_get(r.json, "messages"), k, m)
            {
                offsets_add(&rc->committed, json_integer_value(json_object_get(m, "offset")));
            }
        }
        th_response_free(&r);
    }
    return NULL;
}

/* BEGIN; take an offset; insert its row. Returns the offset, or -1 when the insert lost the
 * offset to a reader that had already recorded it as a hole (the transaction is rolled back:
 * nothing can commit there any more). */
static int64_t sql_take_offset(PGconn *c, const struct race *rc, const char *key)
{
    char sql[256], off[24];
    PQclear(PQexec(c, "BEGIN"));
    snprintf(sql, sizeof(sql), "SELECT nextval('rowlock.topic_offsets_%" PRId64 "')", rc->id);
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "nextval: %s", PQresultErrorMessage(r));
        PQclear(r);
        PQclear(PQexec(c, "ROLLBACK"));
        return -2;
    }
    snprintf(off, sizeof(off), "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    snprintf(sql, sizeof(sql),
             "INSERT INTO rowlock.topic_messages (topic_id, \"offset\", key, value, "
             "schema_version, rank) VALUES (%" PRId64 ", $1, $2, '1', 1, $1)",
             rc->id);
    const char *params[] = {off, key};
    r = PQexecParams(c, sql, 2, NULL, params, NULL, NULL, 0);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    int stolen = !ok && state != NULL && strcmp(state, "23505") == 0;
    if (!ok && !stolen)
        fprintf(stderr, "insert: %s", PQresultErrorMessage(r));
    PQclear(r);
    if (!ok) {
        PQclear(PQexec(c, "ROLLBACK"));
        return stolen ? -1 : -2;
    }
    return strtoll(off, NULL, 10);
}

static int sql_end(PGconn *c, const char *how)
{
    PGresult *r = PQexec(c, how);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
}

static void *sql_writer_main(void *arg)
{
    struct sql_writer *w = arg;
    struct race *rc = w->race;
    PGconn *c = PQconnectdb(th_svc_dburl);
    while (PQstatus(c) == CONNECTION_OK && th_now() < rc->until) {
        int64_t off = sql_take_offset(c, rc, w->commit ? "slow" : "rb");
        if (off == -1) {
            atomic_fetch_add(&rc->stolen, 1);
            continue;
        }
        if (off < 0) {
            atomic_fetch_add(&rc->errors, 1);
            break;
        }
        /* rollbacks hold their offset 1-5 ms, slow commits 10-60 ms */
        usleep(w->commit ? 10000 + rand_r(&w->seed) % 50000 : 1000 + rand_r(&w->seed) % 4000);
        if (!sql_end(c, w->commit ? "COMMIT" : "ROLLBACK")) {
            atomic_fetch_add(&rc->errors, 1);
            break;
        }
        offsets_add(w->commit ? &rc->committed : &rc->rolled_back, off);
        usleep(1000 + rand_r(&w->seed) % 3000);
    }
    if (PQstatus(c) != CONNECTION_OK)
        atomic_fetch_add(&rc->errors, 1);
    PQfinish(c);
    return NULL;
}

/* The deterministic late commit: take an offset, wait until the naive reader has read past it
 * (a later offset committed and was shown), then commit it. */
static void *late_committer_main(void *arg)
{
    struct race *rc = arg;
    PGconn *c = PQconnectdb(th_svc_dburl);
    for (int i = 0; i < rc->late_commits && PQstatus(c) == CONNECTION_OK; i++) {
        int64_t off;
        while ((off = sql_take_offset(c, rc, "late")) == -1) /* lost to a reader: again */
            atomic_fetch_add(&rc->stolen, 1);
        if (off < 0) {
            atomic_fetch_add(&rc->errors, 1);
            break;
        }
        double give_up = th_now() + 20;
        while (atomic_load(&rc->naive_after) <= off && th_now() < give_up)
            usleep(2000);
        if (!sql_end(c, "COMMIT")) {
            atomic_fetch_add(&rc->errors, 1);
            break;
        }
        offsets_add(&rc->committed, off);
        offsets_add(&rc->late, off);
        usleep(20000);
    }
    PQfinish(c);
    return NULL;
}

/* The naive read: SELECT offset ... WHERE offset > after ORDER BY offset (holes are markers,
 * not messages, so they are left out). Returns the count read, -1 on error. */
static int naive_read(PGconn *c, const struct race *rc, int64_t *after, struct offsets *seen)
{
    char sql[256], a[24];
    snprintf(sql, sizeof(sql),
             "SELECT \"offset\" FROM rowlock.topic_messages WHERE topic_id = %" PRId64
             " AND \"offset\" > $1 AND NOT hole ORDER BY \"offset\" LIMIT %d",
             rc->id, READ_LIMIT);
    snprintf(a, sizeof(a), "%" PRId64, *after);
    const char *params[] = {a};
    PGresult *r = PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "naive read: %s", PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        *after = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        offsets_add(seen, *after);
    }
    PQclear(r);
    return n;
}

/* Follows the log until the writers are done and the reader has reached their last committed
 * offset, then reads once more (that read must find nothing new). */
static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    struct race *rc = rd->race;
    PGconn *c = rd->naive ? PQconnectdb(th_svc_dburl) : NULL;
    double give_up = rc->until + 20;
    rd->next = 0;
    for (int final = 0; th_now() < give_up;) {
        int n = rd->naive ? naive_read(c, rc, &rd->next, &rd->seen)
                          : read_log(rc->topic, rd->next, rd->wait, &rd->next, &rd->seen);
        if (n < 0) {
            atomic_fetch_add(&rc->errors, 1);
            break;
        }
        if (rd->naive)
            atomic_store(&rc->naive_after, rd->next);
        if (final)
            break;
        if (atomic_load(&rc->writers_done) && rd->next >= atomic_load(&rc->target))
            final = 1;
        else if (n == 0 && !rd->wait)
            usleep(2000);
    }
    PQfinish(c);
    return NULL;
}

/* Fails unless seen is exactly the committed offsets, each once, strictly increasing, with no
 * rolled-back one. Returns the number of committed offsets missing from seen. */
static size_t check_reader(const char *who, const struct offsets *seen,
                           const struct offsets *committed, const struct offsets *rolled_back,
                           int must_pass)
{
    int64_t *want = malloc((committed->n + 1) * sizeof(int64_t));
    int64_t *rb = malloc((rolled_back->n + 1) * sizeof(int64_t));
    memcpy(want, committed->v, committed->n * sizeof(int64_t));
    memcpy(rb, rolled_back->v, rolled_back->n * sizeof(int64_t));
    qsort(want, committed->n, sizeof(int64_t), cmp_i64);
    qsort(rb, rolled_back->n, sizeof(int64_t), cmp_i64);
    size_t problems = 0, missing = 0;
    for (size_t i = 1; i < seen->n; i++) {
        if (seen->v[i] <= seen->v[i - 1]) {
            fprintf(stderr, "%s: offset %" PRId64 " after %" PRId64 " (not increasing)\n", who,
                    seen->v[i], seen->v[i - 1]);
            problems++;
        }
    }
    for (size_t i = 0; i < seen->n; i++) {
        if (contains(rb, rolled_back->n, seen->v[i])) {
            fprintf(stderr, "%s: shows rolled-back offset %" PRId64 "\n", who, seen->v[i]);
            problems++;
        } else if (!contains(want, committed->n, seen->v[i])) {
            fprintf(stderr, "%s: shows offset %" PRId64 " nobody committed\n", who, seen->v[i]);
            problems++;
        }
    }
    int64_t *got = malloc((seen->n + 1) * sizeof(int64_t));
    memcpy(got, seen->v, seen->n * sizeof(int64_t));
    qsort(got, seen->n, sizeof(int64_t), cmp_i64);
    for (size_t i = 0; i < committed->n; i++) {
        if (!contains(got, seen->n, want[i])) {
            if (must_pass || missing < 5)
                fprintf(stderr, "%s: never showed committed offset %" PRId64 "\n", who, want[i]);
            missing++;
        }
    }
    fprintf(stderr, "%s: %zu offsets read, %zu committed, %zu missing, %zu other problems\n", who,
            seen->n, committed->n, missing, problems);
    free(want);
    free(rb);
    free(got);
    if (must_pass) {
        assert_int_equal(problems, 0);
        assert_int_equal(missing, 0);
        assert_int_equal(seen->n, committed->n);
    }
    return missing;
}

struct race_plan {
    int producers, rollbackers, slow_committers, late_commits;
};

/* Runs writers and the three readers on topic; fills the readers (to be freed by the caller). */
static void run_race(struct race *rc, const char *topic, const struct race_plan *plan,
                     struct reader readers[3])
{
    memset(rc, 0, sizeof(*rc));
    rc->topic = topic;
    rc->id = topic_create(topic);
    rc->late_commits = plan->late_commits;
    offsets_init(&rc->committed);
    offsets_init(&rc->rolled_back);
    offsets_init(&rc->late);
    rc->until = th_now() + WRITE_SECONDS;
    atomic_store(&rc->target, INT64_MAX);

    pthread_t rt[3], pt[8], wt[8], lt;
    struct producer prods[8];
    struct sql_writer sw[8];
    for (int i = 0; i < 3; i++) {
        memset(&readers[i], 0, sizeof(readers[i]));
        readers[i].race = rc;
        readers[i].wait = i == 1;
        readers[i].naive = i == 2;
        offsets_init(&readers[i].seen);
        pthread_create(&rt[i], NULL, reader_main, &readers[i]);
    }
    for (int i = 0; i < plan->producers; i++) {
        prods[i] = (struct producer){rc, i};
        pthread_create(&pt[i], NULL, producer_main, &prods[i]);
    }
    int nw = plan->rollbackers + plan->slow_committers;
    for (int i = 0; i < nw; i++) {
        sw[i] = (struct sql_writer){rc, i >= plan->rollbackers, 1234u + (unsigned)i};
        pthread_create(&wt[i], NULL, sql_writer_main, &sw[i]);
    }
    if (plan->late_commits > 0)
        pthread_create(&lt, NULL, late_committer_main, rc);

    for (int i = 0; i < plan->producers; i++)
        pthread_join(pt[i], NULL);
    for (int i = 0; i < nw; i++)
        pthread_join(wt[i], NULL);
    if (plan->late_commits > 0)
        pthread_join(lt, NULL);
    int64_t max = 0;
    for (size_t i = 0; i < rc->committed.n; i++)
        max = rc->committed.v[i] > max ? rc->committed.v[i] : max;
    atomic_store(&rc->target, max);
    atomic_store(&rc->writers_done, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(rt[i], NULL);
    fprintf(stderr,
            "race on %s: %zu committed (%zu late), %zu rolled back, %d offsets taken as holes "
            "before their insert, %d errors\n",
            topic, rc->committed.n, rc->late.n, rc->rolled_back.n, atomic_load(&rc->stolen),
            atomic_load(&rc->errors));
}

static void race_free(struct race *rc, struct reader readers[3])
{
    for (int i = 0; i < 3; i++)
        offsets_free(&readers[i].seen);
    offsets_free(&rc->committed);
    offsets_free(&rc->rolled_back);
    offsets_free(&rc->late);
}

static void
readers_see_every_commit_once_in_order_while_rollbacks_and_late_commits_race(void **state)
{
    struct race rc;
    struct reader readers[3];
    struct race_plan plan = {.producers = 3, .rollbackers = 1, .slow_committers = 2};
    run_race(&rc, "race", &plan, readers);
    assert_int_equal(atomic_load(&rc.errors), 0);
    assert_true(rc.committed.n > 100);
    assert_true(rc.rolled_back.n > 20);
    check_reader("http reader", &readers[0].seen, &rc.committed, &rc.rolled_back, 1);
    check_reader("long-poll reader", &readers[1].seen, &rc.committed, &rc.rolled_back, 1);
    /* for information: the naive reader usually misses some of the random slow commits */
    check_reader("naive reader", &readers[2].seen, &rc.committed, &rc.rolled_back, 0);
    race_free(&rc, readers);
}

static void naive_reader_misses_commits_made_after_it_read_past_them(void **state)
{
    struct race rc;
    struct reader readers[3];
    struct race_plan plan = {.producers = 2, .rollbackers = 1, .late_commits = LATE_COMMITS};
    run_race(&rc, "late", &plan, readers);
    assert_int_equal(atomic_load(&rc.errors), 0);
    assert_int_equal(rc.late.n, LATE_COMMITS);
    /* the same checks fail for the naive reader: each late commit is behind its cursor */
    size_t missed =
        check_reader("naive reader", &readers[2].seen, &rc.committed, &rc.rolled_back, 0);
    assert_true(missed >= 1);
    for (size_t i = 0; i < rc.late.n; i++) {
        int64_t *got = readers[2].seen.v;
        for (size_t k = 0; k < readers[2].seen.n; k++)
            assert_true(got[k] != rc.late.v[i]);
    }
    /* and pass for the gap-safe readers, which waited for each late offset */
    check_reader("http reader", &readers[0].seen, &rc.committed, &rc.rolled_back, 1);
    check_reader("long-poll reader", &readers[1].seen, &rc.committed, &rc.rolled_back, 1);
    race_free(&rc, readers);
}

/* Offsets of a read as a string like "7,8" (for messages in order). */
static void read_offsets(const char *topic, int64_t after, char *out, size_t size, int64_t *next)
{
    struct offsets seen;
    offsets_init(&seen);
    assert_true(read_log(topic, after, 0, next, &seen) >= 0);
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < seen.n && o < size; i++)
        o += (size_t)snprintf(out + o, size - o, "%s%" PRId64, i ? "," : "", seen.v[i]);
    offsets_free(&seen);
}

static void in_progress_offset_stops_readers_until_it_commits(void **state)
{
    struct race rc = {.topic = "inprogress"};
    rc.id = topic_create(rc.topic);
    assert_int_equal(produce_http(rc.topic, "before"), 1);
    PGconn *c = th_pg(th_svc_dburl);
    int64_t n = sql_take_offset(c, &rc, "slow");
    assert_int_equal(n, 2);
    assert_int_equal(produce_http(rc.topic, "after"), n + 1);

    char got[256], want[256];
    int64_t next = -1;
    for (int i = 0; i < 3; i++) { /* stays stopped, however often it is asked */
        read_offsets(rc.topic, n - 1, got, sizeof(got), &next);
        assert_string_equal(got, "");
        assert_int_equal(next, n - 1);
    }
    read_offsets(rc.topic, 0, got, sizeof(got), &next); /* what is before it is shown */
    assert_string_equal(got, "1");
    assert_int_equal(next, 1);

    assert_true(sql_end(c, "COMMIT"));
    read_offsets(rc.topic, n - 1, got, sizeof(got), &next);
    snprintf(want, sizeof(want), "%" PRId64 ",%" PRId64, n, n + 1);
    assert_string_equal(got, want);
    assert_int_equal(next, n + 1);
    PQfinish(c);
}

static void rolled_back_offset_is_a_hole_that_never_stalls_readers(void **state)
{
    struct race rc = {.topic = "rolledback"};
    rc.id = topic_create(rc.topic);
    PGconn *c = th_pg(th_svc_dburl);
    int64_t m = sql_take_offset(c, &rc, "rb");
    assert_int_equal(m, 1);
    assert_true(sql_end(c, "ROLLBACK"));
    assert_int_equal(produce_http(rc.topic, "after"), m + 1);

    char got[256], want[256];
    int64_t next = -1;
    snprintf(want, sizeof(want), "%" PRId64, m + 1);
    for (int i = 0; i < 2; i++) { /* the first read records the hole; the second reuses it */
        read_offsets(rc.topic, m - 1, got, sizeof(got), &next);
        assert_string_equal(got, want);
        assert_int_equal(next, m + 1);
    }
    /* the hole is a marker in the log, not a message */
    char sql[160];
    snprintf(sql, sizeof(sql),
             "SELECT hole, key IS NULL FROM rowlock.topic_messages WHERE topic_id = %" PRId64
             " AND \"offset\" = %" PRId64,
             rc.id, m);
    PGresult *r = th_sql(c, sql);
    assert_int_equal(PQntuples(r), 1);
    assert_string_equal(PQgetvalue(r, 0, 0), "t");
    assert_string_equal(PQgetvalue(r, 0, 1), "t");
    PQclear(r);
    PQfinish(c);
}

/* An offset drawn but not yet inserted when a reader reaches it cannot be told from a rolled
 * back one: the reader records the hole and moves on, and the late insert then fails, so the
 * offset can never commit behind the reader. */
static void offset_taken_but_not_inserted_becomes_a_hole_the_late_insert_cannot_fill(void **state)
{
    struct race rc = {.topic = "notinserted"};
    rc.id = topic_create(rc.topic);
    PGconn *c = th_pg(th_svc_dburl);
    char sql[256];
    PQclear(th_sql(c, "BEGIN"));
    snprintf(sql, sizeof(sql), "SELECT nextval('rowlock.topic_offsets_%" PRId64 "')", rc.id);
    PGresult *r = th_sql(c, sql);
    int64_t k = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    assert_int_equal(produce_http(rc.topic, "after"), k + 1);

    char got[64], want[64];
    int64_t next = -1;
    snprintf(want, sizeof(want), "%" PRId64, k + 1);
    read_offsets(rc.topic, 0, got, sizeof(got), &next);
    assert_string_equal(got, want);
    assert_int_equal(next, k + 1);

    snprintf(sql, sizeof(sql),
             "INSERT INTO rowlock.topic_messages (topic_id, \"offset\", key, value, "
             "schema_version, rank) VALUES (%" PRId64 ", %" PRId64 ", 'late', '1', 1, %" PRId64 ")",
             rc.id, k, k);
    r = PQexec(c, sql);
    assert_int_equal(PQresultStatus(r), PGRES_FATAL_ERROR);
    assert_string_equal(PQresultErrorField(r, PG_DIAG_SQLSTATE), "23505");
    PQclear(r);
    PQclear(th_sql(c, "ROLLBACK"));
    read_offsets(rc.topic, 0, got, sizeof(got), &next);
    assert_string_equal(got, want);
    PQfinish(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            readers_see_every_commit_once_in_order_while_rollbacks_and_late_commits_race),
        cmocka_unit_test(naive_reader_misses_commits_made_after_it_read_past_them),
        cmocka_unit_test(in_progress_offset_stops_readers_until_it_commits),
        cmocka_unit_test(rolled_back_offset_is_a_hole_that_never_stalls_readers),
        cmocka_unit_test(offset_taken_but_not_inserted_becomes_a_hole_the_late_insert_cannot_fill),
    };
    return cmocka_run_group_tests(tests, setup, th_svc_teardown);
}
