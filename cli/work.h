/* The worker of `rowlock-cli work`, shared between its three files: work.c (options, signals and
 * the claim loop), job.c (one thread per running job: the command, its heartbeats, its
 * settlement) and settle.c (completions of short jobs batched through leases:complete). */
#ifndef CLI_WORK_H
#define CLI_WORK_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "cli/cli.h"
#include "cli/http.h"

struct work_conf {
    const struct cli_conf *conf;
    const char *queue;
    char *queue_esc; /* percent-encoded (owned) */
    char owner[160];
    int concurrency;
    long lease_s;       /* the lease asked for in claims and heartbeats */
    long long max_jobs; /* 0: no limit */
    long idle_exit_s;   /* 0: never */
    long timeout_s;     /* 0: none */
    long grace_s;
    int progress_fd; /* -1: none */
    int verbose;
    char **command; /* argv of COMMAND, NULL-terminated */
};

struct settler;

/* What the claim loop and the job threads share; counters and running under mu. */
struct work_state {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a job thread ends */
    int running;
    long long claimed, succeeded, failed, lost, handed_back, refused;
    struct settler *settler;
};

/* Set from the signal handler: non-zero once SIGTERM/SIGINT arrived (stop claiming); the
 * monotonic millisecond of that moment; non-zero after a second signal (no grace left). */
extern atomic_int work_stop;
extern atomic_int work_kill_now;
long long work_stop_at_ms(void);
/* Stops the worker as SIGTERM does, and makes it exit with code (the first one given). */
void work_fail(int code);
/* Monotonic seconds. */
double work_now(void);

/* One claimed job; the thread owns it and frees it. */
struct job {
    const struct work_conf *wc;
    struct work_state *ws;
    long long id, fence, attempt;
    json_t *payload;   /* owned */
    double lease_from; /* monotonic time the claim was sent: the lease runs from no earlier */
};

/* Thread body: runs the job to its end and decrements ws->running. */
void *job_thread(void *arg);

/* Hands a lease back (refunding the attempt) through http; logs a refusal. */
void job_handback(const struct work_conf *wc, struct cli_http *http, long long id, long long fence);

/* The settler thread: collects completions and sends them in batches. */
struct settler *settler_start(const struct work_conf *wc, struct work_state *ws);
/* Queues a completion (result owned by the settler from here on), due before deadline
 * (monotonic seconds). */
void settler_add(struct settler *s, long long id, long long fence, json_t *result, double deadline);
/* Sends what is queued, stops the thread, frees s. */
void settler_stop(struct settler *s);

#endif
