/* Background jobs of a rowlock process: one thread that runs a pass function every interval
 * until stopped. Every pass must be safe while other processes run the same pass (they
 * coordinate only through PostgreSQL row locks). What a pass does belongs to its caller. */
#ifndef SVC_JANITOR_H
#define SVC_JANITOR_H

struct svc_janitor;

typedef void (*svc_janitor_pass)(void *ctx);

/* Starts the thread; the first pass runs after one interval. NULL when it cannot start. */
struct svc_janitor *svc_janitor_start(const char *name, long interval_ms, svc_janitor_pass pass,
                                      void *ctx);
/* Stops after the pass in progress (if any) and frees. NULL-safe. */
void svc_janitor_stop(struct svc_janitor *j);

#endif
