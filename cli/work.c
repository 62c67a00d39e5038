/* `rowlock-cli work QUEUE -- COMMAND`: options, signals and the claim loop. The loop long-polls
 * claims of up to the free slots and starts one thread per job (job.c); SIGTERM stops claiming,
 * running jobs get --grace seconds, then they are killed and handed back (in job.c), and batched
 * completions are flushed (settle.c) before exit.
 *
 * Threads rather than one poll() loop: each job's life (spawn, heartbeat on a clock, settle) is
 * straight-line code with blocking libcurl calls, and a slow heartbeat or settlement of one job
 * never delays another's; children are started with posix_spawn (safe in a threaded process). */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/work.h"

#define CLAIM_WAIT_MAX 10 /* seconds a claim long-polls: also the longest SIGTERM waits for one */

atomic_int cli_work_stop;
atomic_int cli_work_kill_now;
static _Atomic long long stop_at_ms;

double cli_work_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

long long cli_work_stop_at_ms(void)
{
    return atomic_load(&stop_at_ms);
}

static atomic_int fail_code;

/* Stops claiming and starts the grace clock (the first call only). Async-signal-safe. */
static void work_stop_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    long long zero = 0;
    atomic_compare_exchange_strong(&stop_at_ms, &zero, ms ? ms : 1);
    cli_work_stop = 1;
}

void cli_work_fail(int code)
{
    int zero = 0;
    atomic_compare_exchange_strong(&fail_code, &zero, code);
    work_stop_now();
}

static void on_signal(int sig)
{
    if (cli_work_stop)
        cli_work_kill_now = 1; /* a second signal: no grace left */
    work_stop_now();
}

static void work_usage(FILE *f)
{
    fprintf(f,
            "usage: rowlock-cli work QUEUE [options] -- COMMAND [ARGS...]\n\n"
            "Claims jobs of QUEUE and runs COMMAND once per job: the payload (JSON and a newline)\n"
            "on its stdin, ROWLOCK_JOB_ID, ROWLOCK_JOB_ATTEMPT, ROWLOCK_JOB_FENCE and\n"
            "ROWLOCK_QUEUE in its environment. Exit 0 completes the job with its stdout as the\n"
            "result (JSON, else a string); any other end fails it with the exit status and the\n"
            "tail of stderr (retried while attempts are left). The lease is heartbeaten every\n"
            "third of its length; when a heartbeat is refused (the lease was lost) the command's\n"
            "process group is killed; when an operator cancelled the job (409 job_cancelled) it\n"
            "gets SIGTERM, then SIGKILL 2 s later. SIGTERM/SIGINT stop claiming, let running\n"
            "commands finish for --grace seconds, then kill them and hand their jobs back; a\n"
            "second signal ends the grace at once. The token needs the work scope, nothing\n"
            "more.\n\n"
            "  --concurrency N   commands running at once (default 1)\n"
            "  --lease S         lease seconds (default: the queue's lease_seconds)\n"
            "  --max-jobs N      stop after claiming N jobs (default: no limit)\n"
            "  --idle-exit S     exit after S seconds with nothing to do (default: never)\n"
            "  --timeout S       kill a command after S seconds and fail its job (default: none)\n"
            "  --grace S         seconds running commands get after SIGTERM (default 30)\n"
            "  --progress-fd FD  the command's file descriptor FD (3 or above) is a pipe: each\n"
            "                    line written there (JSON, else a string) is sent as the job's\n"
            "                    progress with the next heartbeat\n"
            "  --owner ID        the worker's owner id (default: host:pid)\n"
            "  --verbose         a line on stderr for every failed command\n");
}

/* One numeric option of work into wc. 0, or -1 (printed). */
static int work_number(int c, const char *arg, struct cli_work_conf *wc)
{
    long long v = 0;
    int bad = 0;
    switch (c) {
    case 'c':
        bad = cli_parse_long("--concurrency", arg, 1, 1000, &v);
        wc->concurrency = (int)v;
        break;
    case 'l':
        bad = cli_parse_long("--lease", arg, 1, 604800, &v);
        wc->lease_s = (long)v;
        break;
    case 'm':
        bad = cli_parse_long("--max-jobs", arg, 1, (long long)1 << 62, &wc->max_jobs);
        break;
    case 'i':
        bad = cli_parse_long("--idle-exit", arg, 1, 1 << 30, &v);
        wc->idle_exit_s = (long)v;
        break;
    case 't':
        bad = cli_parse_long("--timeout", arg, 1, 1 << 30, &v);
        wc->timeout_s = (long)v;
        break;
    case 'g':
        bad = cli_parse_long("--grace", arg, 0, 1 << 30, &v);
        wc->grace_s = (long)v;
        break;
    default: /* 'p' */
        bad = cli_parse_long("--progress-fd", arg, 3, 1000, &v);
        wc->progress_fd = (int)v;
        break;
    }
    return bad;
}

