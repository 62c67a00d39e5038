/* A dedupe window under concurrency, over HTTP: enqueues of one key racing a completion that
 * deletes the key's job (its queue keeps no succeeded jobs, succeeded_retention_seconds 0) still
 * give exactly one job in the window, and enqueues of a key never seen, released together, make
 * one job. Each round its own key; four enqueuers (and, in the first case, one completer holding
 * the job's lease) each on a keep-alive connection, released together by a barrier.
 *
 * Interleavings forced: in the gated half of the rounds a SQL session holds the window row of
 * the key (FOR UPDATE); the completion is released first and, once it waits on the row (first
 * in the row's lock queue), the enqueues; once all of them wait, the session lets go. The
 * completion then deletes the job, records final_state in the row and commits before any
 * enqueue takes the row, and every enqueue's statement snapshot predates that commit: the
 * enqueues are decided after the deletion on a snapshot that still shows the job. For a fresh
 * key the session inserts the key's row itself and rolls back once the enqueues wait on its
 * insert, so that all of them then race for the key at once. The other rounds are released
 * free, in whatever order the requests arrive.
 *
 * The verdict, per round: every enqueue answer names the first job (duplicate:true; for a fresh
 * key exactly one duplicate:false), a duplicate racing the completion says processing and kept,
 * or succeeded and not kept, one sent after the completion answered says succeeded and not
 * kept, and so does one more enqueue after the round; a trigger the test installs records every
 * row ever inserted into rowlock.jobs: one for the key. No id the sequence handed out in the
 * round (one per enqueue) but the created job's has a row, and the window row names the job.
 *
 * Negative controls (ROWLOCK_TEST_DEDUPE_BINARY: a rowlock built from a copy of the tree with
 * db/queues.c's st_enqueue broken): DEDUPE_FREE without its "expires_at <= now()" (a key free
 * as soon as no unfinished job holds it) lets an enqueue after the deleting completion take the
 * key: a second job (duplicate:false, a second row in the trigger's record) in every round of
 * the first case. The window upsert's ON CONFLICT DO UPDATE replaced by DO NOTHING (no lock, no
 * row returned for a key taken) makes no second job, but a duplicate after the deletion can no
 * longer name the first job: it answers id 0 and state null. The fresh-key case passes against
 * both: the unfinished job's own unique index (jobs_dedupe) still keeps it to one job. */
#include <curl/curl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness_svc.h"

#define ENQUEUERS    4
#define RACERS       (ENQUEUERS + 1) /* and the completer */
#define DONE_ROUNDS  400             /* the first case; the second half gated */
#define FRESH_ROUNDS 200             /* the second case; the second half gated */
#define GATE_WAIT_S  1.5             /* at most, twice (below the statement timeout, 5 s) */
#define STATE_TEXT   16
#define PRINTED_MAX  8 /* violations printed (all are counted) */

static const char *binary;

/* Every row ever inserted into rowlock.jobs (a job deleted later keeps its record here). */
static const char audit_sql[] =
    "CREATE TABLE public.jobs_seen (id bigint, queue_id bigint, dedupe_key text); "
    "CREATE FUNCTION public.job_seen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    "  INSERT INTO public.jobs_seen VALUES (NEW.id, NEW.queue_id, NEW.dedupe_key); "
    "  RETURN NULL; END $$; "
    "CREATE TRIGGER job_seen AFTER INSERT ON rowlock.jobs "
    "  FOR EACH ROW EXECUTE FUNCTION public.job_seen()";

static int setup(void **state)
{
    (void)state;
    binary = getenv("ROWLOCK_TEST_DEDUPE_BINARY");
    if (binary == NULL || binary[0] == '\0')
        binary = ROWLOCK_BINARY;
    if (th_svc_db("dedupe_race") != 0 ||
        th_service_start_binary(&th_svc, binary, th_svc_dburl, NULL) != 0)
        return -1;
    PQclear(th_sql(th_svc_pg(), audit_sql));
    json_decref(th_svc_call("PUT", "/queues/done",
                            "{\"succeeded_retention_seconds\":0,\"dedupe_window_seconds\":3600}",
                            201));
    json_decref(th_svc_call("PUT", "/queues/fresh", "{\"dedupe_window_seconds\":3600}", 201));
    return 0;
}

