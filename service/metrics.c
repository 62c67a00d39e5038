/* HTTP request metrics (see metrics.h): counters indexed by route and status code, one latency
 * histogram per route. All updates are relaxed atomics; rendering reads them without locks. */
#include "service/metrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "service/clock.h"
#include "service/version.h"

#define STATUS_SLOTS 600
static const double buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                 0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define NBUCKETS (sizeof(buckets) / sizeof(buckets[0]))

struct route_metrics {
    atomic_uint_fast64_t status[STATUS_SLOTS];
    atomic_uint_fast64_t bucket[NBUCKETS + 1]; /* last is +Inf */
    atomic_uint_fast64_t sum_ns;
};

struct vec_entry {
    char *value;
    uint64_t count;
};

struct svc_counter_vec {
    const char *name, *help, *label;
    pthread_mutex_t mu;
    struct vec_entry *entries; /* in the order their labels were first added */
    size_t n, cap;
    /* an open-addressing index of entries by label: slots[h] is an entry's index + 1, 0 empty;
     * nslots a power of two, kept above twice n (a counter is added on every request, on any
     * of the resources a process serves) */
    size_t *slots, nslots;
    int bounded;
    struct svc_counter_vec *next;
};

static pthread_mutex_t vecs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct svc_counter_vec *vecs;

static const struct svc_route *metric_routes;
static size_t metric_nroutes;
static struct route_metrics *per_route; /* metric_nroutes + 1; the last is "unmatched" */
/* wall-clock seconds at svc_metrics_init: the start time where /proc/stat cannot be read (a
 * systemd unit with ProcSubset=pid); written before any thread reads it */
static double init_wall_s;

int svc_metrics_init(const struct svc_route *routes, size_t nroutes)
{
    per_route = calloc(nroutes + 1, sizeof(*per_route));
    if (per_route == NULL)
        return -1;
    metric_routes = routes;
    metric_nroutes = nroutes;
    init_wall_s = svc_wall_now();
    return 0;
}

void svc_metrics_shutdown(void)
{
    free(per_route);
    per_route = NULL;
    metric_nroutes = 0;
    pthread_mutex_lock(&vecs_mu);
    while (vecs != NULL) {
        struct svc_counter_vec *v = vecs;
        vecs = v->next;
        for (size_t i = 0; i < v->n; i++)
            free(v->entries[i].value);
        free(v->entries);
        free(v->slots);
        pthread_mutex_destroy(&v->mu);
        free(v);
    }
    pthread_mutex_unlock(&vecs_mu);
}

struct svc_counter_vec *svc_counter_vec_new(const char *name, const char *help, const char *label)
{
    struct svc_counter_vec *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return NULL;
    v->name = name;
    v->help = help;
    v->label = label;
    pthread_mutex_init(&v->mu, NULL);
    pthread_mutex_lock(&vecs_mu);
    v->next = vecs;
    vecs = v;
    pthread_mutex_unlock(&vecs_mu);
    return v;
}

static atomic_long series_limit = 100;

void svc_metrics_set_series_limit(long limit)
{
    atomic_store(&series_limit, limit);
}

void svc_counter_vec_bound(struct svc_counter_vec *v)
{
    if (v != NULL)
        v->bounded = 1;
}

static size_t label_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull; /* FNV-1a, 64 bits */
    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)(h ^ (h >> 32));
}

/* The index of label_value's entry, or v->n when it has none. */
static size_t vec_find(const struct svc_counter_vec *v, const char *label_value)
{
    if (v->nslots == 0)
        return v->n;
    for (size_t h = label_hash(label_value) & (v->nslots - 1);; h = (h + 1) & (v->nslots - 1)) {
        size_t i = v->slots[h];
        if (i == 0)
            return v->n;
        if (strcmp(v->entries[i - 1].value, label_value) == 0)
            return i - 1;
    }
}

static void slot_put(struct svc_counter_vec *v, size_t i)
{
    size_t h = label_hash(v->entries[i].value) & (v->nslots - 1);
    while (v->slots[h] != 0)
        h = (h + 1) & (v->nslots - 1);
    v->slots[h] = i + 1;
}

