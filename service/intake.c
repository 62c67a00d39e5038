/* The intake: rowlock's own accept of plain HTTP, in front of libmicrohttpd. A new connection
 * waits here for its first request line (peeked, so that its bytes stay for libmicrohttpd), then
 * goes to libmicrohttpd (MHD_add_connection), or is answered here with problem+json when
 * libmicrohttpd would answer it with its HTML page or drop it (408 when the line is late). How
 * the bytes are judged belongs to intake_judge.c; HTTPS connections never pass here. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/conn.h"
#include "service/http_internal.h"
#include "service/log.h"
#include "service/metrics.h"

/* How long an answered connection is read (and what comes thrown away) before it is closed, so
 * that the client reads the answer rather than a reset caused by bytes left unread. */
#define INTAKE_LINGER_S 2.0
/* How often the deadlines are looked at, at most this late. */
#define INTAKE_TICK_MS 100
/* Connections accepted in one go before the others waiting get their turn. */
#define INTAKE_ACCEPT_BATCH 64

enum intake_state { INTAKE_WAITING, INTAKE_LINGERING };

struct svc_intake_note {
    struct svc_intake_note *next;
    int fd;
    int before;                  /* requests still to be answered before the refused line */
    struct svc_intake_verdict v; /* v.target points into target */
    char target[512];
};

struct intake_conn {
    struct intake_conn *prev, *next;
    int fd;
    enum intake_state state;
    double since;  /* accepted, or answered (INTAKE_LINGERING) */
    int got_bytes; /* something other than empty lines arrived */
    struct sockaddr_storage addr;
    socklen_t addrlen;
};

struct svc_intake {
    struct svc_server *server;
    int listen_fd, epfd, stopfd;
    pthread_t thread;
    int started;
    int listen_paused; /* out of file descriptors: not polled until the next tick */
    struct intake_conn *head;
    long n; /* connections here */
    pthread_mutex_t notes_mu;
    struct svc_intake_note *notes; /* left for connections handed over, until they take them */
    atomic_int nnotes;
    char *buf;   /* what a peek reads: a request line within the URL limit fits */
    size_t size; /* its size */
};

static void intake_unlink(struct svc_intake *g, struct intake_conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        g->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    g->n--;
    epoll_ctl(g->epfd, EPOLL_CTL_DEL, c->fd, NULL);
}

static void intake_close(struct svc_intake *g, struct intake_conn *c)
{
    intake_unlink(g, c);
    close(c->fd);
    free(c);
}

/* Reads and drops n bytes the peek has seen (the empty lines before a request line). */
static void intake_consume(struct svc_intake *g, struct intake_conn *c, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(c->fd, g->buf, n < g->size ? n : g->size, 0);
        if (r <= 0)
            return;
        n -= (size_t)r;
    }
}

/* Writes the problem v holds on socket fd and ends its sending side, and logs its access line
 * (secs: how long the request line took). */
