/* The families this binary serves, in the order their routes are matched and their metrics
 * rendered. A new family is its routes/<family>.c (defining route_<family>_family, whose
 * descriptor says what else follows: service/family.h), its db/ workflows and migration, and one
 * entry here. */
#include "routes/routes.h"

#define ROUTE_FAMILIES(X) X(common) X(ops) X(ui) X(topics) X(queues) X(ledgers) X(schedules)

#define ROUTE_FAMILY_DECLARE(f) extern const struct svc_family route_##f##_family;
ROUTE_FAMILIES(ROUTE_FAMILY_DECLARE)

#define ROUTE_FAMILY_ENTRY(f) &route_##f##_family,
const struct svc_family *const svc_families[] = {ROUTE_FAMILIES(ROUTE_FAMILY_ENTRY)};
const size_t svc_families_count = sizeof(svc_families) / sizeof(svc_families[0]);
