/* Ids by name, as hints (see hints.h). */
#include "db/hints.h"

#include <stdio.h>
#include <string.h>

static size_t hint_slot(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h % DB_HINT_SLOTS;
}

int64_t db_hint_get(struct db_hints *h, const char *name)
{
    size_t i = hint_slot(name);
    int64_t id = 0;
    pthread_mutex_lock(&h->mutex);
    if (strcmp(h->slot[i].name, name) == 0)
        id = h->slot[i].id;
    pthread_mutex_unlock(&h->mutex);
    return id;
}

void db_hint_set(struct db_hints *h, const char *name, int64_t id)
{
    if (strlen(name) >= sizeof(h->slot[0].name))
        return;
    size_t i = hint_slot(name);
    pthread_mutex_lock(&h->mutex);
    if (id != 0)
        snprintf(h->slot[i].name, sizeof(h->slot[i].name), "%s", name);
    if (id != 0 || strcmp(h->slot[i].name, name) == 0) {
        h->slot[i].id = id;
        if (id == 0)
            h->slot[i].name[0] = '\0';
    }
    pthread_mutex_unlock(&h->mutex);
}
