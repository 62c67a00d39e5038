/* Completion effects at the edge (see effects.h). Jobs are grouped by queue, in the order each
 * queue first appears, and parsed as the enqueue route parses a batch (refs and parents resolve
 * within a queue's group); messages are grouped by topic and producer. */
#include "routes/effects.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"
#include "routes/topics.h"
#include "service/router.h"

/* A group's position is packed under its index: at most ROUTE_EFFECTS_MAX items. */
#define POS_BITS 20
#define POS_MASK ((1u << POS_BITS) - 1)

struct route_fx_jobs {
    const char *queue;
    json_t *arr; /* the jobs without "queue" (in fx->own) */
    struct queue_enqueue e;
    char what[200];
};

struct route_fx_msgs {
    const char *topic, *producer;
    size_t n;
    struct db_message_in *msgs;
    struct db_message_out *out;
    char **values;
};

/* The index of the group of jobs for queue (of messages for topic and producer), added when
 * new. */
static size_t jobs_group(struct route_effects *fx, const char *queue)
{
    for (size_t g = 0; g < fx->db.njobs; g++)
        if (strcmp(fx->jg[g].queue, queue) == 0)
            return g;
    struct route_fx_jobs *j = &fx->jg[fx->db.njobs];
    j->queue = queue;
    j->arr = json_array();
    json_array_append_new(fx->own, j->arr);
    return fx->db.njobs++;
}

static size_t msgs_group(struct route_effects *fx, const char *topic, const char *producer)
{
    for (size_t g = 0; g < fx->db.nmsgs; g++)
        if (strcmp(fx->mg[g].topic, topic) == 0 &&
            (producer == NULL ? fx->mg[g].producer == NULL
                              : fx->mg[g].producer && strcmp(fx->mg[g].producer, producer) == 0))
            return g;
    fx->mg[fx->db.nmsgs].topic = topic;
    fx->mg[fx->db.nmsgs].producer = producer;
    return fx->db.nmsgs++;
}

/* obj (an object) less the members named, as a copy kept in fx->own; NULL when out of memory. */
static json_t *without(struct route_effects *fx, json_t *obj, const char *a, const char *b)
{
    json_t *c = json_copy(obj);
    if (c == NULL)
        return NULL;
    json_object_del(c, a);
    if (b != NULL)
        json_object_del(c, b);
    json_array_append_new(fx->own, c);
    return c;
}