/* Indexes entry i (= v->n, about to be added); grows the index first when it would be half
 * full. 0, or -1 out of memory. */
static int vec_index(struct svc_counter_vec *v, size_t i)
{
    if (2 * (i + 1) > v->nslots) {
        size_t nslots = v->nslots ? 2 * v->nslots : 32;
        size_t *slots = calloc(nslots, sizeof(*slots));
        if (slots == NULL)
            return -1;
        free(v->slots);
        v->slots = slots;
        v->nslots = nslots;
        for (size_t j = 0; j < i; j++)
            slot_put(v, j);
    }
    slot_put(v, i);
    return 0;
}

void svc_counter_vec_add(struct svc_counter_vec *v, const char *label_value, uint64_t n)
{
    if (v == NULL)
        return;
    pthread_mutex_lock(&v->mu);
    size_t i = vec_find(v, label_value);
    char other[256];
    /* a bounded vec at its limit (one series kept for the others): the first label is the rest */
    if (i == v->n && v->bounded && (long)v->n >= atomic_load(&series_limit)) {
        snprintf(other, sizeof(other), "%s%s", SVC_METRICS_OTHER,
                 label_value + strcspn(label_value, "\x1f"));
        label_value = other;
        i = vec_find(v, label_value);
    }
    if (i == v->n) {
        char *copy = strdup(label_value);
        if (v->n == v->cap) {
            size_t cap = v->cap ? v->cap * 2 : 16;
            struct vec_entry *grown = realloc(v->entries, cap * sizeof(*grown));
            if (grown != NULL) {
                v->entries = grown;
                v->cap = cap;
            }
        }
        if (copy == NULL || v->n == v->cap) {
            free(copy);
            pthread_mutex_unlock(&v->mu);
            return;
        }
        v->entries[v->n].value = copy;
        v->entries[v->n].count = 0;
        if (vec_index(v, v->n) != 0) {
            free(copy);
            pthread_mutex_unlock(&v->mu);
            return;
        }
        v->n++;
    }
    v->entries[i].count += n;
    pthread_mutex_unlock(&v->mu);
}

int svc_metrics_render_vecs(struct svc_buf *b)
{
    int rc = 0;
    pthread_mutex_lock(&vecs_mu);
    for (struct svc_counter_vec *v = vecs; v != NULL; v = v->next) {
        rc |= svc_metrics_family(b, v->name, "counter", v->help);
        pthread_mutex_lock(&v->mu);
        for (size_t i = 0; i < v->n; i++) {
            struct svc_buf l;
            svc_buf_init(&l, 4096);
            /* several labels: names "a,b", values joined by \x1f */
            const char *name = v->label, *value = v->entries[i].value;
            while (name != NULL && *name) {
                char n[64], val[1100];
                size_t nl = strcspn(name, ","), vl = strcspn(value, "\x1f");
                snprintf(n, sizeof(n), "%.*s", (int)nl, name);
                snprintf(val, sizeof(val), "%.*s", (int)vl, value);
                if (l.len > 0)
                    svc_buf_puts(&l, ",");
                svc_metrics_label(&l, n, val);
                name = name[nl] ? name + nl + 1 : NULL;
                value = value[vl] ? value + vl + 1 : value + vl;
            }
            rc |= svc_metrics_sample(b, v->name, l.data, (double)v->entries[i].count);
            svc_buf_free(&l);
        }
        pthread_mutex_unlock(&v->mu);
    }
    pthread_mutex_unlock(&vecs_mu);
    return rc;
}

void svc_metrics_observe_http(int route, int status, double seconds)
{
    if (per_route == NULL)
        return;
    struct route_metrics *m = &per_route[route < 0 ? metric_nroutes : (size_t)route];
    if (status < 0 || status >= STATUS_SLOTS)
        status = 0;
    atomic_fetch_add_explicit(&m->status[status], 1, memory_order_relaxed);
    size_t b = 0;
    while (b < NBUCKETS && seconds > buckets[b])
        b++;
    atomic_fetch_add_explicit(&m->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_ns, (uint_fast64_t)(seconds * 1e9), memory_order_relaxed);
}

