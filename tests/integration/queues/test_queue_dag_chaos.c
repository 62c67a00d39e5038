/* Dependencies under chaos: random DAGs run by racing workers on three rowlock processes, one
 * killed with SIGKILL mid-run and started again, end exactly as a model of the graph says. Each
 * DAG (DAG_JOBS jobs, one enqueue request, its queue one of QUEUES in turn) names for each job 0
 * to 4 parents among its earlier jobs, sometimes also one by id in an earlier DAG (another
 * queue, often still running as the child is linked); a job's policy is cancel or run. Some jobs
 * are doomed (max_attempts 1, failed with no retry), some have their first lease abandoned under
 * a short claim (it expires and is taken over: they have attempts left). The workers claim
 * batches from the processes in turn and, at each claim, read the job's parents over HTTP: every
 * one succeeded (cancel) or ended (run), and none settled after the claim answered by the
 * workers' own records. After the run drains (nothing pending or processing), the database:
 *   - every job ended in the model's state: failed when doomed; cancelled when a parent of a
 *     cancel child failed or was cancelled; succeeded otherwise. None left waiting or pending.
 *   - no attempt of any job was claimed before each parent's end (claimed_at vs finished_at),
 *     and a cancelled job never ran; each success has one completed attempt, each completion was
 *     answered 200 once; a cancelled job names a parent that failed or was cancelled.
 * A job left waiting when all its parents ended is counted by how it was linked: to a parent by
 * id (linked to a job that existed, perhaps ending as the link commits) or to parents of its
 * own batch only (linked as they were made: only parents ending at once can lose it).
 * The seed (ROWLOCK_TEST_SEED, else the clock) is printed: it fixes the graphs and the doomed
 * and abandoned sets; the interleaving is the run's. Against rowlock-unlocked (a child's count
 * taken down from its statement's snapshot) the same scenario leaves children of the
 * second kind waiting: the second test shows the check catches a lost release. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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

#define PROCESSES   3
#define QUEUES      3
#define DAGS        8
#define DAG_JOBS    500
#define MAX_PARENTS 5
#define WORKERS     8
#define DRAIN_S     90

/* One job of the scenario: its graph (parents as global indices), its fate in the model, and
 * what the workers saw of it. */
struct job {
    int queue, doomed, expire, run_policy, nparents;
    int parent[MAX_PARENTS];
    const char *model; /* succeeded, failed or cancelled */
    int64_t id;
    atomic_int accepted;  /* settlements answered 200 */
    atomic_int uncertain; /* settlements whose answer was lost (a transport error) */
    atomic_int abandoned;
    _Atomic double settled_sent; /* when the settlement answered 200 was sent; 0: none */
};

struct scenario {
    const char *binary;
    unsigned seed;
    int dags;
    struct job *jobs;
    struct th_service svc[PROCESSES];
    _Atomic int ports[PROCESSES]; /* 0 while the process is down */
    atomic_int stop, enqueued;
    atomic_int claims, leases, early, parent_reads, abandoned, refused;
    char early_note[256];
    pthread_mutex_t mu;
};

static const char *const env[] = {"ROWLOCK_JANITOR_INTERVAL_MS=200", NULL};

static const char *queue_name(int q)
{
    static const char *const names[QUEUES] = {"dag0", "dag1", "dag2"};
    return names[q];
}

/* ---- the graphs and the model ---- */

static int ended_badly(const struct job *p)
{
    return strcmp(p->model, "succeeded") != 0;
}

/* Draws DAG d's jobs (global indices d * DAG_JOBS ...) and their model states, in index order
 * (every parent has a smaller index, so its state is known). */
