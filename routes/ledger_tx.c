/* Parsing a ledger transaction: the JSON of a submission or of a checkpoint's transaction into
 * the db/ structures (see routes/ledgers.h). Part of the ledgers family (routes/ledgers.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"
#include "routes/ledgers.h"
#include "routes/routes.h"

/* The members of a transaction; a submission also takes wait_seconds. */
const char *const tx_members[] = {"digest",   "inputs", "writes", "deletes",
                                  "displays", "events", NULL};
const char *const submit_members[] = {"digest",   "inputs", "writes",       "deletes",
                                      "displays", "events", "wait_seconds", NULL};

void parsed_tx_free(struct parsed_tx *p)
{
    for (size_t i = 0; i < p->ntexts; i++)
        free(p->texts[i]);
    free(p->texts);
    free(p->inputs);
    free(p->objects);
    free(p->displays);
    free(p->events);
    memset(p, 0, sizeof(*p));
}

/* JSON text of v, kept in p (freed with it). NULL when out of memory (p->no_memory set). */
static const char *keep_text(struct parsed_tx *p, json_t *v)
{
    char *t = json_dumps(v ? v : json_null(), JSON_COMPACT | JSON_ENCODE_ANY);
    if (t != NULL)
        p->texts[p->ntexts++] = t;
    else
        p->no_memory = 1;
    return t;
}

static int version_of(json_t *o, int64_t *v, char *why, size_t size)
{
    json_t *j = json_object_get(o, "version");
    if (!json_is_integer(j) || json_integer_value(j) < 0 ||
        json_integer_value(j) > DB_LEDGER_INT_MAX) {
        snprintf(why, size, "\"version\" is an integer from 0 to %" PRId64, DB_LEDGER_INT_MAX);
        return 0;
    }
    *v = json_integer_value(j);
    return 1;
}

static int key_member(json_t *o, const char *name, const char **out, char *why, size_t size)
{
    *out = json_string_value(json_object_get(o, name));
    if (*out == NULL) {
        snprintf(why, size, "\"%s\" is a string", name);
        return 0;
    }
    char rule[160];
    if (!route_key_ok(*out, rule, sizeof(rule))) {
        snprintf(why, size, "\"%s\": %s", name, rule);
        return 0;
    }
    return 1;
}

/* An array member with at most DB_LEDGER_EFFECTS_MAX elements (absent: empty). */
static int array_member(json_t *o, const char *name, json_t **arr, char *why, size_t size)
{
    *arr = json_object_get(o, name);
    if (*arr == NULL)
        return 1;
    if (!json_is_array(*arr)) {
        snprintf(why, size, "\"%s\" is an array", name);
        return 0;
    }
    if (json_array_size(*arr) > DB_LEDGER_EFFECTS_MAX) {
        snprintf(why, size, "\"%s\" holds at most %d entries", name, DB_LEDGER_EFFECTS_MAX);
        return 0;
    }
    return 1;
}

/* The array members of a transaction, in the order they are parsed. */
struct tx_arrays {
    json_t *inputs, *writes, *deletes, *displays, *events;
};

static int parse_tx_members(json_t *j, const char *const *allowed, struct parsed_tx *p,
                            struct tx_arrays *a, char *why, size_t size)
{
    if (!json_is_object(j)) {
        snprintf(why, size, "a transaction is a JSON object");
        return 0;
    }
    return route_only_members(j, allowed, why, size) &&
           key_member(j, "digest", &p->tx.digest, why, size) &&
           array_member(j, "inputs", &a->inputs, why, size) &&
           array_member(j, "writes", &a->writes, why, size) &&
           array_member(j, "deletes", &a->deletes, why, size) &&
           array_member(j, "displays", &a->displays, why, size) &&
           array_member(j, "events", &a->events, why, size);
}

/* Is the object change i the same (object, version) as an earlier one? */
static int object_repeated(const struct parsed_tx *p, size_t i, char *why, size_t size)
{
    const struct db_ledger_object *x = &p->objects[i];
    for (size_t k = 0; k < i; k++) {
        if (strcmp(p->objects[k].object_id, x->object_id) == 0 &&
            p->objects[k].version == x->version) {
            snprintf(why, size, "object %s is %s at version %" PRId64, x->object_id,
                     p->objects[k].deleted != x->deleted ? "both written and deleted"
                                                         : "changed twice",
                     x->version);
            return 1;
        }
    }
    return 0;
}

