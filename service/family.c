/* The families' routes as one table, their problem codes registered, their descriptors checked
 * and their wake channels named (see family.h). */
#include "service/family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/upkeep.h"
#include "service/log.h"
#include "service/wait.h"

struct svc_route *svc_families_routes(const struct svc_family *const *families, size_t n,
                                      size_t *count)
{
    size_t total = 0;
    for (size_t f = 0; f < n; f++)
        total += families[f]->nroutes;
    struct svc_route *table = calloc(total ? total : 1, sizeof(*table));
    if (table == NULL)
        return NULL;
    size_t at = 0;
    for (size_t f = 0; f < n; f++) {
        if (families[f]->nroutes > 0)
            memcpy(table + at, families[f]->routes, families[f]->nroutes * sizeof(*table));
        at += families[f]->nroutes;
    }
    *count = total;
    return table;
}

int svc_families_register_problems(const struct svc_family *const *families, size_t n)
{
    for (size_t f = 0; f < n; f++) {
        if (svc_problem_register(families[f]->problems, families[f]->nproblems) != 0) {
            svc_log(SVC_LOG_ERROR, "a family's problem code is already taken", "family",
                    families[f]->name, NULL);
            return -1;
        }
    }
    return 0;
}

/* What a family of resources lacks, or NULL when it has all it needs. */
static const char *family_lacks(const struct svc_family *f)
{
    if (f->upkeep == NULL)
        return "no upkeep (when its resources' janitor work is due)";
    if (f->upkeep->family == NULL || strcmp(f->upkeep->family, f->name) != 0)
        return "an upkeep of another family (its upkeep's family is not the family's name)";
    if (f->janitor_pass == NULL)
        return "no janitor pass";
    if (f->render_metrics == NULL)
        return "no gauges (render_metrics)";
    if (f->nroutes == 0)
        return "no routes";
    if (f->resource[0] == '\0' || strchr(f->resource, ':') != NULL)
        return "a resource name that cannot name a wake channel (empty, or with a ':')";
    if (strlen(f->resource) + 1 + DB_NAME_MAX >= SVC_CHANNEL_MAX)
        return "a resource name too long for a wake channel (SVC_CHANNEL_MAX)";
    return NULL;
}

int svc_families_check(const struct svc_family *const *families, size_t n, char *why, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        const struct svc_family *f = families[i];
        const char *lacks = f->name == NULL || f->name[0] == '\0' ? "no name" : NULL;
        if (lacks == NULL && f->resource != NULL)
            lacks = family_lacks(f);
        for (size_t j = 0; lacks == NULL && j < i; j++) {
            if (strcmp(families[j]->name, f->name) == 0)
                lacks = "the name of another family";
            else if (f->resource != NULL && families[j]->resource != NULL &&
                     strcmp(families[j]->resource, f->resource) == 0)
                lacks = "the resource of another family (their wake channels would mix)";
        }
        if (lacks != NULL) {
            snprintf(why, size, "family %zu (%s) has %s", i, f->name ? f->name : "?", lacks);
            return -1;
        }
    }
    return 0;
}

const char *svc_family_channel(const struct svc_family *f, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s:%s", f->resource, name);
    return buf;
}

int svc_families_shared_channel(const struct svc_family *const *families, size_t n,
                                const char *channel)
{
    const char *colon = strchr(channel, ':');
    if (colon == NULL)
        return 0;
    size_t len = (size_t)(colon - channel);
    for (size_t i = 0; i < n; i++) {
        const char *r = families[i]->resource;
        if (r != NULL && strlen(r) == len && memcmp(r, channel, len) == 0)
            return 1;
    }
    return 0;
}
