/* Long-poll waiters (see wait.h): the steps of a long-poll, the list of suspended requests with
 * their deadline and re-check time, and their resumption (a wake of their channel, or the
 * ticker's pass) onto the front of the workers' queue. */
#include "service/wait.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "service/clock.h"
#include "service/http_internal.h"

struct svc_waiter {
    struct svc_request *req;
    char *channel;
    double deadline;
    double recheck; /* when to look again for writes made by other processes */
    struct svc_waiter *next;
};

void svc_waiters_init(struct svc_waiters *w)
{
    pthread_mutex_init(&w->mu, NULL);
}

void svc_waiters_destroy(struct svc_waiters *w)
{
    pthread_mutex_destroy(&w->mu);
}

int svc_poll_admit(struct svc_request *req, double wait_s, enum svc_outcome *out)
{
    if (wait_s <= 0 || !req->limited || req->limit.long_polls == 0 || req->resumes > 0 ||
        req->poll_held != NULL)
        return 0;
    if (svc_limits_poll_take(req->server->limits, req->token, &req->limit, &req->poll_held) == 0)
        return 0;
    svc_req_add_header(req, "Retry-After", "1");
    *out =
        svc_reply_problem(req, SVC_P(TOO_MANY_LONG_POLLS),
                          "the token %s may have %ld long-poll%s waiting at once in this "
                          "process; send this one again once one has returned, or without a "
                          "wait",
                          req->token, req->limit.long_polls, req->limit.long_polls == 1 ? "" : "s");
    return 1;
}

struct svc_poll svc_poll_begin(const struct svc_request *req, double wait_s)
{
    struct svc_waiters *w = &req->server->waiters;
    struct svc_poll poll = {.deadline = req->start + wait_s};
    pthread_mutex_lock(&w->mu);
    poll.generation = w->generation;
    pthread_mutex_unlock(&w->mu);
    return poll;
}

int svc_poll_may_wait(const struct svc_request *req, const struct svc_poll *poll)
{
    struct svc_waiters *w = &req->server->waiters;
    pthread_mutex_lock(&w->mu);
    int stopping = w->stopping;
    pthread_mutex_unlock(&w->mu);
    return !stopping && svc_now() < poll->deadline;
}

enum svc_outcome svc_poll_wait(struct svc_request *req, const struct svc_poll *poll,
                               const char *channel)
{
    struct svc_server *s = req->server;
    struct svc_waiters *ws = &s->waiters;
    struct svc_waiter *w = calloc(1, sizeof(*w));
    char *ch = strdup(channel);
    if (w == NULL || ch == NULL) {
        free(w);
        free(ch);
        return svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
    }
    pthread_mutex_lock(&ws->mu);
    if (ws->generation != poll->generation || ws->stopping) {
        /* something was written since the handler looked, or we are stopping: look again */
        pthread_mutex_unlock(&ws->mu);
        free(w);
        free(ch);
        return s->routes[req->match.route].handler(req);
    }
    w->req = req;
    w->channel = ch;
    w->deadline = poll->deadline;
    /* jittered, so that many waiters that began together do not all look again together */
    w->recheck = svc_now() + (double)s->cfg->poll_interval_ms / 1000.0 *
                                 (0.5 + (double)(ws->generation * 2654435761u % 1000) / 2000.0 +
                                  (double)((uintptr_t)w % 997) / 2000.0);
    /* appended: the list runs oldest first, the order svc_server_wake wakes in */
    w->next = NULL;
    struct svc_waiter **tail = &ws->head;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = w;
    ws->n++;
    pthread_mutex_unlock(&ws->mu);
    return SVC_SUSPENDED; /* the connection stays suspended; a wake hands it to a worker */
}

int svc_req_resumes(const struct svc_request *req)
{
    return req->resumes;
}

/* Resumes the waiters for which pick() is true. Called with waiters.mu held. */
static void resume_where(struct svc_server *s, int (*pick)(const struct svc_waiter *, const void *),
                         const void *arg)
{
    struct svc_waiters *ws = &s->waiters;
    for (struct svc_waiter **pw = &ws->head; *pw != NULL;) {
        struct svc_waiter *w = *pw;
        if (!pick(w, arg)) {
            pw = &w->next;
            continue;
        }
        *pw = w->next;
        ws->n--;
        w->req->resumes++;
        svc_workers_push(s, w->req, 1);
        free(w->channel);
        free(w);
    }
}

struct pick_n {
    const char *channel;
    long left;
};

static int pick_channel(const struct svc_waiter *w, const void *arg)
{
    struct pick_n *p = (struct pick_n *)arg;
    if (p->left == 0 || strcmp(w->channel, p->channel) != 0)
        return 0;
    if (p->left > 0)
        p->left--;
    return 1;
}

static int pick_all(const struct svc_waiter *w, const void *unused)
{
    return 1;
}

struct pick_due_arg {
    double now;
    int rechecks_left; /* re-checks are rate-limited: each one borrows a pool connection */
    unsigned long rechecked;
};

static int pick_due(const struct svc_waiter *w, const void *arg)
{
    struct pick_due_arg *a = (struct pick_due_arg *)arg;
    if (w->deadline <= a->now)
        return 1;
    if (w->recheck > a->now || a->rechecks_left == 0)
        return 0;
    a->rechecks_left--;
    a->rechecked++;
    return 1;
}

void svc_server_wake(struct svc_server *s, const char *channel, long n)
{
    struct svc_waiters *ws = &s->waiters;
    struct pick_n p = {channel, n};
    pthread_mutex_lock(&ws->mu);
    ws->generation++;
    long before = ws->n;
    resume_where(s, pick_channel, &p);
    atomic_fetch_add(&ws->woken, (unsigned long)(before - ws->n));
    pthread_mutex_unlock(&ws->mu);
}

void svc_waiters_resume_due(struct svc_server *s, double now, int rechecks)
{
    struct svc_waiters *ws = &s->waiters;
    struct pick_due_arg due = {now, rechecks, 0};
    pthread_mutex_lock(&ws->mu);
    resume_where(s, pick_due, &due);
    atomic_fetch_add(&ws->rechecks, due.rechecked);
    pthread_mutex_unlock(&ws->mu);
}

void svc_waiters_resume_all(struct svc_server *s)
{
    pthread_mutex_lock(&s->waiters.mu);
    resume_where(s, pick_all, NULL);
    pthread_mutex_unlock(&s->waiters.mu);
}

void svc_waiters_stop(struct svc_server *s)
{
    pthread_mutex_lock(&s->waiters.mu);
    s->waiters.stopping = 1;
    pthread_mutex_unlock(&s->waiters.mu);
}

long svc_server_waiting(const struct svc_server *s)
{
    struct svc_waiters *ws = (struct svc_waiters *)&s->waiters;
    pthread_mutex_lock(&ws->mu);
    long n = ws->n;
    pthread_mutex_unlock(&ws->mu);
    return n;
}

unsigned long svc_server_rechecks(const struct svc_server *s)
{
    return atomic_load(&((struct svc_server *)s)->waiters.rechecks);
}

unsigned long svc_server_woken(const struct svc_server *s)
{
    return atomic_load(&((struct svc_server *)s)->waiters.woken);
}