/* ---- the racers ---- */

/* One answer: an enqueue's (id, duplicate, state, kept) or the completion's (job_id, state). */
struct answer {
    long status;
    int64_t id;
    int duplicate, kept;
    char state[STATE_TEXT];
    double sent, answered; /* monotonic seconds */
    char body[256];        /* for a failure's message */
};

/* A round, as the main thread sets it up between the barriers (they order the memory). */
struct race {
    pthread_barrier_t start, end;
    int stop, complete;  /* complete: the completer completes this round */
    atomic_int answered; /* requests of this round answered */
    atomic_int go;       /* the enqueuers may send (after the completion, in a gated round) */
    char queue[16], key[32], owner[32];
    int64_t job, fence;
};

struct racer {
    pthread_t thread;
    int i; /* 0 .. ENQUEUERS - 1 enqueue, ENQUEUERS completes */
    struct race *race;
    struct th_client c;
    struct answer a;
};

/* Reads an answer (j borrowed, may be NULL) into a; its id is the member id_member. */
static void answer_read(struct answer *a, long status, json_t *j, const char *id_member)
{
    const char *state = json_string_value(json_object_get(j, "state"));
    a->status = status;
    a->id = json_integer_value(json_object_get(j, id_member));
    a->duplicate = json_is_true(json_object_get(j, "duplicate"));
    a->kept = json_is_true(json_object_get(j, "kept"));
    snprintf(a->state, sizeof(a->state), "%s", state ? state : "");
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    snprintf(a->body, sizeof(a->body), "%s", text ? text : "(not JSON)");
    free(text);
}

/* The racer's request of this round: its enqueue of the key, or the completion of the job. */
static void racer_request(struct racer *k)
{
    struct race *r = k->race;
    char path[96], body[160];
    json_t *j = NULL;
    int enqueue = k->i < ENQUEUERS;
    if (enqueue) {
        snprintf(path, sizeof(path), "/queues/%s/jobs", r->queue);
        snprintf(body, sizeof(body), "{\"payload\":{\"by\":%d},\"dedupe_key\":\"%s\"}", k->i,
                 r->key);
    } else {
        snprintf(path, sizeof(path), "/queues/%s/leases/%" PRId64 "/complete", r->queue, r->job);
        snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"fence\":%" PRId64 "}", r->owner,
                 r->fence);
    }
    k->a.sent = th_now();
    long status = th_client_call(&k->c, "POST", path, body, &j);
    k->a.answered = th_now();
    answer_read(&k->a, status, j, enqueue ? "id" : "job_id");
    json_decref(j);
    atomic_fetch_add(&r->answered, 1);
}

static void *racer_main(void *arg)
{
    struct racer *k = arg;
    th_client_init(&k->c);
    for (;;) {
        pthread_barrier_wait(&k->race->start);
        if (k->race->stop)
            break;
        memset(&k->a, 0, sizeof(k->a));
        while (k->i < ENQUEUERS && !atomic_load(&k->race->go))
            usleep(200);
        if (k->i < ENQUEUERS || k->race->complete)
            racer_request(k);
        pthread_barrier_wait(&k->race->end);
    }
    th_client_free(&k->c);
    return NULL;
}

/* ---- the gate: a SQL session that holds the key while the requests arrive ---- */

/* Sessions of the database (but the gate's) waiting on a lock. */
static int lock_waiters(PGconn *gate)
{
    PGresult *r = PQexec(gate, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                               "current_database() AND wait_event_type = 'Lock' AND pid <> "
                               "pg_backend_pid()");
    int n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return n;
}

/* Holds the key in a transaction of gate: its window row locked (held), or a row of its own
 * inserted for a fresh key (!held). */
