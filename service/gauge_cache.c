/* Gauges served from the last count while counting is slow (see gauge_cache.h). */
#include "service/gauge_cache.h"

#include <stdio.h>

#include "service/clock.h"
#include "service/metrics.h"

/* Counts and keeps the result; budget_ms above 0 cuts the count off after that long, which keeps
 * the last whole count (its families, its age and whether it was read) and asks the janitor for a
 * count. */
static void count(struct svc_gauge_cache *g, void *ctx, int budget_ms)
{
    struct svc_buf text;
    svc_buf_init(&text, 16 * 1024 * 1024);
    int ok = 0;
    double t0 = svc_now();
    int cut = g->count(ctx, budget_ms, &text, &ok);
    double t1 = svc_now();
    pthread_mutex_lock(&g->mu);
    g->took_ms = (t1 - t0) * 1000.0;
    if (cut && g->have) {
        svc_buf_free(&text);
        g->wanted = 1;
        g->cut++;
    } else {
        svc_buf_free(&g->text);
        g->text = text;
        g->ok = ok;
        g->at_s = t1;
        g->have = 1;
    }
    pthread_mutex_unlock(&g->mu);
}

/* One series of one sample without labels, named name and suffix. */
static void series(struct svc_buf *b, const char *name, const char *suffix, const char *type,
                   const char *help, double value)
{
    char full[128];
    snprintf(full, sizeof(full), "%s%s", name, suffix);
    svc_metrics_family(b, full, type, help);
    svc_metrics_sample(b, full, NULL, value);
}

void svc_gauge_cache_render(struct svc_gauge_cache *g, struct svc_buf *b, long sync_ms, void *ctx)
{
    pthread_mutex_lock(&g->mu);
    int first = !g->have;
    int now = first || g->took_ms < (double)sync_ms;
    g->wanted |= !now;
    pthread_mutex_unlock(&g->mu);
    if (now)
        count(g, ctx, first ? 0 : (int)sync_ms);
    char help[256];
    pthread_mutex_lock(&g->mu);
    int ok = g->ok;
    double age = svc_now() - g->at_s, took = g->took_ms / 1000.0;
    uint64_t cut = g->cut;
    if (g->text.data != NULL)
        svc_buf_append(b, g->text.data, g->text.len);
    pthread_mutex_unlock(&g->mu);
    series(b, g->up, "", "gauge", g->up_help, ok ? 1 : 0);
    snprintf(help, sizeof(help),
             "Age of the count behind %s (above 0 once a count took ROWLOCK_METRICS_SYNC_MS or "
             "more: the janitor counts then)",
             g->what);
    series(b, g->prefix, "_age_seconds", "gauge", help, age);
    series(b, g->prefix, "_count_seconds", "gauge", "How long that count took", took);
    snprintf(help, sizeof(help),
             "Scrapes' counts of %s cut off at ROWLOCK_METRICS_SYNC_MS (the scrape answered with "
             "the last whole count)",
             g->what);
    series(b, g->prefix, "_cut_total", "counter", help, (double)cut);
}

void svc_gauge_cache_janitor(struct svc_gauge_cache *g, void *ctx)
{
    pthread_mutex_lock(&g->mu);
    int wanted = g->wanted;
    g->wanted = 0;
    pthread_mutex_unlock(&g->mu);
    if (wanted)
        count(g, ctx, 0);
}

void svc_gauge_cache_reset(struct svc_gauge_cache *g)
{
    pthread_mutex_lock(&g->mu);
    svc_buf_free(&g->text);
    g->ok = g->have = g->wanted = 0;
    g->at_s = g->took_ms = 0;
    g->cut = 0;
    pthread_mutex_unlock(&g->mu);
}