static void answer_on(int fd, const struct svc_intake_verdict *v, double secs)
{
    char id[SVC_REQUEST_ID_MAX + 1];
    svc_request_id_take(id, NULL);
    size_t len = 0;
    char *text = svc_reply_early_text(v->problem, v->reason, v->detail, id, &len);
    if (text != NULL && send(fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
        shutdown(fd, SHUT_WR);
    free(text);
    svc_metrics_observe_http(-1, v->problem->status, secs);
    struct svc_access a = {
        .request_id = id,
        .method = v->method,
        .route = "unmatched",
        .path = v->target,
        .path_len = v->target_len,
        .status = v->problem->status,
        .duration_ms = secs * 1000.0,
        .code = v->problem->code,
    };
    svc_log_access(&a);
}

/* Answers the problem v holds, then lingers until the client ends. */
static void intake_answer(struct svc_intake *g, struct intake_conn *c,
                          const struct svc_intake_verdict *v, double now)
{
    (void)g;
    answer_on(c->fd, v, now - c->since);
    c->state = INTAKE_LINGERING;
    c->since = now;
}

/* Leaves a note for c, whose bytes (n in g->buf, its first request line at first) hold a
 * pipeline with a refused request line after whole requests. */
static void intake_note(struct svc_intake *g, struct intake_conn *c, size_t n, size_t first)
{
    struct svc_intake_verdict v;
    int before = svc_intake_judge_pipeline(g->buf, n, first, g->server->cfg->url_limit, &v);
    struct svc_intake_note *note = before > 0 ? malloc(sizeof(*note)) : NULL;
    if (note == NULL)
        return;
    note->fd = c->fd;
    note->before = before;
    note->v = v;
    note->v.target_len = v.target_len < sizeof(note->target) ? v.target_len : sizeof(note->target);
    if (v.target != NULL)
        memcpy(note->target, v.target, note->v.target_len);
    note->v.target = note->target;
    pthread_mutex_lock(&g->notes_mu);
    note->next = g->notes;
    g->notes = note;
    atomic_fetch_add(&g->nnotes, 1);
    pthread_mutex_unlock(&g->notes_mu);
}

struct svc_intake_note *svc_intake_note_take(struct svc_server *s, int fd)
{
    struct svc_intake *g = s->intake;
    if (g == NULL || atomic_load(&g->nnotes) == 0)
        return NULL;
    struct svc_intake_note *found = NULL;
    pthread_mutex_lock(&g->notes_mu);
    for (struct svc_intake_note **at = &g->notes; *at != NULL; at = &(*at)->next)
        if ((*at)->fd == fd) {
            found = *at;
            *at = found->next;
            atomic_fetch_sub(&g->nnotes, 1);
            break;
        }
    pthread_mutex_unlock(&g->notes_mu);
    return found;
}

int svc_intake_note_count(struct svc_intake_note *note)
{
    return note->before > 0 && --note->before == 0;
}

void svc_intake_note_answer(struct svc_intake_note *note, int fd)
{
    answer_on(fd, &note->v, 0);
}

/* Hands c to libmicrohttpd (which closes it when it will not take it: its note goes then). */
static void intake_pass(struct svc_intake *g, struct intake_conn *c)
{
    intake_unlink(g, c);
    if (MHD_add_connection(g->server->daemon, c->fd, (const struct sockaddr *)&c->addr,
                           c->addrlen) != MHD_YES)
        free(svc_intake_note_take(g->server, c->fd));
    free(c);
}

/* Reads what a lingering connection sends until it ends. */
static void intake_drain(struct svc_intake *g, struct intake_conn *c)
{
    for (;;) {
        ssize_t r = recv(c->fd, g->buf, g->size, 0);
        if (r > 0)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        intake_close(g, c); /* its end, or an error */
        return;
    }
}

/* Looks at what c has sent so far: waits for more, hands it over, or answers it. */
static void intake_examine(struct svc_intake *g, struct intake_conn *c, uint32_t events, double now)
{
    if (c->state == INTAKE_LINGERING) {
        intake_drain(g, c);
        return;
    }
    for (;;) {
        ssize_t n = recv(c->fd, g->buf, g->size, MSG_PEEK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n <= 0) { /* ended (or reset) with nothing but empty lines: nothing was asked */
            intake_close(g, c);
            return;
        }
        int ended = (events & (EPOLLRDHUP | EPOLLHUP)) != 0, full = (size_t)n == g->size;
        struct svc_intake_verdict v;
        switch (svc_intake_judge(g->buf, (size_t)n, full, ended, g->server->cfg->url_limit, &v)) {
        case SVC_INTAKE_WAIT:
            intake_consume(g, c, v.blank);
            c->got_bytes |= (size_t)n > v.blank;
            if (full && v.blank > 0) /* the rest is there already, and brings no new event */
                continue;
            return;
        case SVC_INTAKE_PASS:
            intake_note(g, c, (size_t)n, v.blank);
            intake_consume(g, c, v.blank);
            intake_pass(g, c);
            return;
        case SVC_INTAKE_CLOSE:
            intake_close(g, c);
            return;
        case SVC_INTAKE_REFUSE:
            intake_answer(g, c, &v, now);
            intake_drain(g, c);
            return;
        }
    }
}

/* Accepts what the listening socket has, each to wait here for its request line. */
static void intake_accept(struct svc_intake *g, double now)
{
    struct svc_server *s = g->server;
    for (int i = 0; i < INTAKE_ACCEPT_BATCH; i++) {
        struct intake_conn *c = calloc(1, sizeof(*c));
        if (c == NULL)
            return;
        c->addrlen = sizeof(c->addr);
        c->fd = accept4(g->listen_fd, (struct sockaddr *)&c->addr, &c->addrlen,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c->fd < 0) {
            if (errno == EMFILE || errno == ENFILE) { /* poll it again at the next tick */
                epoll_ctl(g->epfd, EPOLL_CTL_DEL, g->listen_fd, NULL);
                g->listen_paused = 1;
            }
            free(c);
            return;
        }
        /* over the limit, or draining: closed at once, as on_accept does */
        if (atomic_load(&s->draining) || !svc_conns_admit(s->conns, g->n)) {
            close(c->fd);
            free(c);
            continue;
        }
        c->since = now;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(g->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
            close(c->fd);
            free(c);
            continue;
        }
        c->next = g->head;
        if (g->head != NULL)
            g->head->prev = c;
        g->head = c;
        g->n++;
    }
}

/* Answers 408 to the connections whose request line is late (closes those that sent nothing),
 * closes the lingering ones whose time is up, and polls the listening socket again. */
static void intake_tick(struct svc_intake *g, double now)
{
    struct svc_conns *conns = g->server->conns;
    double idle_s = (double)g->server->cfg->connection_timeout_s;
    for (struct intake_conn *c = g->head, *next; c != NULL; c = next) {
        next = c->next;
        if (c->state == INTAKE_LINGERING) {
            if (now - c->since > INTAKE_LINGER_S)
                intake_close(g, c);
        } else if (!c->got_bytes && now - c->since > idle_s) {
            intake_close(g, c);
        } else if (c->got_bytes && now - c->since > svc_conns_first_line_s(conns)) {
            struct svc_intake_verdict v;
            svc_intake_late(&v, svc_conns_first_line_s(conns));
            intake_answer(g, c, &v, now);
            intake_drain(g, c);
        }
    }
    if (g->listen_paused) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        g->listen_paused = epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->listen_fd, &ev) != 0;
    }
}