static void gate_take(PGconn *gate, const struct race *r, int held)
{
    const char *params[] = {r->queue, r->key};
    PQclear(th_sql(gate, "BEGIN"));
    PGresult *res = PQexecParams(
        gate,
        held ? "SELECT 1 FROM rowlock.job_dedupe d JOIN rowlock.queues q ON q.id = d.queue_id "
               "WHERE q.name = $1 AND d.dedupe_key = $2 FOR UPDATE OF d"
             : "INSERT INTO rowlock.job_dedupe (queue_id, dedupe_key, job_id, expires_at) "
               "SELECT id, $2, 0, now() + interval '1 hour' FROM rowlock.queues WHERE name = $1",
        2, NULL, params, NULL, NULL, 0);
    int rows = PQresultStatus(res) == PGRES_TUPLES_OK ? PQntuples(res) : atoi(PQcmdTuples(res));
    assert_int_equal(rows, 1);
    PQclear(res);
}

/* Polls until want requests wait on the gate or were answered without waiting (a build that
 * takes no lock), or GATE_WAIT_S passed; returns how many wait. */
static int gate_await(PGconn *gate, struct race *r, int want)
{
    double give_up = th_now() + GATE_WAIT_S;
    int n = 0;
    while ((n = lock_waiters(gate)) + atomic_load(&r->answered) < want && th_now() < give_up)
        usleep(1000);
    return n;
}

/* Releases the racers. With a gate: the completer first, and the enqueuers once it waits on
 * the gate (first: 1; 0 when there is no completion); then the key goes (end: COMMIT of the
 * lock, ROLLBACK of the insert) once all want requests wait. Returns whether they all waited (1
 * without a gate). */
static int release(struct race *r, PGconn *gate, const char *end, int first, int want)
{
    int waited = 1;
    atomic_store(&r->answered, 0);
    atomic_store(&r->go, gate == NULL || first == 0);
    pthread_barrier_wait(&r->start);
    if (gate != NULL) {
        gate_await(gate, r, first);
        atomic_store(&r->go, 1);
        waited = gate_await(gate, r, want) >= want;
        PQclear(th_sql(gate, end));
    }
    pthread_barrier_wait(&r->end);
    return waited;
}

/* ---- the driver ---- */

struct run {
    struct race race;
    struct racer racers[RACERS];
    struct th_client c; /* the main thread's */
    PGconn *gate;
    /* racing duplicates that said processing (kept), succeeded (not kept), and those sent after
     * the completion answered; gated rounds where every request waited on the gate */
    int processing, succeeded, after, gated_full;
    /* racing duplicates answered after the completion's answer that still said processing */
    int stale;
    /* what the verdict found: violations, rounds with one, jobs made beyond the key's one */
    int violations, bad_rounds, extra_jobs;
};

static void run_start(struct run *u)
{
    memset(u, 0, sizeof(*u));
    pthread_barrier_init(&u->race.start, NULL, RACERS + 1);
    pthread_barrier_init(&u->race.end, NULL, RACERS + 1);
    th_client_init(&u->c);
    u->gate = th_pg(th_svc_dburl);
    for (int i = 0; i < RACERS; i++) {
        u->racers[i].i = i;
        u->racers[i].race = &u->race;
        assert_int_equal(pthread_create(&u->racers[i].thread, NULL, racer_main, &u->racers[i]), 0);
    }
}

static void run_stop(struct run *u)
{
    u->race.stop = 1;
    pthread_barrier_wait(&u->race.start);
    for (int i = 0; i < RACERS; i++)
        pthread_join(u->racers[i].thread, NULL);
    pthread_barrier_destroy(&u->race.start);
    pthread_barrier_destroy(&u->race.end);
    th_client_free(&u->c);
    PQfinish(u->gate);
}

/* One enqueue of the round's key from the main thread; its answer. */
static struct answer enqueue_once(struct run *u)
{
    char path[64], body[128];
    json_t *j = NULL;
    struct answer a;
    snprintf(path, sizeof(path), "/queues/%s/jobs", u->race.queue);
    snprintf(body, sizeof(body), "{\"payload\":{\"by\":\"main\"},\"dedupe_key\":\"%s\"}",
             u->race.key);
    long status = th_client_call(&u->c, "POST", path, body, &j);
    answer_read(&a, status, j, "id");
    json_decref(j);
    return a;
}

