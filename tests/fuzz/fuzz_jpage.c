/* Fuzz target: the page writer (jpage.h). Input: a byte choosing the budget, then one item a
 * line; a line is tab-separated: the item's "key" member, then name=value pairs whose value is
 * spliced raw when it is JSON text (else written as null). Items are added while the page is not
 * full, as the routes do. The finished page parses, holds exactly the items added with their
 * values, keeps to the budget (one item may exceed it alone), and a name or key that is not
 * UTF-8 fails the whole page instead of writing broken JSON. */
#include <stdlib.h>
#include <string.h>

#include "service/jpage.h"
#include "service/utf8.h"
#include "tests/fuzz/fuzz.h"

#define MAX_VALUES 8

struct item {
    char *key;
    size_t n;
    struct svc_jpage_raw raw[MAX_VALUES];
    json_t *parsed[MAX_VALUES];
    size_t bytes; /* of raw values, as the page counts them */
    int key_ok;   /* the key is UTF-8, so env holds it */
    int unique;   /* names distinct from each other and from a "key" member */
    int ok;       /* every name is UTF-8, so the item can be written */
};

/* Parses one line (modified in place) into it. */
static void item_parse(char *line, struct item *it)
{
    memset(it, 0, sizeof(*it));
    char *save = NULL, *field = strtok_r(line, "\t", &save);
    it->key = field ? field : "";
    it->unique = 1;
    it->ok = 1;
    it->key_ok = svc_utf8_valid(it->key, strlen(it->key));
    while (it->n < MAX_VALUES && (field = strtok_r(NULL, "\t", &save)) != NULL) {
        char *eq = strchr(field, '=');
        const char *value = eq ? eq + 1 : "";
        if (eq)
            *eq = '\0';
        size_t i = it->n++;
        it->parsed[i] = fuzz_json(value);
        it->raw[i].name = field;
        it->raw[i].text = it->parsed[i] ? value : NULL;
        it->raw[i].len = it->parsed[i] ? strlen(value) : 0;
        it->bytes += it->raw[i].len;
        it->ok = it->ok && svc_utf8_valid(field, strlen(field));
        it->unique = it->unique && (!it->key_ok || strcmp(field, "key") != 0);
        for (size_t k = 0; k < i; k++)
            it->unique = it->unique && strcmp(it->raw[k].name, field) != 0;
    }
}

static void item_free(struct item *it)
{
    for (size_t i = 0; i < it->n; i++)
        json_decref(it->parsed[i]);
}

/* The written element for it. */
static void item_check(const struct item *it, json_t *got)
{
    FUZZ_ASSERT(json_is_object(got));
    if (!it->unique)
        return;
    json_t *key = json_object_get(got, "key");
    FUZZ_ASSERT(!it->key_ok ||
                (json_is_string(key) && strcmp(json_string_value(key), it->key) == 0));
    FUZZ_ASSERT(json_object_size(got) == it->n + (size_t)it->key_ok);
    for (size_t i = 0; i < it->n; i++) {
        json_t *v = json_object_get(got, it->raw[i].name);
        FUZZ_ASSERT(v != NULL && (it->parsed[i] ? json_equal(v, it->parsed[i]) : json_is_null(v)));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t budget = (size_t)data[0] * 8;
    char *text = fuzz_cstr(data + 1, size - 1), *save = NULL;
    struct item items[16];
    size_t n = 0, values = 0;
    int ok = 1, unique = 1;
    struct svc_jpage p;
    svc_jpage_begin(&p, "items", budget);
    for (char *line = strtok_r(text, "\n", &save); line != NULL && n < 16;
         line = strtok_r(NULL, "\n", &save)) {
        item_parse(line, &items[n]);
        if (svc_jpage_full(&p, items[n].bytes)) {
            FUZZ_ASSERT(n > 0 && (!ok || values + items[n].bytes > budget));
            item_free(&items[n]);
            break;
        }
        json_t *env = json_object();
        if (items[n].key_ok)
            json_object_set_new(env, "key", json_string(items[n].key));
        int rc = svc_jpage_item(&p, env, items[n].raw, items[n].n);
        ok = ok && items[n].ok;
        FUZZ_ASSERT((rc == 0) == ok);
        unique = unique && items[n].unique;
        values += items[n].bytes;
        n++;
    }
    FUZZ_ASSERT(!ok || p.values == values);
    FUZZ_ASSERT(!ok || values <= budget || n == 1);
    size_t len = 0;
    char *page = svc_jpage_finish(&p, json_pack("{s:I}", "next", (json_int_t)n), &len);
    FUZZ_ASSERT((page != NULL) == ok);
    if (page != NULL) {
        FUZZ_ASSERT(strlen(page) == len);
        json_error_t err;
        json_t *doc = json_loadb(page, len, unique ? JSON_REJECT_DUPLICATES : 0, &err);
        FUZZ_ASSERT(doc != NULL && json_object_size(doc) == 2);
        FUZZ_ASSERT(json_integer_value(json_object_get(doc, "next")) == (json_int_t)n);
        json_t *arr = json_object_get(doc, "items");
        FUZZ_ASSERT(json_array_size(arr) == n);
        for (size_t i = 0; i < n; i++)
            item_check(&items[i], json_array_get(arr, i));
        json_decref(doc);
        free(page);
    }
    for (size_t i = 0; i < n; i++)
        item_free(&items[i]);
    free(text);
    return 0;
}