static void draw_dag(struct scenario *s, int d, unsigned *seed)
{
    for (int k = 0; k < DAG_JOBS; k++) {
        int i = d * DAG_JOBS + k;
        struct job *j = &s->jobs[i];
        j->queue = d % QUEUES;
        int roll = rand_r(seed) % 100;
        j->doomed = roll < 4;
        j->expire = !j->doomed && roll >= 96;
        j->run_policy = rand_r(seed) % 4 == 0;
        int want = k == 0 ? 0 : rand_r(seed) % 5;
        for (int t = 0; t < want && j->nparents < MAX_PARENTS - 1; t++) {
            /* mostly recent jobs: long chains as well as wide fan-in */
            int span = k < 40 ? k : 40 + rand_r(seed) % (k - 39);
            int p = d * DAG_JOBS + k - 1 - rand_r(seed) % span;
            int dup = 0;
            for (int u = 0; u < j->nparents; u++)
                dup |= j->parent[u] == p;
            if (!dup)
                j->parent[j->nparents++] = p;
        }
        /* by id in an earlier DAG (the one before, often still running), for a cancel child only
         * one that succeeds in the model: one already failed would refuse the whole batch */
        if (d > 0 && rand_r(seed) % 6 == 0) {
            int p = (d - 1 - (rand_r(seed) % 3 == 0 ? rand_r(seed) % d : 0)) * DAG_JOBS +
                    rand_r(seed) % DAG_JOBS;
            if (j->run_policy || !ended_badly(&s->jobs[p]))
                j->parent[j->nparents++] = p;
        }
        j->model = j->doomed ? "failed" : "succeeded";
        for (int u = 0; u < j->nparents; u++)
            if (!j->run_policy && ended_badly(&s->jobs[j->parent[u]]))
                j->model = "cancelled";
    }
}

/* DAG d as one enqueue body (the caller frees it): parents of the DAG by ref, earlier by id. */
static char *dag_body(const struct scenario *s, int d)
{
    json_t *jobs = json_array();
    for (int k = 0; k < DAG_JOBS; k++) {
        int i = d * DAG_JOBS + k;
        const struct job *j = &s->jobs[i];
        char ref[16];
        snprintf(ref, sizeof(ref), "j%d", i);
        json_t *parents = json_array();
        for (int u = 0; u < j->nparents; u++) {
            int p = j->parent[u];
            char pref[16];
            snprintf(pref, sizeof(pref), "j%d", p);
            json_array_append_new(parents, p / DAG_JOBS == d ? json_string(pref)
                                                             : json_integer(s->jobs[p].id));
        }
        json_t *o =
            json_pack("{s:s, s:{s:i, s:b, s:b}, s:i, s:s}", "ref", ref, "payload", "i", i, "doomed",
                      j->doomed, "expire", j->expire, "max_attempts", j->doomed ? 1 : 10,
                      "on_parent_failure", j->run_policy ? "run" : "cancel");
        if (j->nparents > 0)
            json_object_set_new(o, "parents", parents);
        else
            json_decref(parents);
        json_array_append_new(jobs, o);
    }
    json_t *batch = json_pack("{s:o}", "jobs", jobs);
    char *text = json_dumps(batch, 0);
    json_decref(batch);
    return text;
}

/* ---- the workers ---- */

static int live_port(struct scenario *s, unsigned *seed)
{
    for (;;) {
        int p = atomic_load(&s->ports[rand_r(seed) % PROCESSES]);
        if (p != 0)
            return p;
    }
}