/* Claims the round's job for the round's owner: its fence into the race. */
static void claim_the_job(struct run *u, int round)
{
    char path[64], body[96];
    json_t *j = NULL;
    snprintf(u->race.owner, sizeof(u->race.owner), "worker-%d", round);
    snprintf(path, sizeof(path), "/queues/%s/leases", u->race.queue);
    snprintf(body, sizeof(body), "{\"owner\":\"%s\"}", u->race.owner);
    assert_int_equal(th_client_call(&u->c, "POST", path, body, &j), 200);
    json_t *l = json_array_get(json_object_get(j, "leases"), 0);
    assert_int_equal(json_integer_value(json_object_get(l, "job_id")), u->race.job);
    u->race.fence = json_integer_value(json_object_get(l, "fence"));
    json_decref(j);
}

/* Runs SQL (a printf format) on th_svc_pg; it must succeed. The result is the caller's. */
static PGresult *sql_exec(const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof(sql), fmt, ap);
    va_end(ap);
    return th_sql(th_svc_pg(), sql);
}

static int64_t seq_now(void)
{
    return th_svc_sql_int("SELECT last_value FROM rowlock.jobs_id_seq");
}

/* Records a violation in the round's key: what, and the answer at fault (NULL: none); the
 * first PRINTED_MAX are printed. Returns 1. */
static int violation(struct run *u, const char *what, const struct answer *a)
{
    if (u->violations++ >= PRINTED_MAX)
        return 1;
    fprintf(stderr, "VIOLATION key %s (job %" PRId64 "): %s", u->race.key, u->race.job, what);
    if (a != NULL)
        fprintf(stderr, ": %ld %s", a->status, a->body);
    fprintf(stderr, "\n");
    return 1;
}

/* A racing duplicate of the deleted job: processing and kept (its statement's snapshot
 * predates the deletion), or succeeded and not kept; only the latter once the completion was
 * answered before the enqueue was sent. Returns the violations. */
static int check_racing_duplicate(struct run *u, const struct answer *a, double completed_at)
{
    const struct race *r = &u->race;
    int processing = strcmp(a->state, "processing") == 0 && a->kept;
    int gone = strcmp(a->state, "succeeded") == 0 && !a->kept;
    u->processing += processing;
    u->succeeded += gone;
    u->after += a->sent > completed_at;
    u->stale += processing && a->answered > completed_at;
    if (a->status != 200 || !a->duplicate || a->id != r->job || !(processing || gone))
        return violation(u, "a racing enqueue is not a duplicate of the job", a);
    if (a->sent > completed_at && !gone)
        return violation(u, "an enqueue sent after the completion answered does not see it", a);
    return 0;
}

/* Every id the round drew (from seq) but the job's has no row, ever; the job and its body and
 * history are gone; the window names it, succeeded. Returns the violations; deletes the jobs
 * made by mistake (so that the next round claims its own). */
static int check_done_rows(struct run *u, int64_t seq)
{
    const struct race *r = &u->race;
    int bad = 0;
    int64_t extra =
        th_svc_sql_intf("SELECT count(*) FROM public.jobs_seen WHERE id > %" PRId64, seq);
    u->extra_jobs += (int)extra;
    if (extra > 0 ||
        th_svc_sql_intf("SELECT count(*) FROM rowlock.jobs WHERE id > %" PRId64, seq) > 0)
        bad += violation(u, "a second job was made for the key", NULL);
    if (seq_now() < seq + ENQUEUERS + 1) /* each enqueue drew an id */
        bad += violation(u, "the enqueues drew no id", NULL);
    if (th_svc_sql_intf("SELECT (SELECT count(*) FROM rowlock.jobs WHERE id = %" PRId64
                        ") + (SELECT count(*) FROM rowlock.job_bodies WHERE job_id = %" PRId64
                        ") + (SELECT count(*) FROM rowlock.job_attempts WHERE job_id = %" PRId64
                        ")",
                        r->job, r->job, r->job) != 0)
        bad += violation(u, "the completed job was kept", NULL);
    if (th_svc_sql_intf(
            "SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = '%s' AND job_id = "
            "%" PRId64 " AND final_state = 'succeeded' AND expires_at > now()",
            r->key, r->job) != 1)
        bad += violation(u, "the window does not name the job, succeeded", NULL);
    if (extra > 0)
        PQclear(sql_exec("DELETE FROM rowlock.jobs WHERE id > %" PRId64, seq));
    return bad;
}

