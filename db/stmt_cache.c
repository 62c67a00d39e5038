/* A connection's prepared statements (see stmt_cache.h): slots in a fixed array, chained from a
 * power-of-two bucket array by the FNV-1a hash of their names, and kept in a doubly linked list
 * from the most to the least recently used. */
#include "db/stmt_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room beyond the capacity, for a batch whose statements are all in use (never evicted). */
#define SLACK 8

struct slot {
    char *name;
    uint32_t hash;
    unsigned stamp;
    int chain;      /* next slot in the bucket, -1 */
    int prev, next; /* use order: prev more recent, next less recent; -1 at the ends */
};

struct db_stmt_cache {
    int capacity, nslots, count;
    struct slot *slots;
    int *buckets; /* first slot of each bucket, -1 */
    uint32_t mask;
    int mru, lru;  /* ends of the use order, -1 when empty */
    int free_head; /* unused slots chained through chain */
};

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

struct db_stmt_cache *db_stmt_cache_new(int capacity)
{
    struct db_stmt_cache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->capacity = capacity < DB_STMT_CACHE_MIN ? DB_STMT_CACHE_MIN : capacity;
    c->nslots = c->capacity + SLACK;
    uint32_t nb = 16;
    while (nb < (uint32_t)c->nslots * 2)
        nb *= 2;
    c->mask = nb - 1;
    c->slots = calloc((size_t)c->nslots, sizeof(*c->slots));
    c->buckets = malloc(nb * sizeof(*c->buckets));
    if (c->slots == NULL || c->buckets == NULL) {
        db_stmt_cache_free(c);
        return NULL;
    }
    db_stmt_cache_clear(c);
    return c;
}

void db_stmt_cache_free(struct db_stmt_cache *c)
{
    if (c == NULL)
        return;
    if (c->slots != NULL && c->buckets != NULL)
        db_stmt_cache_clear(c);
    free(c->slots);
    free(c->buckets);
    free(c);
}

void db_stmt_cache_clear(struct db_stmt_cache *c)
{
    for (int i = 0; i < c->nslots; i++) {
        free(c->slots[i].name);
        c->slots[i] =
            (struct slot){.chain = i + 1 < c->nslots ? i + 1 : -1, .prev = -1, .next = -1};
    }
    for (uint32_t b = 0; b <= c->mask; b++)
        c->buckets[b] = -1;
    c->free_head = 0;
    c->count = 0;
    c->mru = c->lru = -1;
}

static void unlink_use(struct db_stmt_cache *c, int i)
{
    struct slot *s = &c->slots[i];
    if (s->prev >= 0)
        c->slots[s->prev].next = s->next;
    else
        c->mru = s->next;
    if (s->next >= 0)
        c->slots[s->next].prev = s->prev;
    else
        c->lru = s->prev;
    s->prev = s->next = -1;
}

static void push_mru(struct db_stmt_cache *c, int i)
{
    struct slot *s = &c->slots[i];
    s->prev = -1;
    s->next = c->mru;
    if (c->mru >= 0)
        c->slots[c->mru].prev = i;
    c->mru = i;
    if (c->lru < 0)
        c->lru = i;
}

static int find(const struct db_stmt_cache *c, const char *name, uint32_t h)
{
    for (int i = c->buckets[h & c->mask]; i >= 0; i = c->slots[i].chain)
        if (c->slots[i].hash == h && strcmp(c->slots[i].name, name) == 0)
            return i;
    return -1;
}

int db_stmt_cache_hit(struct db_stmt_cache *c, const char *name, unsigned stamp)
{
    int i = find(c, name, hash_name(name));
    if (i < 0)
        return 0;
    c->slots[i].stamp = stamp;
    unlink_use(c, i);
    push_mru(c, i);
    return 1;
}

/* Takes slot i out of its bucket and the use order, back to the free slots. */
static void remove_slot(struct db_stmt_cache *c, int i)
{
    int *link = &c->buckets[c->slots[i].hash & c->mask];
    while (*link != i)
        link = &c->slots[*link].chain;
    *link = c->slots[i].chain;
    unlink_use(c, i);
    free(c->slots[i].name);
    c->slots[i].name = NULL;
    c->slots[i].chain = c->free_head;
    c->free_head = i;
    c->count--;
}

int db_stmt_cache_evict(struct db_stmt_cache *c, unsigned stamp, char *out, size_t size)
{
    if (c->count < c->capacity)
        return 0;
    for (int i = c->lru; i >= 0; i = c->slots[i].prev) {
        if (c->slots[i].stamp == stamp)
            continue; /* the batch in progress runs it */
        snprintf(out, size, "%s", c->slots[i].name);
        remove_slot(c, i);
        return 1;
    }
    return 0;
}

int db_stmt_cache_add(struct db_stmt_cache *c, const char *name, unsigned stamp)
{
    if (c->free_head < 0)
        return -1;
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    int i = c->free_head;
    struct slot *s = &c->slots[i];
    c->free_head = s->chain;
    s->name = copy;
    s->hash = hash_name(name);
    s->stamp = stamp;
    s->chain = c->buckets[s->hash & c->mask];
    c->buckets[s->hash & c->mask] = i;
    push_mru(c, i);
    c->count++;
    return 0;
}

int db_stmt_cache_count(const struct db_stmt_cache *c)
{
    return c->count;
}
