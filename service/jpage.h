/* Answers that carry stored JSON (payloads, values, results, event data: text PostgreSQL
 * returned), written as JSON text: the small members of each object are encoded by jansson and
 * the stored texts spliced in after them as PostgreSQL returned them, never parsed into a tree
 * (jansson refuses the long runs of digits jsonb writes for numbers such as 1e19) and never held
 * twice. One object (svc_jpage_object), or a page of them, {"<member>":[...], ...}, which counts
 * the bytes of its stored texts against the response budget (ROWLOCK_RESPONSE_BUDGET). Every
 * text is a struct svc_buf with a maximum: past it the answer fails, it is never cut. */
#ifndef SVC_JPAGE_H
#define SVC_JPAGE_H

#include <jansson.h>
#include <stddef.h>

#include "service/buf.h"

/* The most one object holds, and the most a page holds past its budget: the stored texts of one
 * row (PostgreSQL sends no row over 1 GiB), and room for the envelopes (ids, keys, times) of
 * every item of a page. */
#define SVC_JPAGE_SLACK (((size_t)1 << 30) + ((size_t)64 << 20))

/* A stored JSON text spliced in as member name: len bytes of text, trusted to be valid JSON (as
 * PostgreSQL returned it); a NULL text writes null. Borrowed: nothing here keeps it. */
struct svc_jpage_raw {
    const char *name;
    const char *text;
    size_t len;
};

/* Appends to b the object env (stolen) with, after its own members, the members raw[0..n) (n may
 * be 0). Returns 0, or -1 when env is not an object or cannot be encoded, or when b would pass
 * its maximum or memory ran out; b then holds what it held before. */
int svc_jpage_splice(struct svc_buf *b, json_t *env, const struct svc_jpage_raw *raw, size_t n);
/* The object svc_jpage_splice writes, alone, as text of at most SVC_JPAGE_SLACK bytes: the
 * caller frees it; its length in *len. env is stolen. NULL when it cannot be written. */
char *svc_jpage_object(json_t *env, const struct svc_jpage_raw *raw, size_t n, size_t *len);

struct svc_jpage {
    struct svc_buf text; /* the page so far: at most budget + SVC_JPAGE_SLACK bytes */
    size_t items;        /* elements written */
    size_t values;       /* bytes of spliced texts written */
    size_t budget;
    int failed; /* out of memory or past the maximum, or an item could not be encoded */
};

/* Starts {"<member>":[ . */
void svc_jpage_begin(struct svc_jpage *p, const char *member, size_t budget);
/* Would an item carrying value_bytes more go past the budget? The first item always fits, so a
 * value larger than the budget is served alone. */
int svc_jpage_full(const struct svc_jpage *p, size_t value_bytes);
/* Appends one element, the object svc_jpage_splice writes of env (stolen) and raw[0..n).
 * Returns 0, or -1 (and the page fails). */
int svc_jpage_item(struct svc_jpage *p, json_t *env, const struct svc_jpage_raw *raw, size_t n);
/* Closes the array, merges the members of tail (stolen, may be NULL) into the top-level object
 * and hands the text to the caller (free() it; its length in *len). NULL when the page failed;
 * the page is empty afterwards either way. */
char *svc_jpage_finish(struct svc_jpage *p, json_t *tail, size_t *len);
/* Frees a page that will not be finished. NULL-safe for an unstarted page. */
void svc_jpage_free(struct svc_jpage *p);

#endif