static int parse_objects(json_t *writes, json_t *deletes, struct parsed_tx *p, char *why,
                         size_t size)
{
    size_t nw = json_array_size(writes), nd = json_array_size(deletes);
    p->objects = calloc(nw + nd + 1, sizeof(*p->objects));
    if (p->objects == NULL) {
        p->no_memory = 1;
        return 0;
    }
    for (size_t i = 0; i < nw + nd; i++) {
        int del = i >= nw;
        json_t *o = json_array_get(del ? deletes : writes, del ? i - nw : i);
        struct db_ledger_object *x = &p->objects[i];
        if (!json_is_object(o) || !key_member(o, "object_id", &x->object_id, why, size) ||
            !version_of(o, &x->version, why, size))
            return 0;
        x->deleted = del;
        if (!del && (!key_member(o, "type", &x->type, why, size) ||
                     (x->data = keep_text(p, json_object_get(o, "data"))) == NULL))
            return 0;
        if (object_repeated(p, i, why, size))
            return 0;
    }
    p->tx.objects = p->objects;
    p->tx.nobjects = nw + nd;
    return 1;
}

/* Inputs, displays and events, into the arrays parse_tx allocated. */
static int parse_effects(const struct tx_arrays *a, struct parsed_tx *p, char *why, size_t size)
{
    for (size_t i = 0; i < p->tx.ninputs; i++) {
        json_t *o = json_array_get(a->inputs, i);
        if (!json_is_object(o) || !key_member(o, "object_id", &p->inputs[i].object_id, why, size) ||
            !version_of(o, &p->inputs[i].version, why, size))
            return 0;
    }
    for (size_t i = 0; i < p->tx.ndisplays; i++) {
        json_t *o = json_array_get(a->displays, i);
        if (!json_is_object(o) || !key_member(o, "type", &p->displays[i].type, why, size) ||
            !version_of(o, &p->displays[i].version, why, size) ||
            (p->displays[i].data = keep_text(p, json_object_get(o, "data"))) == NULL)
            return 0;
    }
    for (size_t i = 0; i < p->tx.nevents; i++) {
        json_t *o = json_array_get(a->events, i);
        if (!json_is_object(o) || !key_member(o, "type", &p->events[i].type, why, size) ||
            (p->events[i].data = keep_text(p, json_object_get(o, "data"))) == NULL)
            return 0;
    }
    return 1;
}

/* Parses {digest, inputs, writes, deletes, displays, events} (the members allowed). 1 when
 * valid; else 0, with why saying what is wrong unless p->no_memory is set. */
int parse_tx(json_t *j, const char *const *allowed, struct parsed_tx *p, char *why, size_t size)
{
    struct tx_arrays a = {NULL, NULL, NULL, NULL, NULL};
    memset(p, 0, sizeof(*p));
    if (!parse_tx_members(j, allowed, p, &a, why, size))
        return 0;
    size_t ni = json_array_size(a.inputs), ndi = json_array_size(a.displays),
           ne = json_array_size(a.events);
    p->texts = calloc(json_array_size(a.writes) + ndi + ne + 1, sizeof(char *));
    p->inputs = calloc(ni + 1, sizeof(*p->inputs));
    p->displays = calloc(ndi + 1, sizeof(*p->displays));
    p->events = calloc(ne + 1, sizeof(*p->events));
    if (p->texts == NULL || p->inputs == NULL || p->displays == NULL || p->events == NULL) {
        p->no_memory = 1;
        return 0;
    }
    if (!parse_objects(a.writes, a.deletes, p, why, size))
        return 0;
    p->tx.inputs = p->inputs;
    p->tx.ninputs = ni;
    p->tx.displays = p->displays;
    p->tx.ndisplays = ndi;
    p->tx.events = p->events;
    p->tx.nevents = ne;
    return parse_effects(&a, p, why, size);
}
