/* tests/bench/queues/worker.c: the HTTP client of tests/bench/queues.sh. Built by that script
 * (cc -O2 worker.c -lcurl -ljansson -lpthread); not part of the CMake build.
 *
 * worker enqueue BASE QUEUE JOBS BATCH [KEYS|chain|fanin]
 *   POSTs JOBS jobs to BASE/queues/QUEUE/jobs, BATCH a request ({"jobs": [...]}), payloads
 *   {"i": 0} .. {"i": JOBS-1}, one keep-alive connection; with KEYS, job i has the concurrency
 *   key "k<i % KEYS>"; with chain, each request's jobs are a chain (each job's parent the one
 *   before it, by ref); with fanin, the last job of each request has every other as a parent.
 *   Prints "enqueued=N seconds=S".
 *
 * worker work BASE QUEUE JOBS WORKERS MAX_JOBS [TIMEOUT_S]
 *   WORKERS threads, each with its own keep-alive connection (one libcurl easy handle) and owner
 *   id, loop: POST .../leases {"owner", "max_jobs": MAX_JOBS}; with MAX_JOBS 1, settle the job
 *   with POST .../leases/{id}/complete {"owner", "fence"}; with more, settle every claimed job
 *   with one POST .../leases:complete {"owner", "items": [{job_id, fence}...]}. The work itself
 *   is nothing. A thread stops when a claim comes back empty and JOBS jobs have been completed
 *   (by all threads); an empty claim before that (the last jobs are being claimed or settled by
 *   others) is retried after 1 ms, then 2, 4 .. 32 ms, for at most IDLE_S seconds without any
 *   job claimed (then the run fails). The clock runs from the moment every thread is ready to
 *   the last completion answered.
 *   Prints one line of key=value: seconds, completed, jobs_per_s, cpu_s (this process's user and
 *   system CPU time, all of it), requests, claims, empty_claims, settles, conflicts (settlements
 *   refused: 409 or a batch item not "completed"), errors (any other failed request),
 *   executions (jobs handed to a worker), not_once (payload indexes not handed out exactly
 *   once), strays (payloads without a valid index), claim_p50_ms, claim_p99_ms, settle_p50_ms,
 *   settle_p99_ms (latencies as the worker saw them).
 *
 * Exit status: 0 when every request could be made and answered as expected; 1 otherwise. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Empty claims for this long, with jobs still missing, end the run: longer than a lease (the
 * queue's default, 30 s), after which a job a worker lost would be claimable again. */
#define IDLE_S 35

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct buf {
    char *data;
    size_t len, cap;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    struct buf *b = ctx;
    size_t add = size * n;
    if (b->len + add + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + add + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (grown == NULL)
            return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

struct client {
    CURL *h;
    struct curl_slist *headers;
    struct buf body;
    char err[CURL_ERROR_SIZE];
};

static int client_init(struct client *c)
{
    memset(c, 0, sizeof(*c));
    c->h = curl_easy_init();
    if (c->h == NULL)
        return -1;
    /* "Expect:" off: libcurl would otherwise wait for 100-continue before a body over 1 kB */
    c->headers = curl_slist_append(NULL, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, "Expect:");
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->body);
    curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->err);
    curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 60L);
    return 0;
}

static void client_free(struct client *c)
{
    curl_slist_free_all(c->headers);
    curl_easy_cleanup(c->h);
    free(c->body.data);
}

/* POSTs body to url on c's connection; the HTTP status, or -1 when the request failed. The
 * response body is in c->body. */
static long post(struct client *c, const char *url, const char *body)
{
    c->body.len = 0;
    if (c->body.data)
        c->body.data[0] = '\0';
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    CURLcode rc = curl_easy_perform(c->h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "worker: POST %s: %s\n", url, c->err[0] ? c->err : curl_easy_strerror(rc));
        return -1;
    }
    long status = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

/* ---- enqueue ---- */

enum shape { PLAIN, CHAIN, FANIN };

/* The dependencies of job i of a request of n jobs, by shape (refs "j<i>" within the request). */
static void shape_job(json_t *job, enum shape shape, long i, long n)
{
    char ref[32];
    if (shape == PLAIN || n < 2)
        return;
    snprintf(ref, sizeof(ref), "j%ld", i);
    json_object_set_new(job, "ref", json_string(ref));
    json_t *parents = json_array();
    if (shape == CHAIN && i > 0) {
        snprintf(ref, sizeof(ref), "j%ld", i - 1);
        json_array_append_new(parents, json_string(ref));
    }
    for (long k = 0; shape == FANIN && i == n - 1 && k < n - 1; k++) {
        snprintf(ref, sizeof(ref), "j%ld", k);
        json_array_append_new(parents, json_string(ref));
    }
    if (json_array_size(parents) > 0)
        json_object_set_new(job, "parents", parents);
    else
        json_decref(parents);
}

