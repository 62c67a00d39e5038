/* Fuzz target: RFC 7396 merge patch. Input: target JSON, a NUL byte, patch JSON (no NUL: the
 * whole input is the patch and the target is absent). Checks the RFC's rules member by member,
 * that a patch without nulls onto {} is the patch itself, that applying a patch twice changes
 * nothing more, and that neither argument is modified. */
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"
#include "tests/fuzz/fuzz.h"

/* The patch with every null member of every object removed (arrays are kept whole). */
static json_t *strip_nulls(const json_t *v)
{
    if (!json_is_object(v))
        return json_deep_copy(v);
    json_t *out = json_object();
    const char *name;
    json_t *member;
    json_object_foreach((json_t *)v, name, member)
    {
        if (!json_is_null(member))
            json_object_set_new(out, name, strip_nulls(member));
    }
    return out;
}

/* RFC 7396 section 2, one level: each patch member decides its own result member. */
static void check_members(const json_t *target, const json_t *patch, const json_t *result)
{
    if (!json_is_object(patch)) {
        FUZZ_ASSERT(json_equal(result, patch));
        return;
    }
    FUZZ_ASSERT(json_is_object(result));
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)patch, name, value)
    {
        json_t *got = json_object_get(result, name);
        if (json_is_null(value)) {
            FUZZ_ASSERT(got == NULL);
            continue;
        }
        json_t *old = json_is_object(target) ? json_object_get(target, name) : NULL;
        json_t *want = route_merge_patch(old, value);
        FUZZ_ASSERT(want != NULL && got != NULL && json_equal(got, want));
        json_decref(want);
    }
    if (!json_is_object(target))
        return;
    json_object_foreach((json_t *)target, name, value)
    {
        if (json_object_get(patch, name) == NULL)
            FUZZ_ASSERT(json_equal(json_object_get(result, name), value));
    }
    json_object_foreach((json_t *)result, name, value)
    {
        FUZZ_ASSERT(json_object_get(patch, name) != NULL || json_object_get(target, name) != NULL);
    }
}

/* All the checks of one (target, patch) pair; target may be NULL (absent). */
static void check(json_t *target, json_t *patch)
{
    json_t *target0 = json_deep_copy(target), *patch0 = json_deep_copy(patch);
    json_t *result = route_merge_patch(target, patch);
    FUZZ_ASSERT(result != NULL);
    FUZZ_ASSERT(json_equal(target, target0) == (target != NULL) && json_equal(patch, patch0));
    check_members(target, patch, result);
    /* a merge patch is idempotent */
    json_t *twice = route_merge_patch(result, patch);
    FUZZ_ASSERT(twice != NULL && json_equal(twice, result));
    /* onto nothing, or onto {}, a patch is itself with its nulls removed */
    json_t *empty = json_object(), *onto_empty = route_merge_patch(empty, patch);
    json_t *onto_absent = route_merge_patch(NULL, patch), *stripped = strip_nulls(patch);
    FUZZ_ASSERT(json_equal(onto_empty, stripped) && json_equal(onto_absent, stripped));
    json_decref(result);
    json_decref(twice);
    json_decref(empty);
    json_decref(onto_empty);
    json_decref(onto_absent);
    json_decref(stripped);
    json_decref(target0);
    json_decref(patch0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *a, *b;
    fuzz_split(data, size, &a, &b);
    int has_target = memchr(data, 0, size) != NULL;
    json_t *target = has_target ? fuzz_json(a) : NULL;
    json_t *patch = fuzz_json(has_target ? b : a);
    if (patch != NULL && (!has_target || target != NULL))
        check(target, patch);
    json_decref(target);
    json_decref(patch);
    free(a);
    free(b);
    return 0;
}
