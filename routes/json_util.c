/* Merge patch, reading back stored JSON, and the validation of names, keys and times (see
 * json_util.h). */
#include "routes/json_util.h"

#include "db/db.h"
#include "service/utf8.h"

#include <stdio.h>
#include <stdlib.h>
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

/* Does the integer token t (n bytes: an optional '-' and digits) lie outside int64, where
 * jansson refuses it? JSON has no leading zeros, so more digits means larger. */
static int int64_overflows(const char *t, size_t n)
{
    int neg = t[0] == '-';
    const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
    size_t digits = n - (size_t)neg;
    return digits > 19 || (digits == 19 && memcmp(t + neg, limit, 19) > 0);
}

/* Copies text into out (when not NULL) with ".0" after every integer token past int64, so that
 * jansson reads it as a double; returns the length of the copy. Strings are copied as they are. */
static size_t widen_big_ints(const char *text, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (text[i] == '"') { /* a string, up to its closing quote */
            size_t j = i + 1;
            while (j < len && text[j] != '"')
                j += text[j] == '\\' ? 2 : 1;
            j = j < len ? j + 1 : len;
            if (out)
                memcpy(out + o, text + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        size_t j = i + 1;
        int integer = text[i] == '-' || (text[i] >= '0' && text[i] <= '9');
        if (integer) /* a number: the run of characters a JSON number is made of */
            while (j < len && strchr("0123456789+-.eE", text[j]) != NULL && text[j] != '\0') {
                integer = integer && text[j] >= '0' && text[j] <= '9';
                j++;
            }
        if (out)
            memcpy(out + o, text + i, j - i);
        o += j - i;
        if (integer && int64_overflows(text + i, j - i)) {
            if (out)
                memcpy(out + o, ".0", 2);
            o += 2;
        }
        i = j;
    }
    return o;
}

/* Every number the service stores was a jansson value: a json_int_t, written as its digits, or a
 * double, written with 17 significant digits (which read back as the same double). jsonb keeps
 * that decimal value exactly and writes it back in plain notation. So the integers read back as
 * the same integers, and the doubles as the same doubles -- except that a double past int64 now
 * reads as an integer token jansson refuses. Only those tokens are made doubles (with ".0"), in a
 * copy made only when the strict parse fails; no other number changes type or value (as it would
 * if the whole text were read with JSON_DECODE_INT_AS_REAL: 2^53 + 1 would become 2^53). */
json_t *route_json_stored(const char *text, size_t len)
{
    json_t *j = json_loadb(text, len, JSON_DECODE_ANY, NULL);
    if (j != NULL)
        return j;
    size_t n = widen_big_ints(text, len, NULL);
    if (n == len)
        return NULL; /* nothing to widen: the text is not JSON (or memory ran out) */
    char *wide = malloc(n);
    if (wide == NULL)
        return NULL;
    widen_big_ints(text, len, wide);
    j = json_loadb(wide, n, JSON_DECODE_ANY, NULL);
    free(wide);
    return j;
}

int route_name_ok(const char *name, char *why, size_t whysize)
{
    size_t len = strlen(name);
    if (len == 0 || len > DB_NAME_MAX) {
        snprintf(why, whysize, "a name has 1 to %d characters; this one has %zu", DB_NAME_MAX, len);
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
    return route_text_ok(key, strlen(key), 1024, "key", why, whysize);
}

int route_text_ok(const char *s, size_t len, size_t max, const char *what, char *why,
                  size_t whysize)
{
    if (len == 0) {
        snprintf(why, whysize, "a %s is not empty", what);
        return 0;
    }
    if (len > max) {
        snprintf(why, whysize, "a %s has at most %zu bytes; this one has %zu", what, max, len);
        return 0;
    }
    if (!svc_utf8_valid(s, len)) {
        snprintf(why, whysize, "a %s is valid UTF-8", what);
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