static int enqueue(const char *base, const char *queue, long jobs, long batch, long keys,
                   enum shape shape)
{
    struct client c;
    if (client_init(&c) != 0)
        return 1;
    char url[1024];
    snprintf(url, sizeof(url), "%s/queues/%s/jobs", base, queue);
    double t0 = now_s();
    long done = 0;
    int rc = 0;
    while (done < jobs && rc == 0) {
        long n = jobs - done < batch ? jobs - done : batch;
        json_t *arr = json_array();
        for (long i = 0; i < n; i++) {
            json_t *job = json_pack("{s:{s:I}}", "payload", "i", (json_int_t)(done + i));
            if (keys > 0) {
                char key[32];
                snprintf(key, sizeof(key), "k%ld", (done + i) % keys);
                json_object_set_new(job, "concurrency_key", json_string(key));
            }
            shape_job(job, shape, i, n);
            json_array_append_new(arr, job);
        }
        json_t *b = json_pack("{s:o}", "jobs", arr);
        char *text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        long status = post(&c, url, text);
        free(text);
        json_t *r = status == 201 ? json_loads(c.body.data, 0, NULL) : NULL;
        if (status != 201 || json_array_size(json_object_get(r, "jobs")) != (size_t)n) {
            fprintf(stderr, "worker: enqueue: status %ld: %.300s\n", status,
                    c.body.data ? c.body.data : "");
            rc = 1;
        }
        json_decref(r);
        done += n;
    }
    double secs = now_s() - t0;
    printf("enqueued=%ld seconds=%.3f\n", rc == 0 ? done : 0, secs);
    client_free(&c);
    return rc;
}

/* ---- work ---- */

struct shared {
    const char *base, *queue;
    long jobs, max_jobs;
    double deadline;
    pthread_barrier_t start;
    atomic_long completed;
    _Atomic double last_progress; /* when a claim last handed out jobs */
    atomic_int failed;            /* a thread gave up: the others stop too */
    atomic_uint *execs;           /* per payload index: times a worker was handed it */
    atomic_long strays;           /* payloads without a valid index */
};

struct lat {
    double *v;
    size_t n, cap;
};

static void lat_add(struct lat *l, double ms)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        double *g = realloc(l->v, cap * sizeof(*g));
        if (g == NULL)
            return;
        l->v = g;
        l->cap = cap;
    }
    l->v[l->n++] = ms;
}

struct thread {
    struct shared *s;
    int index;
    pthread_t tid;
    long requests, claims, empty_claims, settles, conflicts, errors, executions;
    double last_done;
    struct lat claim_ms, settle_ms;
};

