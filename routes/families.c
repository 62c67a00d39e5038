/* The resource families this binary serves, in the order their routes are matched and their
 * metrics rendered. A new family is its routes/<family>.c (with its db/ workflows) and one line
 * here. */
#include "routes/routes.h"

const struct svc_family *const svc_families[] = {
    &route_common_family, &route_ops_family,    &route_ui_family,
    &route_topics_family, &route_queues_family, &route_ledgers_family,
};
const size_t svc_families_count = sizeof(svc_families) / sizeof(svc_families[0]);
