/* Gauges whose count may grow slow (a scan of every job kept in a hundred queues, a query on each
 * of a hundred ledgers' own tables): a scrape counts them itself while the last count took less
 * than the sync budget (ROWLOCK_METRICS_SYNC_MS), and its count is cut off after that long. After
 * a slower or cut count it answers with the last whole count at once, and the janitor's next pass
 * counts anew (to the end) when a scrape asked since, so that no scrape waits for the count and a
 * process nobody scrapes does not count. A quick count puts the scrapes back in charge. A
 * process's first count is never cut: there is nothing to answer with before it. */
#ifndef SVC_GAUGE_CACHE_H
#define SVC_GAUGE_CACHE_H

#include <pthread.h>
#include <stdint.h>

#include "service/buf.h"

/* A count: renders its families and samples into out. budget_ms above 0 cuts it off after that
 * long. Returns 1 when it was cut off (out is then dropped), 0 otherwise; *ok says whether the
 * count could read what it counts (its families are kept either way). */
typedef int (*svc_gauge_count_fn)(void *ctx, int budget_ms, struct svc_buf *out, int *ok);

struct svc_gauge_cache {
    const char *prefix; /* <prefix>_age_seconds, _count_seconds, _cut_total */
    const char *what;   /* what the count is behind, for their HELP */
    const char *up;     /* the series that says the count's ok, 1 or 0 */
    const char *up_help;
    svc_gauge_count_fn count;
    pthread_mutex_t mu;
    /* under mu */
    struct svc_buf text; /* the rendered families of the last whole count */
    int ok;              /* that count's *ok */
    int have;            /* a count was made */
    int wanted;          /* a scrape answered with the last count since the janitor's */
    double at_s;         /* when the last whole count ended (monotonic) */
    double took_ms;      /* how long the last count took (a cut one: until it was cut) */
    uint64_t cut;        /* scrapes' counts cut off */
};

#define SVC_GAUGE_CACHE_INIT(prefix, what, up, up_help, count)                                     \
    {                                                                                              \
        (prefix), (what), (up), (up_help), (count), PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0, 0, 0, 0, \
            0                                                                                      \
    }

/* A scrape: appends the gauges (counted now, or the last count's), the up series of that count and
 * the cache's own three series to b; ctx goes to the count. */
void svc_gauge_cache_render(struct svc_gauge_cache *g, struct svc_buf *b, long sync_ms, void *ctx);
/* The janitor's pass: counts to the end when a scrape answered with the last count since. */
void svc_gauge_cache_janitor(struct svc_gauge_cache *g, void *ctx);
/* Forgets every count (the process's routes are torn down). */
void svc_gauge_cache_reset(struct svc_gauge_cache *g);

#endif
