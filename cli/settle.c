/* Batched completions of `rowlock-cli work`: job threads hand over the result of a short job,
 * and one thread sends them as leases:complete batches (up to 100 items, or whatever has waited
 * 20 ms), counts each item's answer and keeps unsent items for the next batch while their lease
 * lasts. Nothing here runs commands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/work.h"

#define BATCH_MAX  100
#define BATCH_WAIT 0.02

struct item {
    long long id, fence;
    json_t *result;
    double deadline, added;
};

struct cli_settler {
    const struct cli_work_conf *wc;
    struct cli_work_state *ws;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct item *items;
    size_t n, cap;
    int stop;
};

void cli_settler_add(struct cli_settler *s, long long id, long long fence, json_t *result,
                     double deadline)
{
    pthread_mutex_lock(&s->mu);
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        struct item *it = realloc(s->items, cap * sizeof(*it));
        if (!it) {
            pthread_mutex_unlock(&s->mu);
            json_decref(result);
            return; /* the lease runs out and the job runs again */
        }
        s->items = it;
        s->cap = cap;
    }
    s->items[s->n++] = (struct item){id, fence, result, deadline, cli_work_now()};
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Counts the answers of one batch. */
static void batch_answers(struct cli_settler *s, const struct item *it, size_t n, json_t *answer)
{
    json_t *results = json_object_get(answer, "results");
    struct cli_work_state *ws = s->ws;
    for (size_t i = 0; i < n; i++) {
        json_t *res = json_array_get(results, i);
        const char *st = json_string_value(json_object_get(res, "status"));
        int ok = st && strcmp(st, "completed") == 0;
        if (!ok)
            cli_errorf("work: job %lld: complete refused: %s", it[i].id, st ? st : "no answer");
        pthread_mutex_lock(&ws->mu);
        if (ok)
            ws->succeeded++;
        else
            ws->refused++;
        pthread_mutex_unlock(&ws->mu);
    }
}

/* Sends items[0..n) as one batch. Returns 0 when answered, -1 when the service could not be
 * reached (the items are kept). */
static int batch_send(struct cli_settler *s, struct cli_http *http, struct item *it, size_t n)
{
    char path[512];
    struct cli_reply rep;
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items,
                              json_pack("{s:I, s:I, s:O}", "job_id", (json_int_t)it[i].id, "fence",
                                        (json_int_t)it[i].fence, "result", it[i].result));
    json_t *body = json_pack("{s:s, s:o}", "owner", s->wc->owner, "items", items);
    snprintf(path, sizeof(path), "/queues/%s/leases:complete", s->wc->queue_esc);
    int rc = cli_http_call(http, "POST", path, body, CLI_HTTP_IDEMPOTENT, 30, &rep);
    json_decref(body);
    if (rc != 0) {
        cli_errorf("work: leases:complete: %s", rep.detail);
        cli_reply_clear(&rep);
        return -1;
    }
    if (rep.status == 200) {
        batch_answers(s, it, n, rep.json);
    } else {
        cli_errorf("work: leases:complete refused: %s: %s", rep.code, rep.detail);
        pthread_mutex_lock(&s->ws->mu);
        s->ws->refused += (long long)n;
        pthread_mutex_unlock(&s->ws->mu);
    }
    cli_reply_clear(&rep);
    return 0;
}

/* Takes up to BATCH_MAX items that are due (or all when stopping) into out; returns how many. */
static size_t batch_take(struct cli_settler *s, struct item *out, int *stop)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        *stop = s->stop;
        if (s->n >= BATCH_MAX ||
            (s->n && (s->stop || cli_work_now() - s->items[0].added >= BATCH_WAIT)))
            break;
        if (s->stop)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    size_t n = s->n < BATCH_MAX ? s->n : BATCH_MAX;
    if (n) { /* (items is NULL until the first completion) */
        memcpy(out, s->items, n * sizeof(*out));
        memmove(s->items, s->items + n, (s->n - n) * sizeof(*out));
        s->n -= n;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Puts back the items of a batch that could not be sent, dropping those whose lease is over
 * (all of them when stopping). */
static void batch_keep(struct cli_settler *s, struct item *it, size_t n, int stop)
{
    double now = cli_work_now();
    for (size_t i = 0; i < n; i++) {
        if (it[i].deadline > now && !stop) {
            cli_settler_add(s, it[i].id, it[i].fence, it[i].result, it[i].deadline);
            continue;
        }
        cli_errorf("work: job %lld: not completed before its lease ran out", it[i].id);
        json_decref(it[i].result);
        pthread_mutex_lock(&s->ws->mu);
        s->ws->refused++;
        pthread_mutex_unlock(&s->ws->mu);
    }
}

static void *settler_main(void *arg)
{
    struct cli_settler *s = arg;
    struct cli_http *http = cli_http_new(s->wc->conf);
    struct item batch[BATCH_MAX];
    int stop = 0;
    for (;;) {
        size_t n = batch_take(s, batch, &stop);
        if (n == 0 && stop)
            break;
        if (n == 0)
            continue;
        if (http && batch_send(s, http, batch, n) == 0) {
            for (size_t i = 0; i < n; i++)
                json_decref(batch[i].result);
        } else {
            batch_keep(s, batch, n, stop); /* stopping: dropped, the leases run out */
        }
    }
    cli_http_free(http);
    return NULL;
}

struct cli_settler *cli_settler_start(const struct cli_work_conf *wc, struct cli_work_state *ws)
{
    struct cli_settler *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->wc = wc;
    s->ws = ws;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, settler_main, s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

void cli_settler_stop(struct cli_settler *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->items);
    free(s);
}
