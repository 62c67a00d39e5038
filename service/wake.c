/* Wake plumbing (see wake.h): a handler's wake reaches this process's waiters (wait.c) and the
 * publish function main installed for the other processes, after the commit or, asked first,
 * inside the write's own transaction. */
#include "service/wake.h"

#include "service/http_internal.h"

void svc_server_wake_publish(struct svc_server *s, const char *channel, long n)
{
    svc_server_wake(s, channel, n);
    svc_publish_fn publish = atomic_load(&s->publisher.fn);
    if (publish != NULL)
        publish(atomic_load(&s->publisher.ctx), channel, n);
}

void svc_req_wake_n(struct svc_request *req, const char *channel, long n)
{
    svc_server_wake_publish(req->server, channel, n);
}

void svc_req_wake(struct svc_request *req, const char *channel)
{
    svc_req_wake_n(req, channel, -1);
}

void svc_server_set_publish(struct svc_server *s, svc_publish_fn fn, void *ctx)
{
    atomic_store(&s->publisher.ctx, ctx);
    atomic_store(&s->publisher.fn, fn);
}

void svc_server_set_publish_inline(struct svc_server *s, svc_publish_inline_fn fn,
                                   svc_publish_inline_done_fn done)
{
    atomic_store(&s->publisher.inline_done, done);
    atomic_store(&s->publisher.inline_fn, fn);
}

int svc_req_wake_inline(struct svc_request *req, const char *channel, long n, char *payload,
                        size_t size)
{
    struct svc_server *s = req->server;
    svc_publish_inline_fn fn = atomic_load(&s->publisher.inline_fn);
    return fn != NULL && fn(atomic_load(&s->publisher.ctx), channel, n, payload, size);
}

void svc_req_wake_inlined(struct svc_request *req, const char *channel, long n, int sent)
{
    struct svc_server *s = req->server;
    svc_publish_inline_done_fn done = atomic_load(&s->publisher.inline_done);
    if (done != NULL)
        done(atomic_load(&s->publisher.ctx), sent);
    if (n > 0 && sent)
        svc_server_wake(s, channel, n);
    else if (n > 0)
        svc_req_wake_n(req, channel, n);
}
