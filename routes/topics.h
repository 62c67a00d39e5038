/* The topics family's own header: its problem codes, and what routes/topic_consumers.c (consumer
 * cursors, part of the family) gives routes/topics.c, which holds the family's route table. */
#ifndef ROUTES_TOPICS_H
#define ROUTES_TOPICS_H

#include "db/topics.h"
#include "routes/routes.h"

enum topic_problem {
    TOPIC_PC_INVALID_MESSAGE,
    TOPIC_PC_INVALID_MERGE_PATCH,
    TOPIC_PC_INVALID_CONSUMER,
    TOPIC_PC_TOPIC_NOT_FOUND,
    TOPIC_PC_PRODUCER_NOT_FOUND,
    TOPIC_PC_HEAD_NOT_FOUND,
    TOPIC_PC_KEY_DELETED,
    TOPIC_PC_CONSUMER_NOT_FOUND,
    TOPIC_PC_CONSUMER_CONFLICT,
    TOPIC_PC_OFFSET_BEYOND_END,
    TOPIC_PC_PRECONDITION_FAILED,
    TOPIC_PC_COUNT
};
extern const struct svc_problem_info topic_problems[TOPIC_PC_COUNT];
#define TOPIC_P(name) (&topic_problems[TOPIC_PC_##name])

/* routes/topics.c: what the family's files share. */
/* The {key} path parameter, or NULL after replying 400 invalid_key. */
const char *route_topic_key_param(struct svc_request *req, enum svc_outcome *out);
/* 404 for a topic, producer or consumer a workflow did not find. */
enum svc_outcome route_topic_problem(struct svc_request *req, enum db_topic_verdict v,
                                     const char *topic, const char *producer);
/* The wake-up channel of a topic ("topic:<name>") in buf (SVC_CHANNEL_MAX bytes hold any). */
const char *route_topic_channel(const char *topic, char *buf, size_t size);

/* One message object (key, value, rank, sequence) into m, its value's text malloc'd into
 * *value; producer: the producer it goes through (a sequence needs a named one). 1, or 0 with
 * why. */
int route_topic_message_parse(json_t *j, const char *producer, struct db_message_in *m,
                              char **value, char *why, size_t whysize);
/* A produced message as answered: offset, key, head effect, head offset. */
json_t *route_topic_produced_json(const char *key, const struct db_message_out *o);
/* Counts n produced messages of topic and wakes its waiting reads. */
void route_topic_produced(struct svc_request *req, const char *topic,
                          const struct db_message_out *out, size_t n);

/* routes/topic_reads.c: log reads, key lists and a key's history. */
enum svc_outcome route_messages_read(struct svc_request *req);
enum svc_outcome route_keys_list(struct svc_request *req);
enum svc_outcome route_key_history(struct svc_request *req);

/* routes/topic_consumers.c: its handlers, metrics start and lag metrics. */
void route_topic_consumers_init(void);
enum svc_outcome route_consumer_put(struct svc_request *req);
enum svc_outcome route_consumer_get(struct svc_request *req);
enum svc_outcome route_consumers_list(struct svc_request *req);
enum svc_outcome route_consumer_delete(struct svc_request *req);
enum svc_outcome route_consumer_commit(struct svc_request *req);
void route_topic_consumers_render_metrics(struct svc_buf *b, struct svc_app *app);

/* The family (routes/families.c). */
extern const struct svc_family route_topics_family;

#endif