static void note_early(struct scenario *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note_early(struct scenario *s, const char *fmt, ...)
{
    if (atomic_fetch_add(&s->early, 1) == 0) {
        va_list ap;
        va_start(ap, fmt);
        pthread_mutex_lock(&s->mu);
        vsnprintf(s->early_note, sizeof(s->early_note), fmt, ap);
        pthread_mutex_unlock(&s->mu);
        va_end(ap);
    }
}

/* At the claim of job i (answered at got): its parents, read over HTTP, all succeeded (policy
 * cancel) or ended (run), and none of them settled by a worker after got. */
static void check_parents(struct scenario *s, struct th_client *c, unsigned *seed, int i,
                          double got)
{
    const struct job *j = &s->jobs[i];
    for (int u = 0; u < j->nparents; u++) {
        double sent = atomic_load(&s->jobs[j->parent[u]].settled_sent);
        if (sent > got)
            note_early(s, "job %lld claimed %.6f before its parent %lld was settled at %.6f",
                       (long long)j->id, got, (long long)s->jobs[j->parent[u]].id, sent);
    }
    if (j->nparents == 0)
        return;
    char path[160];
    snprintf(path, sizeof(path), "/queues/%s/jobs/%lld/parents", queue_name(j->queue),
             (long long)j->id);
    json_t *out = NULL;
    if (th_client_call_port(c, live_port(s, seed), "GET", path, NULL, &out) != 200) {
        json_decref(out);
        return; /* a process killed under the read: the database is judged afterwards */
    }
    atomic_fetch_add(&s->parent_reads, 1);
    json_t *ps = json_object_get(out, "parents"), *p;
    size_t k;
    if ((int)json_array_size(ps) != j->nparents)
        note_early(s, "job %lld: %zu parents read, %d named", (long long)j->id, json_array_size(ps),
                   j->nparents);
    json_array_foreach(ps, k, p)
    {
        const char *st = json_string_value(json_object_get(p, "state"));
        int ok = st != NULL &&
                 (strcmp(st, "succeeded") == 0 ||
                  (j->run_policy && (strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)));
        if (!ok)
            note_early(s, "job %lld (policy %s) claimed while its parent %lld is %s",
                       (long long)j->id, j->run_policy ? "run" : "cancel",
                       (long long)json_integer_value(json_object_get(p, "id")), st ? st : "(none)");
    }
    json_decref(out);
}

/* Completes (result {"job": id}) or fails for good (doomed) job i's lease; a transport error
 * (the process killed) is retried on another process, and an answer lost so is uncertain. */
static void settle(struct scenario *s, struct th_client *c, unsigned *seed, int i, int64_t fence,
                   const char *owner)
{
    struct job *j = &s->jobs[i];
    char path[160], body[200];
    snprintf(path, sizeof(path), "/queues/%s/leases/%lld/%s", queue_name(j->queue),
             (long long)j->id, j->doomed ? "fail" : "complete");
    if (j->doomed)
        snprintf(body, sizeof(body),
                 "{\"owner\":\"%s\",\"fence\":%lld,\"error\":\"doomed\",\"retry\":false}", owner,
                 (long long)fence);
    else
        snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"fence\":%lld,\"result\":{\"job\":%lld}}",
                 owner, (long long)fence, (long long)j->id);
    for (int tries = 0; tries < 4; tries++) {
        double sent = th_now();
        json_t *out = NULL;
        long st = th_client_call_port(c, live_port(s, seed), "POST", path, body, &out);
        json_decref(out);
        if (st == 200) {
            atomic_fetch_add(&j->accepted, 1);
            atomic_store(&j->settled_sent, sent);
            return;
        }
        if (st != -1) {
            atomic_fetch_add(&s->refused, 1); /* the lease ran out first: it runs again */
            return;
        }
        atomic_fetch_add(&j->uncertain, 1);
        usleep(50000);
    }
}

static void *worker(void *arg)
{
    struct scenario *s = arg;
    unsigned seed = s->seed ^ (unsigned)(uintptr_t)pthread_self();
    struct th_client c;
    th_client_init(&c);
    char owner[32], path[128], body[160];
    snprintf(owner, sizeof(owner), "w%u", seed);
    while (!atomic_load(&s->stop)) {
        int q = rand_r(&seed) % QUEUES, brief = rand_r(&seed) % 5 == 0;
        snprintf(path, sizeof(path), "/queues/%s/leases", queue_name(q));
        snprintf(body, sizeof(body), "{\"owner\":\"%s\",\"max_jobs\":%d,\"lease_seconds\":%d}",
                 owner, 1 + rand_r(&seed) % 8, brief ? 1 : 8);
        json_t *out = NULL;
        long st = th_client_call_port(&c, live_port(s, &seed), "POST", path, body, &out);
        double got = th_now();
        atomic_fetch_add(&s->claims, 1);
        json_t *leases = json_object_get(out, "leases"), *l;
        if (st != 200 || json_array_size(leases) == 0) {
            json_decref(out);
            usleep(20000);
            continue;
        }
        size_t k;
        json_array_foreach(leases, k, l)
        {
            int i = (int)json_integer_value(json_object_get(json_object_get(l, "payload"), "i"));
            int64_t fence = json_integer_value(json_object_get(l, "fence"));
            atomic_fetch_add(&s->leases, 1);
            /* claimed before the enqueue's answer was read: wait for its ids */
            while (i >= 0 && i < s->dags * DAG_JOBS && atomic_load(&s->enqueued) <= i / DAG_JOBS)
                usleep(1000);
            if (i < 0 || i >= s->dags * DAG_JOBS ||
                json_integer_value(json_object_get(l, "job_id")) != s->jobs[i].id) {
                note_early(s, "a lease of an unknown job: payload %d", i);
                continue;
            }
            check_parents(s, &c, &seed, i, got);
            if (s->jobs[i].expire && brief &&
                json_integer_value(json_object_get(l, "attempt")) == 1) {
                atomic_fetch_add(&s->jobs[i].abandoned, 1);
                atomic_fetch_add(&s->abandoned, 1);
                continue; /* its lease runs out and is taken over */
            }
            settle(s, &c, &seed, i, fence, owner);
        }
        json_decref(out);
    }
    th_client_free(&c);
    return NULL;
}

