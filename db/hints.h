/* Ids by name, remembered per process as hints. A workflow that knows the id of the topic or
 * queue it names sends the lookup by name in the same round trip as the statements that use the
 * id, and checks the lookup's answer: correctness never depends on a hint. Rows of that kind
 * keep their id for life and ids are never reused, so a stale hint names a row that no longer
 * exists; the workflows say why that leaves nothing done. A fixed table of hashed slots: a name
 * that collides with another only loses its hint. */
#ifndef DB_HINTS_H
#define DB_HINTS_H

#include <pthread.h>
#include <stdint.h>

#define DB_HINT_SLOTS 256

struct db_hints {
    pthread_mutex_t mutex;
    struct {
        char name[129];
        int64_t id;
    } slot[DB_HINT_SLOTS];
};

#define DB_HINTS_INIT                                                                              \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER,                                                                 \
        {                                                                                          \
            {                                                                                      \
                "", 0                                                                              \
            }                                                                                      \
        }                                                                                          \
    }

/* The hinted id of name, or 0. */
int64_t db_hint_get(struct db_hints *h, const char *name);
/* Remembers id for name (id 0 forgets name; a name too long for a slot is not remembered). */
void db_hint_set(struct db_hints *h, const char *name, int64_t id);

#endif
