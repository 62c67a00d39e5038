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

struct cli_work_conf {
    const struct cli_conf *conf;
    const char *queue;
    char *queue_esc; /* percent-encoded (owned) */
    char owner[160];
    int concurrency;
    long lease_s;       /* --lease (0: the queue's, as each claim's answer says) */
    long long max_jobs; /* 0: no limit */
    long idle_exit_s;   /* 0: never */
    long timeout_s;     /* 0: none */
    long grace_s;
    int progress_fd; /* -1: none */
    int verbose;
    char **command; /* argv of COMMAND, NULL-terminated */
};

struct cli_settler;

/* What the claim loop and the job threads share; counters and running under mu. */
struct cli_work_state {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a job thread ends */
    int running;
    long long claimed, succeeded, failed, lost, handed_back, refused;
    struct cli_settler *settler;
};

/* Set from the signal handler: non-zero once SIGTERM/SIGINT arrived (stop claiming); the
 * monotonic millisecond of that moment; non-zero after a second signal (no grace left). */
extern atomic_int cli_work_stop;
extern atomic_int cli_work_kill_now;
long long cli_work_stop_at_ms(void);
/* Stops the worker as SIGTERM does, and makes it exit with code (the first one given). */
void cli_work_fail(int code);
/* Monotonic seconds. */
double cli_work_now(void);

/* One claimed job; the thread owns it and frees it. */
struct cli_job {
    const struct cli_work_conf *wc;
    struct cli_work_state *ws;
    long long id, fence, attempt;
    json_t *payload;   /* owned */
    double lease_from; /* monotonic time the claim was sent: the lease runs from no earlier */
    long lease_s;      /* the lease's length, asked for again by each heartbeat */
};

/* Thread body: runs the job to its end and decrements ws->running. */
void *cli_job_thread(void *arg);

/* Hands a lease back (refunding the attempt) through http; logs a refusal. */
void cli_job_handback(const struct cli_work_conf *wc, struct cli_http *http, long long id,
                      long long fence);

/* The settler thread: collects completions and sends them in batches. */
struct cli_settler *cli_settler_start(const struct cli_work_conf *wc, struct cli_work_state *ws);
/* Queues a completion (result owned by the settler from here on), due before deadline
 * (monotonic seconds). */
void cli_settler_add(struct cli_settler *s, long long id, long long fence, json_t *result,
                     double deadline);
/* Sends what is queued, stops the thread, frees s. */
void cli_settler_stop(struct cli_settler *s);

#endif