/* ---- the run ---- */

/* Enqueues every DAG through process 0 (never killed: an enqueue is not retried) while the
 * workers run, and kills process 1 with SIGKILL after the third, starting it again soon. */
static void enqueue_and_kill(struct scenario *s)
{
    for (int d = 0; d < s->dags; d++) {
        char *text = dag_body(s, d), path[64];
        snprintf(path, sizeof(path), "/queues/%s/jobs", queue_name(d % QUEUES));
        json_t *out = th_call(s->svc[0].port, "POST", path, text, 201);
        free(text);
        json_t *made = json_object_get(out, "jobs");
        assert_int_equal(json_array_size(made), DAG_JOBS);
        for (int k = 0; k < DAG_JOBS; k++)
            s->jobs[d * DAG_JOBS + k].id =
                json_integer_value(json_object_get(json_array_get(made, (size_t)k), "id"));
        json_decref(out);
        atomic_store(&s->enqueued, d + 1);
        usleep(300000);
        if (d == 2) {
            atomic_store(&s->ports[1], 0);
            th_service_signal(&s->svc[1], SIGKILL);
            assert_int_equal(th_service_wait(&s->svc[1], 10), -1);
            usleep(300000);
            assert_int_equal(th_service_start_binary(&s->svc[1], s->binary, th_svc_dburl, env), 0);
            atomic_store(&s->ports[1], s->svc[1].port);
        }
    }
}

/* Waits until no job is pending or processing, twice 1.5 s apart (longer than a brief lease),
 * or DRAIN_S passed; returns the seconds it took. */
static double drain(void)
{
    double from = th_now();
    int quiet = 0;
    while (quiet < 2 && th_now() - from < DRAIN_S) {
        usleep(quiet ? 1500000 : 200000);
        quiet = th_svc_sql_int("SELECT count(*) FROM rowlock.jobs WHERE state IN ('pending', "
                               "'processing')") == 0
                    ? quiet + 1
                    : 0;
    }
    return th_now() - from;
}

/* ---- the verdict ---- */

struct verdict {
    /* jobs left waiting although every parent ended: with a parent by id (linked to a job
     * that existed), with parents of their own batch only */
    int stuck_linked, stuck_batch;
    int wrong_state, left_waiting, left_open, early_attempts, ran_cancelled, completions, accepted,
        bad_cause, expired, cancelled, run_after_failure;
};