/* After the race: the completion's answer, each racing enqueue's, and one enqueue more.
 * Returns the violations. */
static int check_done_answers(struct run *u)
{
    const struct race *r = &u->race;
    const struct answer *done = &u->racers[ENQUEUERS].a;
    int bad = 0;
    if (done->status != 200 || done->id != r->job || strcmp(done->state, "succeeded") != 0)
        bad += violation(u, "the completion", done);
    for (int i = 0; i < ENQUEUERS; i++)
        bad += check_racing_duplicate(u, &u->racers[i].a, done->answered);
    struct answer later = enqueue_once(u);
    if (later.status != 200 || !later.duplicate || later.id != r->job ||
        strcmp(later.state, "succeeded") != 0 || later.kept)
        bad += violation(u, "an enqueue after the round", &later);
    return bad;
}

/* One round of the first case: the key's job enqueued and claimed, then ENQUEUERS enqueues of
 * the key released with its completion (which deletes it), then one enqueue more. */
static void done_round(struct run *u, int round, int gated)
{
    struct race *r = &u->race;
    snprintf(r->queue, sizeof(r->queue), "done");
    snprintf(r->key, sizeof(r->key), "done-%d", round);
    r->complete = 1;
    struct answer first = enqueue_once(u);
    r->job = first.id;
    if (first.status != 201 || first.duplicate) {
        u->bad_rounds += violation(u, "the key's first enqueue", &first);
        return;
    }
    claim_the_job(u, round);
    int64_t seq = seq_now();
    if (gated)
        gate_take(u->gate, r, 1);
    u->gated_full += release(r, gated ? u->gate : NULL, "COMMIT", 1, RACERS) && gated;
    int bad = check_done_answers(u);
    bad += check_done_rows(u, seq);
    u->bad_rounds += bad > 0;
}

static double deleted_succeeded(void)
{
    return th_metric(th_svc.port, "rowlock_queue_jobs_deleted_at_end_total{state=\"succeeded\"}");
}

static void enqueues_racing_a_deleting_completion_name_the_one_job(void **state)
{
    (void)state;
    struct run *u = malloc(sizeof(*u));
    double t0 = th_now(), deleted = deleted_succeeded();
    run_start(u);
    for (int round = 0; round < DONE_ROUNDS; round++)
        done_round(u, round, round >= DONE_ROUNDS / 2);
    run_stop(u);
    fprintf(stderr,
            "%d rounds (%d gated, %d with every request waiting on the gate) in %.2f s; racing "
            "duplicates: %d processing and kept, %d succeeded and not kept, %d sent after the "
            "completion answered (%d answered after it still said processing); %d violations in "
            "%d rounds, %d second jobs\n",
            DONE_ROUNDS, DONE_ROUNDS / 2, u->gated_full, th_now() - t0, u->processing, u->succeeded,
            u->after, u->stale, u->violations, u->bad_rounds, u->extra_jobs);
    assert_int_equal(u->violations, 0);
    assert_int_equal(deleted_succeeded() - deleted, DONE_ROUNDS);
    /* the race was run: both orders were seen, and the gate held the requests */
    assert_true(u->processing > 0 && u->succeeded > 0);
    assert_true(u->gated_full >= DONE_ROUNDS / 4);
    free(u);
}

/* The answers of a fresh key's round: exactly one created the job, every other names it,
 * pending. Its id into *job (0: none). Returns the violations. */
