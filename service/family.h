/* A family (topics, queues, ledgers, the operations routes, the dashboard): the descriptor one
 * routes/<family>.c exports so that main can serve it without knowing it. main starts the
 * families in order, takes their routes into one route table, registers their problem codes,
 * runs one janitor thread for each janitor pass, shares their wake channels with the other
 * processes, and /metrics renders each family's metrics and its resources' summary. service/
 * defines the type; routes/families.c lists the families the binary serves. */
#ifndef SVC_FAMILY_H
#define SVC_FAMILY_H

#include <stddef.h>

#include "service/problem.h"
#include "service/router.h"

struct svc_app;
struct svc_buf;
struct db_upkeep;

struct svc_family {
    const char *name; /* "topics": the janitor thread's name, and in logs */
    /* A family of resources (topics, queues, ledgers) names its resource in the singular
     * ("topic"); the rest follows from it. Its wake channels are "<resource>:<name>" and reach
     * the other processes (ROWLOCK_NOTIFY); /metrics gives rowlock_<family name> (how many),
     * rowlock_<resource>_metrics_omitted and rowlock_<resource>_upkeep_due_seconds. Such a
     * family must have upkeep (whose family is this name), render_metrics and janitor_pass
     * (svc_families_check). NULL for the families that serve no resource. */
    const char *resource;
    const struct db_upkeep *upkeep; /* db/upkeep.h: when its resources' upkeep is due */
    const struct svc_route *routes;
    size_t nroutes;
    /* the codes only this family answers (listed in openapi.json like every code) */
    const struct svc_problem_info *problems;
    size_t nproblems;
    /* Each may be NULL. init runs once before the server starts (metrics registration, state
     * of its own): 0, or -1 to stop the process. fini runs after the server has stopped. */
    int (*init)(const struct svc_app *app);
    void (*fini)(void);
    /* appends the family's own series to a /metrics scrape */
    void (*render_metrics)(struct svc_buf *b, struct svc_app *app);
    /* one janitor pass (ctx: the struct svc_app), every janitor_interval_ms, or
     * ROWLOCK_JANITOR_INTERVAL_MS when that is 0 */
    void (*janitor_pass)(void *ctx);
    long janitor_interval_ms;
};

/* The families this binary serves, in order; defined by routes/families.c. */
extern const struct svc_family *const svc_families[];
extern const size_t svc_families_count;

/* The routes of families[0..n) as one table (malloc'd; *count rows), or NULL when out of memory. */
struct svc_route *svc_families_routes(const struct svc_family *const *families, size_t n,
                                      size_t *count);
/* Registers every family's problem codes: 0, or -1 (logged) when two use one code. */
int svc_families_register_problems(const struct svc_family *const *families, size_t n);
/* Checks that every family of resources has what serving it takes (see struct svc_family) and
 * that no two share a name or a resource: 0, or -1 with a sentence in why. */
int svc_families_check(const struct svc_family *const *families, size_t n, char *why, size_t size);
/* The wake channel of resource `name` of family f ("topic:orders") in buf (SVC_CHANNEL_MAX
 * bytes); returns buf. */
const char *svc_family_channel(const struct svc_family *f, const char *name, char *buf,
                               size_t size);
/* True when channel is the wake channel of a resource of one of the families (a channel that
 * other processes must hear of), not one of a process's own (a key gate's, say). */
int svc_families_shared_channel(const struct svc_family *const *families, size_t n,
                                const char *channel);

#endif