static void *work_thread(void *arg)
{
    struct thread *t = arg;
    struct shared *s = t->s;
    struct client c;
    char owner[64], url_claim[1024], url_batch[1024], url[1024];
    snprintf(owner, sizeof(owner), "bench-%ld-%d", (long)getpid(), t->index);
    snprintf(url_claim, sizeof(url_claim), "%s/queues/%s/leases", s->base, s->queue);
    snprintf(url_batch, sizeof(url_batch), "%s/queues/%s/leases:complete", s->base, s->queue);
    char claim_body[256];
    snprintf(claim_body, sizeof(claim_body), "{\"owner\":\"%s\",\"max_jobs\":%ld}", owner,
             s->max_jobs);
    int ok = client_init(&c) == 0;
    unsigned backoff = 0;
    if (!ok)
        atomic_store(&s->failed, 1);
    pthread_barrier_wait(&s->start);
    while (ok && !atomic_load(&s->failed)) {
        if (now_s() > s->deadline) {
            fprintf(stderr, "worker: timed out with %ld of %ld jobs completed\n",
                    atomic_load(&s->completed), s->jobs);
            ok = 0;
            break;
        }
        double t0 = now_s();
        long status = post(&c, url_claim, claim_body);
        lat_add(&t->claim_ms, (now_s() - t0) * 1e3);
        t->requests++;
        json_t *r = status == 200 ? json_loads(c.body.data, 0, NULL) : NULL;
        json_t *leases = json_object_get(r, "leases");
        if (!json_is_array(leases)) {
            fprintf(stderr, "worker: claim: status %ld: %.300s\n", status,
                    c.body.data ? c.body.data : "");
            t->errors++;
            json_decref(r);
            ok = 0;
            break;
        }
        size_t n = json_array_size(leases);
        t->claims++;
        if (n == 0) {
            json_decref(r);
            t->empty_claims++;
            if (atomic_load(&s->completed) >= s->jobs)
                break;
            if (now_s() - atomic_load(&s->last_progress) > IDLE_S) {
                fprintf(stderr,
                        "worker: nothing to claim for %d s with %ld of %ld jobs completed\n",
                        IDLE_S, atomic_load(&s->completed), s->jobs);
                ok = 0;
                break;
            }
            /* the last jobs are with other workers: back off (1, 2, 4 .. 32 ms), so that idle
             * workers do not take the CPU the busy ones need; the clock stops at the last
             * completion, not when an idle worker notices it */
            usleep(1000u << (backoff < 5 ? backoff++ : backoff));
            continue;
        }
        backoff = 0;
        atomic_store(&s->last_progress, now_s());
        /* the work: nothing, but count which job this was */
        for (size_t i = 0; i < n; i++) {
            json_t *p = json_object_get(json_array_get(leases, i), "payload");
            json_int_t k = json_integer_value(json_object_get(p, "i"));
            if (json_is_integer(json_object_get(p, "i")) && k >= 0 && k < s->jobs)
                atomic_fetch_add(&s->execs[k], 1);
            else
                atomic_fetch_add(&s->strays, 1);
        }
        t->executions += (long)n;
        long completed = 0;
        char *text;
        if (s->max_jobs == 1) {
            json_t *l = json_array_get(leases, 0);
            snprintf(url, sizeof(url), "%s/queues/%s/leases/%" JSON_INTEGER_FORMAT "/complete",
                     s->base, s->queue, json_integer_value(json_object_get(l, "job_id")));
            json_t *b =
                json_pack("{s:s, s:O}", "owner", owner, "fence", json_object_get(l, "fence"));
            text = json_dumps(b, JSON_COMPACT);
            json_decref(b);
            t0 = now_s();
            status = post(&c, url, text);
            lat_add(&t->settle_ms, (now_s() - t0) * 1e3);
            if (status == 200)
                completed = 1;
            else if (status == 409)
                t->conflicts++;
            else {
                fprintf(stderr, "worker: complete: status %ld: %.300s\n", status,
                        c.body.data ? c.body.data : "");
                t->errors++;
                ok = 0;
            }
        } else {
            json_t *items = json_array();
            for (size_t i = 0; i < n; i++) {
                json_t *l = json_array_get(leases, i);
                json_array_append_new(items, json_pack("{s:O, s:O}", "job_id",
                                                       json_object_get(l, "job_id"), "fence",
                                                       json_object_get(l, "fence")));
            }
            json_t *b = json_pack("{s:s, s:o}", "owner", owner, "items", items);
            text = json_dumps(b, JSON_COMPACT);
            json_decref(b);
            t0 = now_s();
            status = post(&c, url_batch, text);
            lat_add(&t->settle_ms, (now_s() - t0) * 1e3);
            json_t *a = status == 200 ? json_loads(c.body.data, 0, NULL) : NULL;
            json_t *done = json_object_get(a, "completed");
            if (json_is_integer(done)) {
                completed = (long)json_integer_value(done);
                t->conflicts += (long)n - completed;
            } else {
                fprintf(stderr, "worker: batch complete: status %ld: %.300s\n", status,
                        c.body.data ? c.body.data : "");
                t->errors++;
                ok = 0;
            }
            json_decref(a);
        }
        free(text);
        json_decref(r);
        t->requests++;
        t->settles++;
        if (completed > 0) {
            atomic_fetch_add(&s->completed, completed);
            t->last_done = now_s();
        }
    }
    if (!ok)
        atomic_store(&s->failed, 1);
    client_free(&c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q quantile of every thread's latencies of one kind (offset of the struct lat). */
static double quantile(struct thread *ts, int nt, size_t off, double q)
{
    size_t total = 0;
    for (int i = 0; i < nt; i++)
        total += ((struct lat *)((char *)&ts[i] + off))->n;
    if (total == 0)
        return 0;
    double *all = malloc(total * sizeof(*all));
    if (all == NULL)
        return 0;
    size_t k = 0;
    for (int i = 0; i < nt; i++) {
        struct lat *l = (struct lat *)((char *)&ts[i] + off);
        memcpy(all + k, l->v, l->n * sizeof(*all));
        k += l->n;
    }
    qsort(all, total, sizeof(*all), cmp_double);
    size_t idx = (size_t)(q * (double)(total - 1));
    double v = all[idx];
    free(all);
    return v;
}

static int work(const char *base, const char *queue, long jobs, int workers, long max_jobs,
                double timeout_s)
{
    struct shared s = {.base = base, .queue = queue, .jobs = jobs, .max_jobs = max_jobs};
    s.execs = calloc((size_t)jobs, sizeof(*s.execs));
    struct thread *ts = calloc((size_t)workers, sizeof(*ts));
    if (s.execs == NULL || ts == NULL)
        return 1;
    pthread_barrier_init(&s.start, NULL, (unsigned)workers + 1);
    s.deadline = now_s() + timeout_s + 3600; /* set for real once every thread is ready */
    for (int i = 0; i < workers; i++) {
        ts[i].s = &s;
        ts[i].index = i;
        if (pthread_create(&ts[i].tid, NULL, work_thread, &ts[i]) != 0) {
            fprintf(stderr, "worker: cannot start thread %d\n", i);
            return 1;
        }
    }
    s.deadline = now_s() + timeout_s;
    atomic_store(&s.last_progress, now_s());
    pthread_barrier_wait(&s.start);
    double t0 = now_s();
    for (int i = 0; i < workers; i++)
        pthread_join(ts[i].tid, NULL);
    double end = t0;
    struct thread sum = {0};
    for (int i = 0; i < workers; i++) {
        if (ts[i].last_done > end)
            end = ts[i].last_done;
        sum.requests += ts[i].requests;
        sum.claims += ts[i].claims;
        sum.empty_claims += ts[i].empty_claims;
        sum.settles += ts[i].settles;
        sum.conflicts += ts[i].conflicts;
        sum.errors += ts[i].errors;
        sum.executions += ts[i].executions;
    }
    long not_once = 0;
    for (long k = 0; k < jobs; k++)
        not_once += atomic_load(&s.execs[k]) != 1;
    long completed = atomic_load(&s.completed);
    double secs = end - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    printf("seconds=%.3f completed=%ld jobs_per_s=%.1f cpu_s=%.3f requests=%ld claims=%ld "
           "empty_claims=%ld settles=%ld conflicts=%ld errors=%ld executions=%ld not_once=%ld "
           "strays=%ld claim_p50_ms=%.2f claim_p99_ms=%.2f settle_p50_ms=%.2f "
           "settle_p99_ms=%.2f\n",
           secs, completed, secs > 0 ? (double)completed / secs : 0, cpu, sum.requests, sum.claims,
           sum.empty_claims, sum.settles, sum.conflicts, sum.errors, sum.executions, not_once,
           atomic_load(&s.strays), quantile(ts, workers, offsetof(struct thread, claim_ms), 0.5),
           quantile(ts, workers, offsetof(struct thread, claim_ms), 0.99),
           quantile(ts, workers, offsetof(struct thread, settle_ms), 0.5),
           quantile(ts, workers, offsetof(struct thread, settle_ms), 0.99));
    int failed = atomic_load(&s.failed) || completed != jobs;
    for (int i = 0; i < workers; i++) {
        free(ts[i].claim_ms.v);
        free(ts[i].settle_ms.v);
    }
    free(ts);
    free(s.execs);
    return failed;
}

static long arg_long(const char *v, const char *name, long min)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < min) {
        fprintf(stderr, "worker: %s must be an integer >= %ld, not '%s'\n", name, min, v);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return 1;
    int rc;
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "enqueue") == 0) {
        const char *last = argc == 7 ? argv[6] : "";
        enum shape shape = strcmp(last, "chain") == 0   ? CHAIN
                           : strcmp(last, "fanin") == 0 ? FANIN
                                                        : PLAIN;
        rc = enqueue(argv[2], argv[3], arg_long(argv[4], "JOBS", 1), arg_long(argv[5], "BATCH", 1),
                     argc == 7 && shape == PLAIN ? arg_long(argv[6], "KEYS", 1) : 0, shape);
    } else if ((argc == 7 || argc == 8) && strcmp(argv[1], "work") == 0) {
        rc = work(argv[2], argv[3], arg_long(argv[4], "JOBS", 1),
                  (int)arg_long(argv[5], "WORKERS", 1), arg_long(argv[6], "MAX_JOBS", 1),
                  argc == 8 ? (double)arg_long(argv[7], "TIMEOUT_S", 1) : 600.0);
    } else {
        fprintf(stderr, "usage: worker enqueue BASE QUEUE JOBS BATCH [KEYS|chain|fanin]\n"
                        "       worker work BASE QUEUE JOBS WORKERS MAX_JOBS [TIMEOUT_S]\n");
        rc = 2;
    }
    curl_global_cleanup();
    return rc;
}