static int check_fresh_answers(struct run *u, int64_t *job)
{
    const struct answer *created = NULL;
    int bad = 0;
    for (int i = 0; i < ENQUEUERS; i++) {
        const struct answer *a = &u->racers[i].a;
        if (a->status == 201 && !a->duplicate && created == NULL)
            created = a;
        else if (a->status != 200 || !a->duplicate || strcmp(a->state, "pending") != 0 || !a->kept)
            bad +=
                violation(u, "a fresh key's enqueue neither created its job nor is a duplicate", a);
    }
    *job = created ? created->id : 0;
    if (created == NULL)
        return bad + violation(u, "no enqueue of a fresh key created its job", NULL);
    for (int i = 0; i < ENQUEUERS; i++)
        if (u->racers[i].a.id != created->id)
            bad += violation(u, "enqueues of one key name two jobs", &u->racers[i].a);
    return bad;
}

/* The rows of a fresh key's round: one job ever inserted since seq, pending, named by the
 * window. Returns the violations. */
static int check_fresh_rows(struct run *u, int64_t seq, int64_t job)
{
    const char *key = u->race.key;
    int bad = 0;
    int64_t made =
        th_svc_sql_intf("SELECT count(*) FROM public.jobs_seen WHERE id > %" PRId64, seq);
    u->extra_jobs += made > 1 ? (int)made - 1 : 0;
    if (made != 1 || th_svc_sql_intf("SELECT count(*) FROM public.jobs_seen WHERE id = %" PRId64
                                     " AND dedupe_key = '%s'",
                                     job, key) != 1)
        bad += violation(u, "not exactly one job was made for the key", NULL);
    if (seq_now() < seq + ENQUEUERS)
        bad += violation(u, "the enqueues drew no id", NULL);
    if (th_svc_sql_intf(
            "SELECT count(*) FROM rowlock.jobs WHERE dedupe_key = '%s' AND id = %" PRId64
            " AND state = 'pending'",
            key, job) != 1)
        bad += violation(u, "the key's job is not pending", NULL);
    if (th_svc_sql_intf(
            "SELECT count(*) FROM rowlock.job_dedupe WHERE dedupe_key = '%s' AND job_id = "
            "%" PRId64,
            key, job) != 1)
        bad += violation(u, "the window does not name the key's job", NULL);
    return bad;
}

/* One round of the second case: ENQUEUERS enqueues of a key never seen, released together. */
static void fresh_round(struct run *u, int round, int gated)
{
    struct race *r = &u->race;
    int64_t job = 0;
    snprintf(r->queue, sizeof(r->queue), "fresh");
    snprintf(r->key, sizeof(r->key), "fresh-%d", round);
    r->complete = 0;
    r->job = 0;
    int64_t seq = seq_now();
    if (gated)
        gate_take(u->gate, r, 0);
    u->gated_full += release(r, gated ? u->gate : NULL, "ROLLBACK", 0, ENQUEUERS) && gated;
    int bad = check_fresh_answers(u, &job);
    bad += check_fresh_rows(u, seq, job);
    u->bad_rounds += bad > 0;
}

static void enqueues_of_a_fresh_key_released_together_make_one_job(void **state)
{
    (void)state;
    struct run *u = malloc(sizeof(*u));
    double t0 = th_now();
    run_start(u);
    for (int round = 0; round < FRESH_ROUNDS; round++)
        fresh_round(u, round, round >= FRESH_ROUNDS / 2);
    run_stop(u);
    fprintf(stderr,
            "%d fresh keys (%d gated, %d with every enqueue waiting on the gate) in %.2f s; %d "
            "violations in %d rounds, %d second jobs\n",
            FRESH_ROUNDS, FRESH_ROUNDS / 2, u->gated_full, th_now() - t0, u->violations,
            u->bad_rounds, u->extra_jobs);
    assert_int_equal(u->violations, 0);
    assert_true(u->gated_full >= FRESH_ROUNDS / 4);
    free(u);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(enqueues_racing_a_deleting_completion_name_the_one_job),
        cmocka_unit_test(enqueues_of_a_fresh_key_released_together_make_one_job),
    };
    int rc = cmocka_run_group_tests(tests, setup, th_svc_teardown);
    curl_global_cleanup();
    return rc;
}
