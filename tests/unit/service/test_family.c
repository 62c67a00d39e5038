/* service/family.c: a family's descriptor is refused when it lacks what serving its resources
 * takes (a wake channel, upkeep, gauges, a janitor pass), the families this binary serves are
 * complete, and the wake channels follow from the descriptors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "db/upkeep.h"
#include "service/family.h"
#include "service/wait.h"

static void render(struct svc_buf *b, struct svc_app *app)
{
    (void)b;
    (void)app;
}

static void pass(void *ctx)
{
    (void)ctx;
}

static enum svc_outcome handler(struct svc_request *req)
{
    (void)req;
    return SVC_REPLIED;
}

static const struct db_upkeep things_upkeep = {.family = "things"};
static const struct db_upkeep others_upkeep = {.family = "others"};
static const struct svc_route things_routes[] = {
    {"GET", "/things/{thing}", handler, SVC_SCOPE_READ, SVC_BODY_NONE, SVC_RUN_WORKER,
     SVC_AUDIT_BY_SCOPE},
};

/* A complete family of resources, for each case to take something away from. */
static struct svc_family things(void)
{
    return (struct svc_family){.name = "things",
                               .resource = "thing",
                               .upkeep = &things_upkeep,
                               .routes = things_routes,
                               .nroutes = 1,
                               .render_metrics = render,
                               .janitor_pass = pass};
}

/* svc_families_check on {ops, f}: 0, or -1 with why holding want. */
static void expect(const struct svc_family *f, const char *want)
{
    static const struct svc_family ops = {.name = "ops"}; /* no resource: nothing required */
    const struct svc_family *families[] = {&ops, f};
    char why[256] = "";
    int rc = svc_families_check(families, 2, why, sizeof(why));
    if (want == NULL) {
        assert_int_equal(rc, 0);
        return;
    }
    assert_int_equal(rc, -1);
    if (strstr(why, want) == NULL)
        fail_msg("why: \"%s\", expected it to say \"%s\"", why, want);
}

static void a_complete_family_passes(void **state)
{
    (void)state;
    struct svc_family f = things();
    expect(&f, NULL);
}

static void a_family_without_upkeep_is_refused(void **state)
{
    (void)state;
    struct svc_family f = things();
    f.upkeep = NULL;
    expect(&f, "no upkeep");
    f.upkeep = &others_upkeep;
    expect(&f, "an upkeep of another family");
}

static void a_family_without_gauges_is_refused(void **state)
{
    (void)state;
    struct svc_family f = things();
    f.render_metrics = NULL;
    expect(&f, "no gauges");
}

static void a_family_without_janitor_or_routes_is_refused(void **state)
{
    (void)state;
    struct svc_family f = things();
    f.janitor_pass = NULL;
    expect(&f, "no janitor pass");
    f = things();
    f.nroutes = 0;
    expect(&f, "no routes");
}

static void a_resource_that_cannot_name_a_channel_is_refused(void **state)
{
    (void)state;
    struct svc_family f = things();
    f.resource = "";
    expect(&f, "cannot name a wake channel");
    f.resource = "th:ing";
    expect(&f, "cannot name a wake channel");
    char longer[SVC_CHANNEL_MAX];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    f.resource = longer;
    expect(&f, "too long for a wake channel");
}

static void two_families_with_one_name_or_resource_are_refused(void **state)
{
    (void)state;
    struct svc_family a = things(), b = things();
    const struct svc_family *families[] = {&a, &b};
    char why[256];
    assert_int_equal(svc_families_check(families, 2, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "the name of another family"));
    b.name = "others";
    b.upkeep = &others_upkeep;
    assert_int_equal(svc_families_check(families, 2, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "the resource of another family"));
    b.resource = "other";
    assert_int_equal(svc_families_check(families, 2, why, sizeof(why)), 0);
}

static void channels_follow_from_the_resource(void **state)
{
    (void)state;
    struct svc_family f = things();
    static const struct svc_family ops = {.name = "ops"};
    const struct svc_family *families[] = {&ops, &f};
    char buf[SVC_CHANNEL_MAX];
    assert_string_equal(svc_family_channel(&f, "a.b-c", buf, sizeof(buf)), "thing:a.b-c");
    assert_true(svc_families_shared_channel(families, 2, buf));
    assert_false(svc_families_shared_channel(families, 2, "things:a"));
    assert_false(svc_families_shared_channel(families, 2, "thin:a"));
    assert_false(svc_families_shared_channel(families, 2, "gate:7"));
    assert_false(svc_families_shared_channel(families, 2, "thing"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_complete_family_passes),
        cmocka_unit_test(a_family_without_upkeep_is_refused),
        cmocka_unit_test(a_family_without_gauges_is_refused),
        cmocka_unit_test(a_family_without_janitor_or_routes_is_refused),
        cmocka_unit_test(a_resource_that_cannot_name_a_channel_is_refused),
        cmocka_unit_test(two_families_with_one_name_or_resource_are_refused),
        cmocka_unit_test(channels_follow_from_the_resource),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
