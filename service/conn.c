/* Open connections and their request deadlines (see conn.h). One mutex guards the list; entries
 * are freed only by svc_conns_closed, which runs before the socket is closed, so a cut never
 * reaches a socket number already reused by another connection. A connection's step (when it
 * began, and which it is) is one atomic word, so that marking it, three times a request, takes
 * no lock. */
#include "service/conn.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>

/* A step: when it began, in microseconds, above two bits: IN_REQUEST (the request line arrived)
 * and RECEIVING (the request, or the next one, has not arrived whole yet). */
#define STEP_IN_REQUEST 2u
#define STEP_RECEIVING  1u

struct svc_conn {
    struct svc_conn *prev, *next;
    int fd;
    _Atomic uint64_t step; /* see svc_conns_mark */
    atomic_int cut;        /* set by the ticker, read by the connection's thread */
    void *request;         /* see svc_conns_set_request: read and written on its MHD thread only */
    void *note;            /* see svc_conns_set_note: likewise */
};

static uint64_t step_of(int in_request, int receiving, double now)
{
    uint64_t us = now > 0 ? (uint64_t)(now * 1e6 + 0.5) : 0;
    return us << 2 | (in_request ? STEP_IN_REQUEST : 0) | (receiving ? STEP_RECEIVING : 0);
}

struct svc_conns {
    long limit;
    double request_s, first_line_s;
    atomic_long open;
    pthread_mutex_t mu;
    struct svc_conn *head;
};

struct svc_conns *svc_conns_new(long limit, double request_s, double first_line_s)
{
    struct svc_conns *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->limit = limit;
    c->request_s = request_s;
    c->first_line_s = first_line_s;
    atomic_init(&c->open, 0);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void svc_conns_free(struct svc_conns *c)
{
    if (c == NULL)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int svc_conns_admit(struct svc_conns *c, long waiting)
{
    return atomic_load(&c->open) + waiting < c->limit;
}

double svc_conns_first_line_s(const struct svc_conns *c)
{
    return c->first_line_s;
}

struct svc_conn *svc_conns_opened(struct svc_conns *c, int fd, double now)
{
    atomic_fetch_add(&c->open, 1);
    struct svc_conn *conn = calloc(1, sizeof(*conn));
    if (conn == NULL)
        return NULL;
    conn->fd = fd;
    atomic_init(&conn->step, step_of(0, 1, now));
    pthread_mutex_lock(&c->mu);
    conn->next = c->head;
    if (c->head != NULL)
        c->head->prev = conn;
    c->head = conn;
    pthread_mutex_unlock(&c->mu);
    return conn;
}

void svc_conns_closed(struct svc_conns *c, struct svc_conn *conn)
{
    atomic_fetch_sub(&c->open, 1);
    if (conn == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (conn->prev != NULL)
        conn->prev->next = conn->next;
    else
        c->head = conn->next;
    if (conn->next != NULL)
        conn->next->prev = conn->prev;
    pthread_mutex_unlock(&c->mu);
    free(conn);
}

void svc_conns_mark(struct svc_conns *c, struct svc_conn *conn, int in_request, int receiving,
                    double now)
{
    if (conn == NULL)
        return;
    atomic_store_explicit(&conn->step, step_of(in_request, receiving, now), memory_order_relaxed);
}

int svc_conns_cut_late(struct svc_conns *c, double now)
{
    int cut = 0;
    pthread_mutex_lock(&c->mu);
    for (struct svc_conn *conn = c->head; conn != NULL; conn = conn->next) {
        uint64_t step = atomic_load_explicit(&conn->step, memory_order_relaxed);
        double since = (double)(step >> 2) / 1e6;
        double limit = step & STEP_IN_REQUEST ? c->request_s : c->first_line_s;
        if (!(step & STEP_RECEIVING) || conn->cut || now - since <= limit)
            continue;
        shutdown(conn->fd, SHUT_RD); /* its reader sees the end; it may still answer */
        conn->cut = 1;
        cut++;
    }
    pthread_mutex_unlock(&c->mu);
    return cut;
}

int svc_conns_was_cut(const struct svc_conn *conn)
{
    return conn != NULL && atomic_load(&conn->cut);
}

void svc_conns_set_request(struct svc_conn *conn, void *request)
{
    if (conn != NULL)
        conn->request = request;
}

void *svc_conns_request(const struct svc_conn *conn)
{
    return conn != NULL ? conn->request : NULL;
}

void svc_conns_set_note(struct svc_conn *conn, void *note)
{
    if (conn != NULL)
        conn->note = note;
}

void *svc_conns_note(const struct svc_conn *conn)
{
    return conn != NULL ? conn->note : NULL;
}