int svc_metrics_family(struct svc_buf *b, const char *name, const char *type, const char *help)
{
    return svc_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int svc_metrics_family_from(struct svc_buf *b, const char *rows, const char *name, const char *type,
                            const char *help)
{
    int rc = svc_metrics_family(b, name, type, help);
    size_t n = strlen(name);
    for (const char *line = rows; line != NULL && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
        if (strncmp(line, name, n) == 0 && line[n] == '{')
            rc |= svc_buf_append(b, line, len);
        line += len;
    }
    return rc;
}

int svc_metrics_sample(struct svc_buf *b, const char *name, const char *labels, double value)
{
    int rc = svc_buf_puts(b, name);
    if (labels != NULL && labels[0] != '\0')
        rc |= svc_buf_printf(b, "{%s}", labels);
    if (isinf(value))
        rc |= svc_buf_puts(b, value > 0 ? " +Inf\n" : " -Inf\n");
    else if (value == floor(value) && fabs(value) < 1e15)
        rc |= svc_buf_printf(b, " %.0f\n", value);
    else
        rc |= svc_buf_printf(b, " %.9g\n", value);
    return rc;
}

int svc_metrics_label(struct svc_buf *b, const char *label, const char *value)
{
    int rc = svc_buf_printf(b, "%s=\"", label);
    for (const char *p = value; rc == 0 && *p; p++) {
        if (*p == '\\' || *p == '"')
            rc = svc_buf_printf(b, "\\%c", *p);
        else if (*p == '\n')
            rc = svc_buf_puts(b, "\\n");
        else
            rc = svc_buf_append(b, p, 1);
    }
    return rc | svc_buf_puts(b, "\"");
}

static void route_labels(struct svc_buf *l, size_t r)
{
    const char *method = r < metric_nroutes ? metric_routes[r].method : "";
    const char *path = r < metric_nroutes ? metric_routes[r].path : "unmatched";
    svc_metrics_label(l, "route", path);
    svc_buf_puts(l, ",");
    svc_metrics_label(l, "method", method);
}

static int render_requests(struct svc_buf *b)
{
    int rc = svc_metrics_family(b, "rowlock_http_requests_total", "counter",
                                "HTTP requests answered, by route template, method and status");
    for (size_t r = 0; r <= metric_nroutes; r++) {
        for (int s = 0; s < STATUS_SLOTS; s++) {
            uint64_t v = atomic_load_explicit(&per_route[r].status[s], memory_order_relaxed);
            if (v == 0)
                continue;
            struct svc_buf l;
            svc_buf_init(&l, 4096);
            route_labels(&l, r);
            svc_buf_printf(&l, ",status=\"%d\"", s);
            rc |= svc_metrics_sample(b, "rowlock_http_requests_total", l.data, (double)v);
            svc_buf_free(&l);
        }
    }
    return rc;
}

static int render_latency(struct svc_buf *b)
{
    const char *name = "rowlock_http_request_duration_seconds";
    int rc = svc_metrics_family(b, name, "histogram",
                                "Time from first byte of the request to the queued response");
    for (size_t r = 0; r <= metric_nroutes; r++) {
        uint64_t cum = 0;
        struct svc_buf l;
        svc_buf_init(&l, 4096);
        route_labels(&l, r);
        size_t base = l.len;
        for (size_t i = 0; i <= NBUCKETS; i++) {
            cum += atomic_load_explicit(&per_route[r].bucket[i], memory_order_relaxed);
            l.len = base;
            if (i < NBUCKETS)
                svc_buf_printf(&l, ",le=\"%g\"", buckets[i]);
            else
                svc_buf_puts(&l, ",le=\"+Inf\"");
            rc |= svc_metrics_sample(b, "rowlock_http_request_duration_seconds_bucket", l.data,
                                     (double)cum);
        }
        l.len = base;
        l.data[base] = '\0';
        double sum = (double)atomic_load_explicit(&per_route[r].sum_ns, memory_order_relaxed);
        rc |= svc_metrics_sample(b, "rowlock_http_request_duration_seconds_sum", l.data, sum / 1e9);
        rc |= svc_metrics_sample(b, "rowlock_http_request_duration_seconds_count", l.data,
                                 (double)cum);
        svc_buf_free(&l);
    }
    return rc;
}

int svc_metrics_render_http(struct svc_buf *b)
{
    if (per_route == NULL)
        return -1;
    return render_requests(b) | render_latency(b);
}

/* ---- the process: the standard names every Prometheus client library exports ---- */

/* Reads /proc/self/stat: start time (clock ticks after boot), virtual and resident size. The
 * command name in parentheses may hold spaces and parentheses: fields are counted after the last
 * ')'. Returns 0 or -1. */
static int proc_stat(unsigned long long *start_ticks, unsigned long long *vsize, long long *rss)
{
    char text[2048];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f == NULL)
        return -1;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *p = strrchr(text, ')');
    if (p == NULL)
        return -1;
    /* after ')': field 3 (state) onward; starttime is field 22, vsize 23, rss 24 */
    return sscanf(p + 2,
                  "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
                  "%*d %llu %llu %lld",
                  start_ticks, vsize, rss) == 3
               ? 0
               : -1;
}

