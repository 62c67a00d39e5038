/* Pages of list, log, claim and event responses written as JSON text as they are read: the
 * small members of each item are encoded by jansson, the large stored values are spliced in as
 * the JSON text PostgreSQL returned (never parsed into a tree, never held twice). A page counts
 * the bytes of its values against the response budget (ROWLOCK_RESPONSE_BUDGET). */
#ifndef SVC_JPAGE_H
#define SVC_JPAGE_H

#include <jansson.h>
#include <stddef.h>

struct svc_jpage {
    char *data; /* the text so far; owned by the page */
    size_t len, cap;
    size_t items;  /* elements written */
    size_t values; /* bytes of spliced values written */
    size_t budget;
    int failed; /* out of memory, or an item could not be encoded */
};

/* Starts {"<member>":[ . Allocates nothing yet. */
void svc_jpage_begin(struct svc_jpage *p, const char *member, size_t budget);
/* Would an item carrying value_bytes more go past the budget? The first item always fits, so a
 * value larger than the budget is served alone. */
int svc_jpage_full(const struct svc_jpage *p, size_t value_bytes);
/* Appends one element: the object env (stolen) with, after its own members, each member
 * names[i] set to the JSON text raw[i] (lens[i] bytes, trusted to be valid JSON; NULL writes
 * null). n may be 0. Returns 0, or -1 (and the page fails). */
int svc_jpage_item(struct svc_jpage *p, json_t *env, size_t n, const char *const *names,
                   const char *const *raw, const size_t *lens);
/* Closes the array, merges the members of tail (stolen, may be NULL) into the top-level object
 * and hands the text to the caller (free() it; its length in *len). NULL when the page failed;
 * the page is empty afterwards either way. */
char *svc_jpage_finish(struct svc_jpage *p, json_t *tail, size_t *len);
/* Frees a page that will not be finished. NULL-safe for an unstarted page. */
void svc_jpage_free(struct svc_jpage *p);

#endif
