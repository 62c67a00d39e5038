/* A resource family (topics, queues, ledgers, the operations routes, the dashboard): what one
 * routes/<family>.c exports so that main can serve it without knowing it. main starts the
 * families in order, takes their routes into one route table, registers their problem codes,
 * runs one janitor thread for each janitor pass, and /metrics renders each family's metrics.
 * service/ defines the type; routes/families.c lists the families the binary serves. */
#ifndef SVC_FAMILY_H
#define SVC_FAMILY_H

#include <stddef.h>

#include "service/problem.h"
#include "service/router.h"

struct svc_app;
struct svc_buf;

struct svc_family {
    const char *name; /* "topics": the janitor thread's name, and in logs */
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
    /* one janitor pass (ctx: the struct svc_app), every ROWLOCK_JANITOR_INTERVAL_MS */
    void (*janitor_pass)(void *ctx);
};

/* The families this binary serves, in order; defined by routes/families.c. */
extern const struct svc_family *const svc_families[];
extern const size_t svc_families_count;

/* The routes of families[0..n) as one table (malloc'd; *count rows), or NULL when out of memory. */
struct svc_route *svc_families_routes(const struct svc_family *const *families, size_t n,
                                      size_t *count);
/* Registers every family's problem codes: 0, or -1 (logged) when two use one code. */
int svc_families_register_problems(const struct svc_family *const *families, size_t n);

#endif