/* The boot time (btime of /proc/stat) in seconds since the epoch, or -1. */
static long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    long long btime = -1;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "btime %lld", &btime) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return btime;
}

static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    long n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d))
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

int svc_metrics_render_process(struct svc_buf *b)
{
    struct rusage ru;
    int rc = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                     ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
        rc |= svc_metrics_family(b, "process_cpu_seconds_total", "counter",
                                 "Total user and system CPU time spent in seconds.");
        rc |= svc_metrics_sample(b, "process_cpu_seconds_total", NULL, cpu);
    }
    unsigned long long start = 0, vsize = 0;
    long long rss = 0;
    long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    double started = init_wall_s;
    if (proc_stat(&start, &vsize, &rss) == 0) {
        rc |= svc_metrics_family(b, "process_resident_memory_bytes", "gauge",
                                 "Resident memory size in bytes.");
        rc |= svc_metrics_sample(b, "process_resident_memory_bytes", NULL, (double)rss * page);
        rc |= svc_metrics_family(b, "process_virtual_memory_bytes", "gauge",
                                 "Virtual memory size in bytes.");
        rc |= svc_metrics_sample(b, "process_virtual_memory_bytes", NULL, (double)vsize);
        long long btime = boot_time();
        if (btime > 0 && ticks > 0)
            started = (double)(btime + (long long)(start / (unsigned long long)ticks));
    }
    if (started > 0) {
        rc |= svc_metrics_family(b, "process_start_time_seconds", "gauge",
                                 "Start time of the process since unix epoch in seconds.");
        rc |= svc_metrics_sample(b, "process_start_time_seconds", NULL, started);
    }
    long fds = open_fds();
    if (fds >= 0) {
        rc |=
            svc_metrics_family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        rc |= svc_metrics_sample(b, "process_open_fds", NULL, (double)fds);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rc |= svc_metrics_family(b, "process_max_fds", "gauge",
                                 "Maximum number of open file descriptors.");
        rc |= svc_metrics_sample(b, "process_max_fds", NULL,
                                 rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
    }
    return rc ? -1 : 0;
}

int svc_metrics_render_build(struct svc_buf *b, int schema_version)
{
    int rc = svc_metrics_family(b, "rowlock_build_info", "gauge",
                                "Build of this rowlock process: release version, git commit and "
                                "the schema version it was built for");
    struct svc_buf l;
    svc_buf_init(&l, 1024);
    char schema[16];
    snprintf(schema, sizeof(schema), "%d", schema_version);
    rc |= svc_metrics_label(&l, "version", svc_version);
    rc |= svc_buf_puts(&l, ",");
    rc |= svc_metrics_label(&l, "commit", svc_commit);
    rc |= svc_buf_puts(&l, ",");
    rc |= svc_metrics_label(&l, "schema_version", schema);
    rc |= svc_metrics_sample(b, "rowlock_build_info", l.data, 1);
    svc_buf_free(&l);
    return rc ? -1 : 0;
}
