/* Per-token limits (see limits.h): a small hash table of token names under one mutex, each
 * entry a token bucket, a count of long-polls in flight and the refusals. Entries are made on a
 * name's first limited request and kept until the set is freed, so a long-poll can hold one,
 * and a counter never goes back; the names come from the operator's tokens file. */
#include "service/limits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/auth.h"
#include "service/metrics.h"

#define BUCKETS 64

struct svc_limit_entry {
    char name[SVC_AUTH_NAME_MAX + 1];
    double tokens;     /* requests the bucket holds now (fractions refill) */
    double last;       /* when tokens was last brought up to date */
    atomic_long polls; /* long-polls holding a place */
    unsigned long refused_rate, refused_polls;
    struct svc_limit_entry *next;
};

struct svc_limits {
    pthread_mutex_t mu; /* guards the table and every entry's tokens, last and counts */
    struct svc_limit_entry *table[BUCKETS];
};

struct svc_limits *svc_limits_new(void)
{
    struct svc_limits *l = calloc(1, sizeof(*l));
    if (l != NULL && pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        l = NULL;
    }
    return l;
}

void svc_limits_free(struct svc_limits *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < BUCKETS; i++) {
        while (l->table[i] != NULL) {
            struct svc_limit_entry *e = l->table[i];
            l->table[i] = e->next;
            free(e);
        }
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* name's entry, made (its bucket full, burst requests) when there is none; NULL when out of
 * memory. Called with l->mu held. */
static struct svc_limit_entry *entry_of(struct svc_limits *l, const char *name, long burst,
                                        double now)
{
    unsigned h = 2166136261u; /* FNV-1a */
    for (const char *p = name; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    struct svc_limit_entry **slot = &l->table[h % BUCKETS];
    for (struct svc_limit_entry *e = *slot; e != NULL; e = e->next)
        if (strcmp(e->name, name) == 0)
            return e;
    struct svc_limit_entry *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->tokens = (double)burst;
    e->last = now;
    e->next = *slot;
    *slot = e;
    return e;
}

long svc_limits_take(struct svc_limits *l, const char *name, const struct svc_limit *lim,
                     double now)
{
    long wait = 0;
    double rate = (double)lim->rate, burst = (double)(lim->burst > 0 ? lim->burst : 1);
    pthread_mutex_lock(&l->mu);
    struct svc_limit_entry *e = entry_of(l, name, (long)burst, now);
    if (e != NULL) {
        double filled = e->tokens + (now > e->last ? now - e->last : 0) * rate;
        e->tokens = filled < burst ? filled : burst; /* a lower burst (a reload) applies at once */
        e->last = now > e->last ? now : e->last;
        if (e->tokens >= 1.0) {
            e->tokens -= 1.0;
        } else {
            double s = (1.0 - e->tokens) / rate;
            wait = (long)s + ((double)(long)s < s);
            wait = wait < 1 ? 1 : wait;
            e->refused_rate++;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return wait;
}

int svc_limits_poll_take(struct svc_limits *l, const char *name, const struct svc_limit *lim,
                         struct svc_limit_entry **held)
{
    int refused = 0;
    *held = NULL;
    pthread_mutex_lock(&l->mu);
    struct svc_limit_entry *e = entry_of(l, name, lim->burst, 0);
    if (e != NULL && atomic_load(&e->polls) >= lim->long_polls) {
        e->refused_polls++;
        refused = 1;
    } else if (e != NULL) {
        atomic_fetch_add(&e->polls, 1);
        *held = e;
    }
    pthread_mutex_unlock(&l->mu);
    return refused;
}

void svc_limits_poll_give_back(struct svc_limit_entry *held)
{
    if (held != NULL)
        atomic_fetch_sub(&held->polls, 1);
}

int svc_limits_render(struct svc_limits *l, struct svc_buf *b)
{
    static const char *const name = "rowlock_http_limited_total";
    int rc = svc_metrics_family(b, name, "counter",
                                "Requests refused with 429 by their token's limits, by token name "
                                "and reason (rate, long_polls); this process only");
    if (l == NULL)
        return rc;
    pthread_mutex_lock(&l->mu);
    for (size_t i = 0; i < BUCKETS && rc == 0; i++) {
        for (struct svc_limit_entry *e = l->table[i]; e != NULL && rc == 0; e = e->next) {
            for (int r = 0; r < 2 && rc == 0; r++) {
                rc |= svc_buf_printf(b, "%s{", name);
                rc |= svc_metrics_label(b, "token", e->name);
                rc |= svc_buf_puts(b, ",");
                rc |= svc_metrics_label(b, "reason", r == 0 ? "rate" : "long_polls");
                rc |= svc_buf_printf(b, "} %lu\n", r == 0 ? e->refused_rate : e->refused_polls);
            }
        }
    }
    pthread_mutex_unlock(&l->mu);
    return rc == 0 ? 0 : -1;
}
