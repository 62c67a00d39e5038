/* Ids by name, remembered per process as hints. A workflow that knows the id of the topic or
 * queue it names sends the lookup by name in the same round trip as the statements that use the
 * id, and checks the lookup's answer: correctness never depends on a hint. Rows of that kind
 * keep their id for life and ids are never reused, so a stale hint names a row that no longer
 * exists; the workflows say why that leaves nothing done. A fixed table of hashed sets: a name
 * pushed out of a full set only loses its hint. */
#ifndef DB_HINTS_H
#define DB_HINTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Sets of DB_HINT_WAYS entries, DB_HINT_SETS of them: 32,768 names, so that every resource of a
 * deployment with ten thousand topics and a thousand queues keeps its hint (a miss costs a round
 * trip: the lookup by name first). A name's set is picked by its hash; a full set forgets the
 * entries in turn. */
#define DB_HINT_WAYS     8
#define DB_HINT_SETS     4096
#define DB_HINT_NAME_MAX 128 /* longer names are never remembered */

struct db_hint_entry {
    uint64_t hash;
    int64_t id; /* 0: the entry is free */
    char *name; /* malloc'd, owned by the table */
};

struct db_hints {
    pthread_mutex_t mutex;
    struct {
        struct db_hint_entry way[DB_HINT_WAYS];
        unsigned next; /* the way filled next when the set is full */
    } set[DB_HINT_SETS];
};

#define DB_HINTS_INIT                                                                              \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER,                                                                 \
        {                                                                                          \
            {                                                                                      \
                {{0, 0, NULL}}, 0                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/* The hinted id of name, or 0. */
int64_t db_hint_get(struct db_hints *h, const char *name);
/* Remembers id for name (id 0 forgets name; a name longer than DB_HINT_NAME_MAX is not
 * remembered, nor is one when out of memory). */
void db_hint_set(struct db_hints *h, const char *name, int64_t id);
/* The set name belongs to (for tests). */
size_t db_hint_set_of(const char *name);
/* The number of names remembered (for tests). */
size_t db_hint_count(struct db_hints *h);
/* Forgets every name and frees what the table holds (for tests). */
void db_hint_clear(struct db_hints *h);

#endif