/* Parses work's options into wc. Returns 0, or an exit code (-1: --help printed). */
static int work_options(int argc, char **argv, struct cli_work_conf *wc)
{
    static const struct option opts[] = {{"concurrency", required_argument, NULL, 'c'},
                                         {"lease", required_argument, NULL, 'l'},
                                         {"max-jobs", required_argument, NULL, 'm'},
                                         {"idle-exit", required_argument, NULL, 'i'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"grace", required_argument, NULL, 'g'},
                                         {"progress-fd", required_argument, NULL, 'p'},
                                         {"owner", required_argument, NULL, 'o'},
                                         {"verbose", no_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;                          /* getopt would name QUEUE as the program */
    if (argc > 1 && argv[1][0] != '-') { /* QUEUE comes first: parse the options after it */
        wc->queue = argv[1];
        argv++;
        argc--;
    }
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (c == 'o') {
            snprintf(wc->owner, sizeof(wc->owner), "%s", optarg);
        } else if (c == 'v') {
            wc->verbose = 1;
        } else if (c == 'h' || !strchr("clmitgp", c)) {
            if (c != 'h')
                cli_errorf("usage: bad option '%s'", argv[optind - 1]);
            work_usage(c == 'h' ? stdout : stderr);
            return c == 'h' ? -1 : CLI_EXIT_USAGE;
        } else if (work_number(c, optarg, wc) != 0) {
            return CLI_EXIT_USAGE;
        }
    }
    if (!wc->queue && optind < argc && strcmp(argv[optind], "--") != 0)
        wc->queue = argv[optind++];
    if (optind < argc && strcmp(argv[optind], "--") == 0)
        optind++;
    if (!wc->queue || optind >= argc) {
        cli_errorf("usage: work QUEUE [options] -- COMMAND [ARGS...]");
        return CLI_EXIT_USAGE;
    }
    wc->command = argv + optind;
    return 0;
}

/* The length of a claimed lease: --lease, else what the claim's answer says the queue gave
 * (its lease_seconds); 0 when the answer does not say (printed). */
static long work_lease_s(const struct cli_work_conf *wc, const json_t *lease)
{
    if (wc->lease_s)
        return wc->lease_s;
    json_int_t s = json_integer_value(json_object_get(lease, "lease_seconds"));
    if (s <= 0)
        cli_errorf("work: the claim's answer gives no lease_seconds (a service older than this "
                   "rowlock-cli?): run with --lease");
    return s > 0 ? (long)s : 0;
}

/* Starts a thread for each lease of a claim's answer; hands the leases back when stopping, or
 * when a lease's length is unknown (which stops the worker). */
static void work_start_jobs(struct cli_work_conf *wc, struct cli_work_state *ws,
                            struct cli_http *http, json_t *leases, double lease_from)
{
    size_t i;
    json_t *l;
    json_array_foreach(leases, i, l)
    {
        long long id = json_integer_value(json_object_get(l, "job_id"));
        long long fence = json_integer_value(json_object_get(l, "fence"));
        long lease_s = cli_work_stop ? 0 : work_lease_s(wc, l);
        struct cli_job *j = lease_s ? calloc(1, sizeof(*j)) : NULL;
        if (!lease_s && !cli_work_stop)
            cli_work_fail(CLI_EXIT_OTHER);
        if (!j) {
            cli_job_handback(wc, http, id, fence);
            continue;
        }
        *j = (struct cli_job){.wc = wc,
                              .ws = ws,
                              .id = id,
                              .fence = fence,
                              .attempt = json_integer_value(json_object_get(l, "attempt")),
                              .payload = json_deep_copy(json_object_get(l, "payload")),
                              .lease_from = lease_from,
                              .lease_s = lease_s};
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_mutex_lock(&ws->mu);
        ws->running++;
        ws->claimed++;
        pthread_mutex_unlock(&ws->mu);
        if (pthread_create(&t, &attr, cli_job_thread, j) != 0) {
            cli_job_handback(wc, http, id, fence);
            json_decref(j->payload);
            free(j);
            pthread_mutex_lock(&ws->mu);
            ws->running--;
            pthread_mutex_unlock(&ws->mu);
        }
        pthread_attr_destroy(&attr);
    }
}

/* One claim of up to want jobs, waiting up to wait_s, for --lease or else the queue's lease.
 * Returns 0 (jobs started, maybe none), a fatal exit code (printed), or -1 (the service is
 * unavailable; try again). The worker's first claim (first) is also its check that it can work
 * at all (the queue exists, the token may claim, the service answers): any refusal of it ends
 * the worker, unavailability included. */
static int work_claim(struct cli_work_conf *wc, struct cli_work_state *ws, struct cli_http *http,
                      long long want, long wait_s, int first, int *got)
{
    char path[512];
    struct cli_reply rep;
    json_t *body = json_pack("{s:s, s:I, s:i}", "owner", wc->owner, "max_jobs", (json_int_t)want,
                             "wait_seconds", (int)wait_s);
    if (wc->lease_s)
        json_object_set_new(body, "lease_seconds", json_integer(wc->lease_s));
    snprintf(path, sizeof(path), "/queues/%s/leases", wc->queue_esc);
    double sent = cli_work_now();
    int rc = cli_http_call(http, "POST", path, body, 0, wait_s + 30, &rep);
    json_decref(body);
    *got = 0;
    if (rc == 0 && rep.status == 200) {
        json_t *leases = json_object_get(rep.json, "leases");
        *got = (int)json_array_size(leases);
        work_start_jobs(wc, ws, http, leases, sent);
    } else if ((!first || cli_work_stop) && (rc != 0 || rep.status >= 500)) {
        cli_errorf("work: claim: %s%s%s", rep.code, rep.code[0] ? ": " : "", rep.detail);
        rc = -1;
    } else {
        rc = cli_reply_exit(&rep);
    }
    cli_reply_clear(&rep);
    return rc;
}

/* Waits until a slot is free or the worker stops; returns the free slots (0 when stopping). */
static int work_free_slots(const struct cli_work_conf *wc, struct cli_work_state *ws)
{
    pthread_mutex_lock(&ws->mu);
    while (ws->running >= wc->concurrency && !cli_work_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&ws->cv, &ws->mu, &ts);
    }
    int free_slots = cli_work_stop ? 0 : wc->concurrency - ws->running;
    pthread_mutex_unlock(&ws->mu);
    return free_slots;
}