static void judge(struct scenario *s, struct verdict *v)
{
    memset(v, 0, sizeof(*v));
    PGresult *r = th_sql(
        th_svc_pg(),
        "SELECT (b.payload->>'i')::int, j.state, (SELECT count(*) FROM rowlock.job_attempt_history "
        "h WHERE "
        "h.job_id = j.id), (SELECT count(*) FROM rowlock.job_attempt_history h WHERE h.job_id = "
        "j.id AND h.outcome = 'completed'), coalesce((SELECT pb.payload->>'i' FROM "
        "rowlock.job_bodies pb WHERE pb.job_id = (b.last_error->>'parent_failed')::bigint), "
        "'-1'), "
        "(SELECT count(*) FROM rowlock.job_attempt_history h, unnest(j.parents) p(id) JOIN "
        "rowlock.jobs pj ON pj.id = p.id WHERE h.job_id = j.id AND (pj.finished_at IS NULL OR "
        "h.claimed_at < pj.finished_at)), (SELECT count(*) FROM rowlock.job_attempt_history h "
        "WHERE h.job_id = j.id AND h.outcome = 'lease_expired') FROM rowlock.jobs j JOIN "
        "rowlock.job_bodies b ON b.job_id = j.id ORDER BY j.id");
    int n = PQntuples(r), shown = 0;
    assert_int_equal(n, s->dags * DAG_JOBS);
    char *ended = calloc((size_t)n, 1), *waiting = calloc((size_t)n, 1);
    assert_true(ended != NULL && waiting != NULL);
    for (int row = 0; row < n; row++) {
        int i = atoi(PQgetvalue(r, row, 0));
        assert_true(i >= 0 && i < n);
        struct job *j = &s->jobs[i];
        const char *st = PQgetvalue(r, row, 1);
        long attempts = atol(PQgetvalue(r, row, 2)), completed = atol(PQgetvalue(r, row, 3));
        const char *cause = PQgetvalue(r, row, 4);
        v->early_attempts += atoi(PQgetvalue(r, row, 5));
        v->expired += atoi(PQgetvalue(r, row, 6));
        v->left_waiting += waiting[i] = strcmp(st, "waiting") == 0;
        ended[i] = strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
                   strcmp(st, "cancelled") == 0;
        v->left_open += strcmp(st, "pending") == 0 || strcmp(st, "processing") == 0;
        if (strcmp(st, j->model) != 0) {
            v->wrong_state++;
            if (shown++ < 5) {
                print_message("job %lld (index %d, policy %s, doomed %d) is %s, the model says "
                              "%s; its parents, as the model ends them:",
                              (long long)j->id, i, j->run_policy ? "run" : "cancel", j->doomed, st,
                              j->model);
                for (int u = 0; u < j->nparents; u++)
                    print_message(" %lld (%s)", (long long)s->jobs[j->parent[u]].id,
                                  s->jobs[j->parent[u]].model);
                print_message("\n");
            }
        }
        if (strcmp(st, "cancelled") == 0) {
            v->cancelled++;
            v->ran_cancelled += attempts > 0;
            int p = atoi(cause), named = 0;
            for (int u = 0; u < j->nparents; u++)
                named |= j->parent[u] == p;
            v->bad_cause += !(named && ended_badly(&s->jobs[p]));
        }
        if (strcmp(st, "succeeded") == 0) {
            v->completions += completed != 1;
            /* answered once, or its answer lost to the kill */
            int ok = atomic_load(&j->accepted) == 1 ||
                     (atomic_load(&j->accepted) == 0 && atomic_load(&j->uncertain) > 0);
            v->accepted += !ok;
            for (int u = 0; u < j->nparents; u++)
                v->run_after_failure += j->run_policy && ended_badly(&s->jobs[j->parent[u]]);
        } else {
            v->completions += completed != 0;
            v->accepted += strcmp(st, "failed") != 0 && atomic_load(&j->accepted) != 0;
        }
    }
    PQclear(r);
    for (int i = 0; i < n; i++) {
        int all = waiting[i], linked = 0;
        for (int u = 0; u < s->jobs[i].nparents; u++) {
            all &= ended[s->jobs[i].parent[u]];
            linked |= s->jobs[i].parent[u] / DAG_JOBS != i / DAG_JOBS;
        }
        if (all && linked)
            v->stuck_linked++;
        else if (all)
            v->stuck_batch++;
    }
    free(ended);
    free(waiting);
}

