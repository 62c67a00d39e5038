/* The metrics registry: atomic counters and fixed-bucket histograms of HTTP requests by route
 * template, method and status, plus helpers that write Prometheus text format for gauges that
 * other modules own (the pool, per-resource counts). Rendering the /metrics route belongs to
 * routes/ops.c. */
#ifndef SVC_METRICS_H
#define SVC_METRICS_H

#include <stdint.h>

#include "service/buf.h"
#include "service/router.h"

/* Sets up counters for the route table (kept by pointer; must outlive the registry). */
int svc_metrics_init(const struct svc_route *routes, size_t nroutes);
void svc_metrics_shutdown(void);

/* Records one finished request. route is the table index, or -1 when none matched. */
void svc_metrics_observe_http(int route, int status, double seconds);

/* Appends the HTTP request counters and latency histograms. Returns 0 or -1 (buffer full). */
int svc_metrics_render_http(struct svc_buf *b);

/* A counter family with labels (for example per topic). label names one label, or several
 * joined by commas ("queue,reason") whose values are then joined by \x1f. Families are created
 * once at startup and live until svc_metrics_shutdown; adding is thread-safe. */
struct svc_counter_vec;
struct svc_counter_vec *svc_counter_vec_new(const char *name, const char *help, const char *label);
void svc_counter_vec_add(struct svc_counter_vec *v, const char *label_value, uint64_t n);
/* Bounds v: past svc_metrics_set_series_limit distinct label values, a new one is counted under
 * SVC_METRICS_OTHER in place of its first label (the others kept), so that counters labelled by a
 * topic or ledger stay a bounded set however many there are. Call before adding. */
#define SVC_METRICS_OTHER "_other"
void svc_counter_vec_bound(struct svc_counter_vec *v);
/* The series a bounded vec keeps (ROWLOCK_METRICS_MAX_RESOURCES); 100 until set. */
void svc_metrics_set_series_limit(long limit);
/* Appends every family made with svc_counter_vec_new. */
int svc_metrics_render_vecs(struct svc_buf *b);

/* Appends "# HELP name help\n# TYPE name type\n". */
int svc_metrics_family(struct svc_buf *b, const char *name, const char *type, const char *help);
/* Appends one sample: name{labels} value. labels is pre-rendered ("a=\"x\"") or NULL. */
int svc_metrics_sample(struct svc_buf *b, const char *name, const char *labels, double value);
/* Appends the header of family name and, from rows (rendered samples of several families
 * interleaved, one per line; NULL: none), the samples of that family only, in their order:
 * Prometheus text format wants a family's samples together under its header. Only labelled
 * samples ("name{...} v") are taken: rows come from per-resource statements, whose samples all
 * carry the resource's label, and "name_suffix{" of another family never matches. Returns 0 or
 * -1. */
int svc_metrics_family_from(struct svc_buf *b, const char *rows, const char *name, const char *type,
                            const char *help);
/* Appends label="value" with Prometheus escaping (backslash, quote, newline). */
int svc_metrics_label(struct svc_buf *b, const char *label, const char *value);

/* Appends the process metrics under the names every Prometheus client library uses
 * (process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds, process_start_time_seconds), read from getrusage,
 * getrlimit and /proc/self; a source that cannot be read leaves its metric out. Returns 0 or -1
 * (buffer full). */
int svc_metrics_render_process(struct svc_buf *b);
/* Appends rowlock_build_info{version,commit,schema_version} 1. Returns 0 or -1. */
int svc_metrics_render_build(struct svc_buf *b, int schema_version);

#endif
