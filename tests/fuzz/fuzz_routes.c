/* The route table of fuzz_routes.h, built by a constructor when a target uses it. */
#include "tests/fuzz/fuzz_routes.h"

#include <stdlib.h>

#include "service/family.h"

const struct svc_route *fuzz_routes_table;
size_t fuzz_routes_count;

__attribute__((constructor)) static void build(void)
{
    fuzz_routes_table = svc_families_routes(svc_families, svc_families_count, &fuzz_routes_count);
    if (fuzz_routes_table == NULL ||
        svc_families_register_problems(svc_families, svc_families_count) != 0)
        abort();
}