/* The "enqueue" member: each job with its "queue". 0, or -1 after replying. */
static int parse_jobs(struct svc_request *req, json_t *arr, struct route_effects *fx,
                      enum svc_outcome *out)
{
    char why[200];
    fx->njobs = json_array_size(arr);
    if (!json_is_array(arr) || fx->njobs == 0) {
        *out =
            svc_reply_problem(req, QUEUE_P(INVALID_JOB),
                              "\"enqueue\" is a non-empty array of jobs, each with its \"queue\"");
        return -1;
    }
    if (fx->njobs > ROUTE_EFFECTS_MAX) {
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a write carries at most %d jobs to enqueue; this one has %zu",
                                 ROUTE_EFFECTS_MAX, fx->njobs);
        return -1;
    }
    fx->jg = calloc(fx->njobs, sizeof(*fx->jg));
    fx->jmap = calloc(fx->njobs, sizeof(*fx->jmap));
    if (fx->jg == NULL || fx->jmap == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    for (size_t i = 0; i < fx->njobs; i++) {
        json_t *j = json_array_get(arr, i);
        const char *queue = json_string_value(json_object_get(j, "queue"));
        if (!json_is_object(j) || queue == NULL) {
            *out = svc_reply_problem(req, QUEUE_P(INVALID_JOB),
                                     "enqueue %zu: a job to enqueue is an object with a string "
                                     "\"queue\"",
                                     i);
            return -1;
        }
        if (!route_name_ok(queue, why, sizeof(why))) {
            *out = svc_reply_problem(req, ROUTE_P(INVALID_NAME), "enqueue %zu: queue name: %s", i,
                                     why);
            return -1;
        }
        size_t g = jobs_group(fx, queue);
        json_t *c = without(fx, j, "queue", NULL);
        if (c == NULL || json_array_append(fx->jg[g].arr, c) != 0) {
            *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
            return -1;
        }
        fx->jmap[i] = g << POS_BITS | (json_array_size(fx->jg[g].arr) - 1);
    }
    fx->db.jobs = calloc(fx->db.njobs, sizeof(*fx->db.jobs));
    if (fx->db.jobs == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    for (size_t g = 0; g < fx->db.njobs; g++) {
        struct route_fx_jobs *j = &fx->jg[g];
        snprintf(j->what, sizeof(j->what), "the jobs to enqueue into queue %s: ", j->queue);
        if (queue_enqueue_parse_jobs(req, j->arr, j->what, &j->e, out) != 0)
            return -1;
        fx->db.jobs[g] = (struct db_fx_jobs){j->queue, j->e.jobs, j->e.n, j->e.refs, {0, ""}};
    }
    return 0;
}

/* The "produce" member: each message with its "topic" and, optionally, "producer". 0, or -1
 * after replying. */
static int parse_msgs(struct svc_request *req, json_t *arr, struct route_effects *fx,
                      enum svc_outcome *out)
{
    char why[200];
    fx->nmsgs = json_array_size(arr);
    if (!json_is_array(arr) || fx->nmsgs == 0) {
        *out = svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE),
                                 "\"produce\" is a non-empty array of messages, each with its "
                                 "\"topic\"");
        return -1;
    }
    if (fx->nmsgs > ROUTE_EFFECTS_MAX) {
        *out = svc_reply_problem(req, ROUTE_P(BATCH_TOO_LARGE),
                                 "a write carries at most %d messages to produce; this one has %zu",
                                 ROUTE_EFFECTS_MAX, fx->nmsgs);
        return -1;
    }
    fx->mg = calloc(fx->nmsgs, sizeof(*fx->mg));
    fx->mmap = calloc(fx->nmsgs, sizeof(*fx->mmap));
    if (fx->mg == NULL || fx->mmap == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    /* first the groups and their sizes, then each group's messages */
    for (size_t i = 0; i < fx->nmsgs; i++) {
        json_t *m = json_array_get(arr, i), *pj = json_object_get(m, "producer");
        const char *topic = json_string_value(json_object_get(m, "topic"));
        const char *producer = json_string_value(pj);
        if (!json_is_object(m) || topic == NULL || (pj != NULL && producer == NULL)) {
            *out = svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE),
                                     "produce %zu: a message to produce is an object with a "
                                     "string \"topic\" (and a string \"producer\", or none)",
                                     i);
            return -1;
        }
        if (!route_name_ok(topic, why, sizeof(why)) ||
            (producer != NULL && !route_name_ok(producer, why, sizeof(why)))) {
            *out = svc_reply_problem(req, ROUTE_P(INVALID_NAME), "produce %zu: %s name: %s", i,
                                     route_name_ok(topic, why, sizeof(why)) ? "producer" : "topic",
                                     why);
            return -1;
        }
        size_t g = msgs_group(fx, topic, producer);
        fx->mmap[i] = g << POS_BITS | fx->mg[g].n++;
    }
    fx->db.msgs = calloc(fx->db.nmsgs, sizeof(*fx->db.msgs));
    if (fx->db.msgs == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    for (size_t g = 0; g < fx->db.nmsgs; g++) {
        struct route_fx_msgs *m = &fx->mg[g];
        m->msgs = calloc(m->n, sizeof(*m->msgs));
        m->out = calloc(m->n, sizeof(*m->out));
        m->values = calloc(m->n, sizeof(*m->values));
        if (m->msgs == NULL || m->out == NULL || m->values == NULL) {
            *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
            return -1;
        }
        fx->db.msgs[g] = (struct db_fx_messages){m->topic, m->producer, m->msgs, m->n, m->out};
    }
    for (size_t i = 0; i < fx->nmsgs; i++) {
        struct route_fx_msgs *m = &fx->mg[fx->mmap[i] >> POS_BITS];
        size_t pos = fx->mmap[i] & POS_MASK;
        json_t *c = without(fx, json_array_get(arr, i), "topic", "producer");
        if (c == NULL) {
            *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
            return -1;
        }
        if (!route_topic_message_parse(c, m->producer, &m->msgs[pos], &m->values[pos], why,
                                       sizeof(why))) {
            *out = svc_reply_problem(req, TOPIC_P(INVALID_MESSAGE), "produce %zu: %s", i, why);
            return -1;
        }
    }
    return 0;
}

int route_effects_parse(struct svc_request *req, json_t *body, struct route_effects *fx,
                        enum svc_outcome *out)
{
    memset(fx, 0, sizeof(*fx));
    json_t *jobs = json_object_get(body, "enqueue"), *msgs = json_object_get(body, "produce");
    fx->any = jobs != NULL || msgs != NULL;
    if (!fx->any)
        return 0;
    if (!svc_req_has_scope(req, SVC_SCOPE_WRITE)) {
        *out = svc_reply_problem(req, SVC_P(FORBIDDEN),
                                 "\"enqueue\" and \"produce\" need the write scope as well");
        return -1;
    }
    if ((fx->own = json_array()) == NULL) {
        *out = svc_reply_problem(req, SVC_P(INTERNAL_ERROR), "out of memory");
        return -1;
    }
    if (jobs != NULL && parse_jobs(req, jobs, fx, out) != 0)
        return -1;
    if (msgs != NULL && parse_msgs(req, msgs, fx, out) != 0)
        return -1;
    return 0;
}

