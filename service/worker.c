/* The worker queue: handlers of SVC_RUN_WORKER routes run on worker threads, their connections
 * suspended meanwhile; a reply is prepared there and queued by the HTTP thread on resume. A
 * resumed long-poll joins the queue ahead of new requests, since its client has waited already. */
#include <stdlib.h>

#include "service/http_internal.h"

void svc_workers_push(struct svc_server *s, struct svc_request *req, int front)
{
    struct svc_workers *q = &s->workers;
    pthread_mutex_lock(&q->mu);
    if (front) { /* after the resumed ones queued: those stay oldest first */
        struct svc_request **at = q->resumed ? &q->resumed->work_next : &q->head;
        req->work_next = *at;
        *at = req;
        if (req->work_next == NULL)
            q->tail = req;
        q->resumed = req;
    } else {
        req->work_next = NULL;
        if (q->tail != NULL)
            q->tail->work_next = req;
        else
            q->head = req;
        q->tail = req;
    }
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

enum svc_outcome svc_workers_run(struct svc_request *req)
{
    req->in_worker = 1;
    req->phase = PHASE_WORKER;
    MHD_suspend_connection(req->conn);
    svc_workers_push(req->server, req, 0);
    return SVC_SUSPENDED;
}

/* Runs handlers. A handler that waits (SVC_SUSPENDED) leaves the connection suspended until a
 * wake pushes it again; any other outcome resumes it, with a pending response or none (then the
 * connection is dropped). */
static void *worker_main(void *arg)
{
    struct svc_server *s = arg;
    struct svc_workers *q = &s->workers;
    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (q->head == NULL && !q->stop)
            pthread_cond_wait(&q->cv, &q->mu);
        struct svc_request *req = q->head;
        if (req == NULL) {
            pthread_mutex_unlock(&q->mu);
            return NULL;
        }
        q->head = req->work_next;
        if (q->head == NULL)
            q->tail = NULL;
        if (q->resumed == req)
            q->resumed = NULL;
        pthread_mutex_unlock(&q->mu);
        enum svc_outcome o = s->routes[req->match.route].handler(req);
        if (o == SVC_SUSPENDED)
            continue;
        req->phase = PHASE_READY;
        MHD_resume_connection(req->conn);
    }
}

void svc_workers_init(struct svc_workers *q)
{
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
}

int svc_workers_start(struct svc_server *s, long n)
{
    struct svc_workers *q = &s->workers;
    q->threads = calloc((size_t)n, sizeof(pthread_t));
    for (long i = 0; q->threads != NULL && i < n; i++)
        if (pthread_create(&q->threads[q->n], NULL, worker_main, s) == 0)
            q->n++;
    return q->n;
}

void svc_workers_stop(struct svc_server *s)
{
    struct svc_workers *q = &s->workers;
    pthread_mutex_lock(&q->mu);
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (int i = 0; i < q->n; i++)
        pthread_join(q->threads[i], NULL);
    free(q->threads);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}
