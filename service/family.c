/* The families' routes as one table and their problem codes registered (see family.h). */
#include "service/family.h"

#include <stdlib.h>
#include <string.h>

#include "service/log.h"

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
