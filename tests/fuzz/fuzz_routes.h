/* For the fuzz targets that need what main serves: every family's routes in one table, built
 * (and the families' problem codes registered) before the target's first input. */
#ifndef TESTS_FUZZ_FUZZ_ROUTES_H
#define TESTS_FUZZ_FUZZ_ROUTES_H

#include <stddef.h>

#include "service/router.h"

extern const struct svc_route *fuzz_routes_table;
extern size_t fuzz_routes_count;

#endif
