/* routes/families.c: the families this binary serves pass the descriptor check that startup makes
 * (service/family.c), and each family of resources' wake channels reach the other processes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "routes/routes.h"

static void the_served_families_are_complete(void **state)
{
    (void)state;
    char why[256] = "";
    if (svc_families_check(svc_families, svc_families_count, why, sizeof(why)) != 0)
        fail_msg("%s", why);
}

static void every_resource_family_shares_its_channels(void **state)
{
    (void)state;
    int resources = 0;
    for (size_t i = 0; i < svc_families_count; i++) {
        const struct svc_family *f = svc_families[i];
        if (f->resource == NULL)
            continue;
        resources++;
        char channel[SVC_CHANNEL_MAX];
        svc_family_channel(f, "x", channel, sizeof(channel));
        assert_true(svc_families_shared_channel(svc_families, svc_families_count, channel));
    }
    /* topics, queues and ledgers at least */
    assert_true(resources >= 3);
    assert_true(svc_families_shared_channel(svc_families, svc_families_count, "queue:q"));
    assert_true(svc_families_shared_channel(svc_families, svc_families_count, "topic:t"));
    assert_true(svc_families_shared_channel(svc_families, svc_families_count, "ledger:l"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_served_families_are_complete),
        cmocka_unit_test(every_resource_family_shares_its_channels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