/* The claim loop, until SIGTERM, --max-jobs, --idle-exit or a fatal answer. */
static int work_loop(struct cli_work_conf *wc, struct cli_work_state *ws, struct cli_http *http)
{
    double idle_since = cli_work_now();
    for (int first = 1;; first = 0) {
        int slots = work_free_slots(wc, ws);
        if (slots == 0)
            return 0;
        pthread_mutex_lock(&ws->mu);
        long long want = slots, left = wc->max_jobs ? wc->max_jobs - ws->claimed : want;
        int running = ws->running;
        pthread_mutex_unlock(&ws->mu);
        if (left <= 0)
            return 0;
        want = want < left ? want : left;
        if (running)
            idle_since = cli_work_now();
        long wait_s = CLAIM_WAIT_MAX;
        if (wc->idle_exit_s) {
            double rest = (double)wc->idle_exit_s - (cli_work_now() - idle_since);
            if (rest <= 0 && !running)
                return 0;
            wait_s = rest < wait_s ? (rest < 0 ? 0 : (long)rest + 1) : wait_s;
            if (running) /* a job may end meanwhile: come back soon to count idle time right */
                wait_s = 1;
        }
        int got = 0, rc = work_claim(wc, ws, http, want, wait_s, first, &got);
        if (rc > 0)
            return rc;
        if (rc < 0 && !cli_work_stop)
            sleep(1);
        if (got)
            idle_since = cli_work_now();
    }
}

/* After the loop: waits for every job thread (they watch the grace themselves), then flushes
 * the batched completions. */
static void work_drain(struct cli_work_state *ws)
{
    pthread_mutex_lock(&ws->mu);
    while (ws->running > 0)
        pthread_cond_wait(&ws->cv, &ws->mu);
    pthread_mutex_unlock(&ws->mu);
    cli_settler_stop(ws->settler);
    ws->settler = NULL;
}

static void work_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

int cli_cmd_work(const struct cli_conf *conf, int argc, char **argv)
{
    struct cli_work_conf wc = {.conf = conf, .concurrency = 1, .grace_s = 30, .progress_fd = -1};
    struct cli_work_state ws = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    struct cli_http *http = NULL;
    int result = work_options(argc, argv, &wc);
    if (result != 0) {
        result = result < 0 ? 0 : result;
        goto done;
    }
    if (!wc.owner[0]) {
        char host[64] = "host";
        gethostname(host, sizeof(host) - 1);
        snprintf(wc.owner, sizeof(wc.owner), "%s:%ld", host, (long)getpid());
    }
    http = cli_http_new(conf);
    wc.queue_esc = http ? cli_http_escape(http, wc.queue) : NULL;
    if (!wc.queue_esc) {
        result = CLI_EXIT_OTHER;
        goto done;
    }
    work_signals();
    cli_http_set_abort(http, &cli_work_stop);
    ws.settler = cli_settler_start(&wc, &ws);
    if (!ws.settler) {
        result = CLI_EXIT_OTHER;
        goto done;
    }
    result = work_loop(&wc, &ws, http);
    work_drain(&ws);
    if (atomic_load(&fail_code))
        result = atomic_load(&fail_code);
    cli_errorf("work: %lld claimed, %lld succeeded, %lld failed, %lld lost, %lld handed back, "
               "%lld refused",
               ws.claimed, ws.succeeded, ws.failed, ws.lost, ws.handed_back, ws.refused);
done:
    free(wc.queue_esc);
    cli_http_free(http);
    return result;
}
