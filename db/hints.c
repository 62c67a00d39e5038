/* Ids by name, as hints (see hints.h). */
#include "db/hints.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hint_hash(const char *name)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

size_t db_hint_set_of(const char *name)
{
    return hint_hash(name) % DB_HINT_SETS;
}

/* The entry of name in its set, or NULL. */
static struct db_hint_entry *find(struct db_hints *h, uint64_t hash, const char *name)
{
    struct db_hint_entry *way = h->set[hash % DB_HINT_SETS].way;
    for (int w = 0; w < DB_HINT_WAYS; w++)
        if (way[w].id != 0 && way[w].hash == hash && strcmp(way[w].name, name) == 0)
            return &way[w];
    return NULL;
}

int64_t db_hint_get(struct db_hints *h, const char *name)
{
    uint64_t hash = hint_hash(name);
    pthread_mutex_lock(&h->mutex);
    struct db_hint_entry *e = find(h, hash, name);
    int64_t id = e != NULL ? e->id : 0;
    pthread_mutex_unlock(&h->mutex);
    return id;
}

static void forget(struct db_hint_entry *e)
{
    free(e->name);
    *e = (struct db_hint_entry){0, 0, NULL};
}

void db_hint_set(struct db_hints *h, const char *name, int64_t id)
{
    if (strlen(name) > DB_HINT_NAME_MAX)
        return;
    uint64_t hash = hint_hash(name);
    char *copy = id != 0 ? strdup(name) : NULL; /* allocated outside the lock */
    pthread_mutex_lock(&h->mutex);
    struct db_hint_entry *e = find(h, hash, name);
    if (e != NULL && id != 0) {
        e->id = id;
    } else if (e != NULL) {
        forget(e);
    } else if (id != 0 && copy != NULL) {
        struct db_hint_entry *way = h->set[hash % DB_HINT_SETS].way;
        int w = 0;
        while (w < DB_HINT_WAYS && way[w].id != 0)
            w++;
        if (w == DB_HINT_WAYS) /* full: its ways in turn */
            w = (int)(h->set[hash % DB_HINT_SETS].next++ % DB_HINT_WAYS);
        free(way[w].name);
        way[w] = (struct db_hint_entry){hash, id, copy};
        copy = NULL;
    }
    pthread_mutex_unlock(&h->mutex);
    free(copy);
}

size_t db_hint_count(struct db_hints *h)
{
    size_t n = 0;
    pthread_mutex_lock(&h->mutex);
    for (size_t s = 0; s < DB_HINT_SETS; s++)
        for (int w = 0; w < DB_HINT_WAYS; w++)
            n += h->set[s].way[w].id != 0;
    pthread_mutex_unlock(&h->mutex);
    return n;
}

void db_hint_clear(struct db_hints *h)
{
    pthread_mutex_lock(&h->mutex);
    for (size_t s = 0; s < DB_HINT_SETS; s++) {
        for (int w = 0; w < DB_HINT_WAYS; w++)
            forget(&h->set[s].way[w]);
        h->set[s].next = 0;
    }
    pthread_mutex_unlock(&h->mutex);
}