void route_effects_free(struct route_effects *fx)
{
    for (size_t g = 0; fx->jg != NULL && g < fx->db.njobs; g++)
        queue_enqueue_free(&fx->jg[g].e);
    for (size_t g = 0; fx->mg != NULL && g < fx->db.nmsgs; g++) {
        for (size_t i = 0; fx->mg[g].values != NULL && i < fx->mg[g].n; i++)
            free(fx->mg[g].values[i]);
        free(fx->mg[g].values);
        free(fx->mg[g].msgs);
        free(fx->mg[g].out);
    }
    free(fx->jg);
    free(fx->mg);
    free(fx->jmap);
    free(fx->mmap);
    free(fx->db.jobs);
    free(fx->db.msgs);
    json_decref(fx->own);
    memset(fx, 0, sizeof(*fx));
}

enum svc_outcome route_effects_refused(struct svc_request *req, const struct route_effects *fx)
{
    const struct db_effects *d = &fx->db;
    if (d->refused == DB_FX_QUEUE_NOT_FOUND || d->refused == DB_FX_JOBS_REFUSED) {
        const struct db_fx_jobs *j = &d->jobs[d->group];
        const char *reason =
            d->refused == DB_FX_QUEUE_NOT_FOUND
                ? "queue_not_found"
                : (d->job_verdict == DB_Q_BAD_INPUT ? "invalid_job"
                                                    : db_queue_verdict_name(d->job_verdict));
        json_t *ext =
            json_pack("{s:s, s:s, s:s}", "effect", "enqueue", "queue", j->queue, "reason", reason);
        if (j->refusal.parent != 0 && ext != NULL)
            json_object_set_new(ext, "parent", json_integer((json_int_t)j->refusal.parent));
        return svc_reply_problem_ext(
            req, QUEUE_P(EFFECT_REFUSED), ext,
            "the jobs to enqueue into queue %s were refused (%s%s%.0" PRId64
            "): nothing was committed, and the lease is still held",
            j->queue, reason, j->refusal.parent ? ", parent " : "", j->refusal.parent);
    }
    const struct db_fx_messages *m = &d->msgs[d->group];
    const char *reason =
        d->refused == DB_FX_PRODUCER_NOT_FOUND ? "producer_not_found" : "topic_not_found";
    json_t *ext =
        json_pack("{s:s, s:s, s:s}", "effect", "produce", "topic", m->topic, "reason", reason);
    return svc_reply_problem_ext(req, QUEUE_P(EFFECT_REFUSED), ext,
                                 "the messages to produce to topic %s were refused (%s): nothing "
                                 "was committed, and the lease is still held",
                                 m->topic, reason);
}

void route_effects_done(struct svc_request *req, const struct route_effects *fx)
{
    for (size_t g = 0; g < fx->db.njobs; g++) {
        size_t created = 0;
        for (size_t i = 0; i < fx->jg[g].e.n; i++)
            created += fx->jg[g].e.refs[i].verdict == DB_Q_CREATED;
        queue_enqueued(req, fx->jg[g].queue, created);
    }
    for (size_t g = 0; g < fx->db.nmsgs; g++)
        route_topic_produced(req, fx->mg[g].topic, fx->mg[g].out, fx->mg[g].n);
}

json_t *route_effects_json(const struct route_effects *fx)
{
    json_t *jobs = json_array(), *msgs = json_array();
    for (size_t i = 0; i < fx->njobs; i++) {
        const struct route_fx_jobs *g = &fx->jg[fx->jmap[i] >> POS_BITS];
        const struct db_job_ref *r = &g->e.refs[fx->jmap[i] & POS_MASK];
        json_t *one = json_pack("{s:s, s:I, s:b}", "queue", g->queue, "id", (json_int_t)r->id,
                                "duplicate", r->verdict == DB_Q_DUPLICATE);
        if (one != NULL && r->verdict != DB_Q_DUPLICATE)
            one = queue_with(one, "state", json_string(r->waiting ? "waiting" : "pending"));
        jobs = queue_appended(jobs, one);
    }
    for (size_t i = 0; i < fx->nmsgs; i++) {
        const struct route_fx_msgs *g = &fx->mg[fx->mmap[i] >> POS_BITS];
        size_t pos = fx->mmap[i] & POS_MASK;
        json_t *one = route_topic_produced_json(g->msgs[pos].key, &g->out[pos]);
        msgs = queue_appended(msgs, queue_with(one, "topic", json_string(g->topic)));
    }
    if (jobs == NULL || msgs == NULL) {
        json_decref(jobs);
        json_decref(msgs);
        return NULL;
    }
    return json_pack("{s:o, s:o}", "jobs", jobs, "messages", msgs);
}
