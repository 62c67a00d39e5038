/* Completion effects at the edge: a completion's (or a consumer commit's) "enqueue" and
 * "produce" members parsed into db/effects.h's groups, their refusal answered, and what was
 * enqueued and produced answered, counted and woken after the commit. */
#ifndef ROUTES_EFFECTS_H
#define ROUTES_EFFECTS_H

#include <jansson.h>

#include "db/effects.h"
#include "routes/queues.h"
#include "routes/routes.h"

/* At most this many jobs, and this many messages, one write may carry. */
#define ROUTE_EFFECTS_MAX 1000

struct route_fx_jobs; /* a queue's group (effects.c) */
struct route_fx_msgs; /* a topic and producer's group */

struct route_effects {
    int any;     /* the body carried "enqueue" or "produce" */
    json_t *own; /* the members' copies that the groups borrow from */
    struct route_fx_jobs *jg;
    struct route_fx_msgs *mg;
    size_t njobs, nmsgs; /* effect items, in request order */
    size_t *jmap, *mmap; /* item -> (group << 20 | position) */
    struct db_effects db;
};

/* The "enqueue" and "produce" members of body (either may be absent: fx->any 0) into fx, the
 * token checked for the write scope they need. 0, or -1 after replying (400, 403). Free fx with
 * route_effects_free whatever the result. */
int route_effects_parse(struct svc_request *req, json_t *body, struct route_effects *fx,
                        enum svc_outcome *out);
void route_effects_free(struct route_effects *fx);
/* 409 effect_refused for fx->db.refused: which effect, why (the code its own route answers). */
enum svc_outcome route_effects_refused(struct svc_request *req, const struct route_effects *fx);
/* After the commit: counters and wake-ups of the queues and topics written. */
void route_effects_done(struct svc_request *req, const struct route_effects *fx);
/* What was applied, in request order: {"jobs": [{queue, id, duplicate, state}], "messages":
 * [{topic, offset, key, head, head_offset}]}. */
json_t *route_effects_json(const struct route_effects *fx);

#endif