/* Runs the scenario on three processes of binary, on a fresh database; fills v. */
static void run_scenario(const char *binary, const char *db, int dags, struct verdict *v)
{
    const char *given = getenv("ROWLOCK_TEST_SEED");
    struct scenario *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->binary = binary;
    s->dags = dags;
    s->seed = given != NULL ? (unsigned)strtoul(given, NULL, 10) : (unsigned)(th_now() * 1e3);
    s->jobs = calloc((size_t)dags * DAG_JOBS, sizeof(*s->jobs));
    assert_non_null(s->jobs);
    pthread_mutex_init(&s->mu, NULL);
    print_message("%s: seed %u (replay the graphs with ROWLOCK_TEST_SEED=%u)\n", binary, s->seed,
                  s->seed);
    unsigned seed = s->seed;
    for (int d = 0; d < dags; d++)
        draw_dag(s, d, &seed);
    assert_int_equal(th_svc_db(db), 0);
    for (int p = 0; p < PROCESSES; p++) {
        assert_int_equal(th_service_start_binary(&s->svc[p], binary, th_svc_dburl, env), 0);
        atomic_store(&s->ports[p], s->svc[p].port);
    }
    for (int q = 0; q < QUEUES; q++) {
        char path[64];
        snprintf(path, sizeof(path), "/queues/%s", queue_name(q));
        json_decref(th_call(s->svc[0].port, "PUT", path, "{}", 201));
    }
    double from = th_now();
    pthread_t t[WORKERS];
    for (int w = 0; w < WORKERS; w++)
        assert_int_equal(pthread_create(&t[w], NULL, worker, s), 0);
    enqueue_and_kill(s);
    double drained = drain();
    atomic_store(&s->stop, 1);
    for (int w = 0; w < WORKERS; w++)
        pthread_join(t[w], NULL);
    judge(s, v);
    print_message("%d jobs in %d DAGs: %.1f s (drained in %.1f s); %d claims, %d leases, %d "
                  "parent reads, %d abandoned, %d settlements refused; %d leases expired, %d "
                  "jobs cancelled, %d run after a failed parent\n",
                  dags * DAG_JOBS, dags, th_now() - from, drained, atomic_load(&s->claims),
                  atomic_load(&s->leases), atomic_load(&s->parent_reads),
                  atomic_load(&s->abandoned), atomic_load(&s->refused), v->expired, v->cancelled,
                  v->run_after_failure);
    print_message("left waiting with every parent ended: %d with a parent by id, %d with "
                  "parents of their batch only\n",
                  v->stuck_linked, v->stuck_batch);
    print_message("verdict: %d in a state the model does not give, %d left waiting, %d pending "
                  "or processing, %d attempts claimed before a parent ended, %d cancelled jobs "
                  "that ran, %d successes without one completed attempt, %d completions not "
                  "answered once, %d cancelled naming no failed parent; workers saw %d claims "
                  "early%s%s\n",
                  v->wrong_state, v->left_waiting, v->left_open, v->early_attempts,
                  v->ran_cancelled, v->completions, v->accepted, v->bad_cause,
                  atomic_load(&s->early), s->early_note[0] ? ": " : "", s->early_note);
    v->early_attempts += atomic_load(&s->early);
    for (int p = 0; p < PROCESSES; p++)
        assert_int_equal(th_service_stop(&s->svc[p]), 0);
    assert_int_equal(th_svc_teardown(NULL), 0); /* th_svc_pg's session is this database's */
    pthread_mutex_destroy(&s->mu);
    free(s->jobs);
    free(s);
}

static void random_dags_end_as_their_model_says(void **state)
{
    (void)state;
    struct verdict v;
    run_scenario(ROWLOCK_BINARY, "dagchaos", DAGS, &v);
    assert_int_equal(v.wrong_state, 0);
    assert_int_equal(v.left_waiting, 0);
    assert_int_equal(v.left_open, 0);
    assert_int_equal(v.early_attempts, 0);
    assert_int_equal(v.ran_cancelled, 0);
    assert_int_equal(v.completions, 0);
    assert_int_equal(v.accepted, 0);
    assert_int_equal(v.bad_cause, 0);
    /* the scenario did what it is for */
    assert_true(v.expired > 0);
    assert_true(v.cancelled > 0);
    assert_true(v.run_after_failure > 0);
}

/* The negative control: with the child's count taken down from the statement's snapshot, two
 * parents of one batch ending at once leave their child waiting, and the verdict says so. */
static void counted_from_the_snapshot_children_are_left_waiting(void **state)
{
    (void)state;
    struct verdict v;
    run_scenario(ROWLOCK_UNLOCKED_BINARY, "dagchaos_unlocked", DAGS, &v);
    assert_true(v.stuck_batch > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_dags_end_as_their_model_says),
        cmocka_unit_test(counted_from_the_snapshot_children_are_left_waiting),
    };
    return cmocka_run_group_tests(tests, NULL, th_svc_teardown);
}
