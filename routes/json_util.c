/* Merge patch and the validation of names, keys and times (see json_util.h). */
#include "routes/json_util.h"

#include "service/utf8.h"

#include <stdio.h>
#include <string.h>

json_t *route_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *result = json_is_object(target) ? json_deep_copy(target) : json_object();
    if (result == NULL)
        return NULL;
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)patch, name, value)
    {
        if (json_is_null(value)) {
            json_object_del(result, name);
            continue;
        }
        json_t *merged = route_merge_patch(json_object_get(result, name), value);
        if (merged == NULL || json_object_set_new(result, name, merged) != 0) {
            json_decref(result);
            return NULL;
        }
    }
    return result;
}

int route_name_ok(const char *name, char *why, size_t whysize)
{
    size_t len = strlen(name);
    if (len == 0 || len > 128) {
        snprintf(why, whysize, "a name has 1 to 128 characters; this one has %zu", len);
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (i == 0 && !alnum) {
            snprintf(why, whysize, "a name starts with a letter or a digit");
            return 0;
        }
        if (!alnum && c != '.' && c != '_' && c != '-') {
            snprintf(why, whysize,
                     "a name holds only letters, digits, '.', '_' and '-' (character %zu is not "
                     "one)",
                     i + 1);
            return 0;
        }
    }
    return 1;
}

int route_key_ok(const char *key, char *why, size_t whysize)
{
    size_t len = strlen(key);
    if (len == 0) {
        snprintf(why, whysize, "a key is not empty");
        return 0;
    }
    if (len > 1024) {
        snprintf(why, whysize, "a key has at most 1024 bytes; this one has %zu", len);
        return 0;
    }
    if (!svc_utf8_valid(key, len)) {
        snprintf(why, whysize, "a key is valid UTF-8");
        return 0;
    }
    return 1;
}

/* Digits at s, exactly n of them, in [min, max]. Advances *s. */
static int take_num(const char **s, int n, int min, int max)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if ((*s)[i] < '0' || (*s)[i] > '9')
            return 0;
        v = v * 10 + ((*s)[i] - '0');
    }
    *s += n;
    return v >= min && v <= max;
}

static int take_char(const char **s, const char *one_of)
{
    if (**s == '\0' || strchr(one_of, **s) == NULL)
        return 0;
    (*s)++;
    return 1;
}

int route_rfc3339_ok(const char *s)
{
    if (!take_num(&s, 4, 0, 9999) || !take_char(&s, "-") || !take_num(&s, 2, 1, 12) ||
        !take_char(&s, "-") || !take_num(&s, 2, 1, 31) || !take_char(&s, "Tt ") ||
        !take_num(&s, 2, 0, 23) || !take_char(&s, ":") || !take_num(&s, 2, 0, 59) ||
        !take_char(&s, ":") || !take_num(&s, 2, 0, 60))
        return 0;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (take_char(&s, "Zz"))
        return *s == '\0';
    return take_char(&s, "+-") && take_num(&s, 2, 0, 23) && take_char(&s, ":") &&
           take_num(&s, 2, 0, 59) && *s == '\0';
}
