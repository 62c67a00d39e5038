/* Per-token limits: for each token name, a bucket of requests (a rate, refilled continuously,
 * and a burst) and a cap on its concurrent long-polls, with the refusals counted per name and
 * reason for /metrics. The state is this process's own: N processes allow N times the rate.
 * Which requests are limited, and the 429 answers, belong to http_check.c and wait.c. */
#ifndef SVC_LIMITS_H
#define SVC_LIMITS_H

#include "service/buf.h"

/* Largest rate, burst and long-poll cap a setting or a tokens file line may give. */
#define SVC_LIMIT_MAX 1000000

/* A token's limits (0: none of that kind). In a tokens file line's form (svc_auth_check), -1
 * stands for "the setting's". */
struct svc_limit {
    long rate;       /* requests a second, refilled continuously; 0: no rate limit */
    long burst;      /* requests that may come at once (the bucket's size), at least 1 */
    long long_polls; /* long-polls at once; 0: no cap */
};

struct svc_limits;
/* One token name's state; lives as long as its struct svc_limits. */
struct svc_limit_entry;

/* A new, empty set (svc_limits_free it), or NULL when out of memory. */
struct svc_limits *svc_limits_new(void);
/* Frees l and every entry (no request may hold one any more). NULL is a no-op. */
void svc_limits_free(struct svc_limits *l);

/* Takes one request from name's bucket at now (svc_now seconds); lim->rate must be above 0.
 * Returns 0 when it may pass, else the whole seconds (at least 1) until one would, having
 * counted the refusal. Out of memory for a new name: 0. */
long svc_limits_take(struct svc_limits *l, const char *name, const struct svc_limit *lim,
                     double now);
/* Takes one of name's lim->long_polls places (above 0). Returns 0 with the entry to give back
 * in *held (NULL when out of memory), or 1 when they are all taken (counted). */
int svc_limits_poll_take(struct svc_limits *l, const char *name, const struct svc_limit *lim,
                         struct svc_limit_entry **held);
/* Gives back the long-poll place taken with svc_limits_poll_take. NULL is a no-op. */
void svc_limits_poll_give_back(struct svc_limit_entry *held);

/* Appends rowlock_http_limited_total{token,reason} (reason "rate" or "long_polls") for every
 * name that has had a limit (l NULL: none). Returns 0 or -1 (buffer full). */
int svc_limits_render(struct svc_limits *l, struct svc_buf *b);

#endif