static void *intake_main(void *arg)
{
    struct svc_intake *g = arg;
    struct epoll_event events[64];
    double next_tick = svc_now();
    for (;;) {
        int n = epoll_wait(g->epfd, events, 64, INTAKE_TICK_MS);
        double now = svc_now();
        for (int i = 0; i < n; i++) {
            if (events[i].data.ptr == NULL)
                intake_accept(g, now);
            else if (events[i].data.ptr == (void *)g)
                return NULL; /* svc_intake_stop */
            else
                intake_examine(g, events[i].data.ptr, events[i].events, now);
        }
        if (now >= next_tick) {
            intake_tick(g, now);
            next_tick = now + INTAKE_TICK_MS / 1000.0;
        }
    }
}

int svc_intake_start(struct svc_server *s, int listen_fd)
{
    struct svc_intake *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return -1;
    g->server = s;
    g->listen_fd = listen_fd;
    pthread_mutex_init(&g->notes_mu, NULL);
    atomic_init(&g->nnotes, 0);
    /* method, spaces and version besides a target at the URL limit */
    g->size = (size_t)s->cfg->url_limit + 1024;
    g->buf = malloc(g->size);
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    g->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event listen_ev = {.events = EPOLLIN, .data.ptr = NULL};
    struct epoll_event stop_ev = {.events = EPOLLIN, .data.ptr = g};
    if (g->buf == NULL || g->epfd < 0 || g->stopfd < 0 ||
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, listen_fd, &listen_ev) != 0 ||
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, g->stopfd, &stop_ev) != 0 ||
        pthread_create(&g->thread, NULL, intake_main, g) != 0) {
        if (g->epfd >= 0)
            close(g->epfd);
        if (g->stopfd >= 0)
            close(g->stopfd);
        free(g->buf);
        pthread_mutex_destroy(&g->notes_mu);
        free(g);
        return -1;
    }
    g->started = 1;
    s->intake = g;
    return 0;
}

void svc_intake_stop(struct svc_server *s)
{
    struct svc_intake *g = s->intake;
    if (g == NULL)
        return;
    uint64_t one = 1;
    if (write(g->stopfd, &one, sizeof(one)) != sizeof(one))
        svc_log(SVC_LOG_WARN, "cannot stop the intake thread", NULL);
    pthread_join(g->thread, NULL);
    while (g->head != NULL)
        intake_close(g, g->head);
    close(g->listen_fd);
    close(g->epfd);
    close(g->stopfd);
    free(g->buf);
    while (g->notes != NULL) { /* (of connections libmicrohttpd never started) */
        struct svc_intake_note *next = g->notes->next;
        free(g->notes);
        g->notes = next;
    }
    pthread_mutex_destroy(&g->notes_mu);
    free(g);
    s->intake = NULL;
}
