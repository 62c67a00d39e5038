/* The records verdict (churn_records.h): a churned queue judged from what its workers logged, job
 * by job over the logs sorted by job and fence. Knows no SQL, HTTP or workload. */
#include "churn_records.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void cr_records_free(struct cr_records *r)
{
    qv_log_free(&r->claims);
    qv_log_free(&r->completed);
    qv_log_free(&r->failed);
    qv_log_free(&r->dropped);
}

static int cmp_entry(const void *x, const void *y)
{
    const struct qv_complete *a = x, *b = y;
    if (a->id != b->id)
        return (a->id > b->id) - (a->id < b->id);
    return (a->fence > b->fence) - (a->fence < b->fence);
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void sort_log(struct qv_log *log)
{
    if (log->n > 0)
        qsort(log->v, log->n, sizeof(*log->v), cmp_entry);
}

/* The entries of a sorted log that name job id: *first gets the first; returns how many. */
static size_t entries_of(const struct qv_log *log, int64_t id, const struct qv_complete **first)
{
    size_t lo = 0, hi = log->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t k = lo;
    while (k < log->n && log->v[k].id == id)
        k++;
    *first = log->v + lo;
    return k - lo;
}

/* Whether a sorted log holds job id's lease (fence, owner). */
static int holds(const struct qv_log *log, int64_t id, const struct qv_complete *lease)
{
    const struct qv_complete *e;
    size_t n = entries_of(log, id, &e);
    for (size_t i = 0; i < n; i++)
        if (e[i].fence == lease->fence && strcmp(e[i].owner, lease->owner) == 0)
            return 1;
    return 0;
}

/* The claims of job id: fences 1 .. k, each once. Returns its last lease, or NULL after
 * saying what was wrong. */
static const struct qv_complete *claims_of(const struct cr_records *r, int64_t id)
{
    const struct qv_complete *c;
    size_t k = entries_of(&r->claims, id, &c);
    if (k == 0) {
        qv_problem(id, "never claimed");
        return NULL;
    }
    for (size_t i = 0; i < k; i++)
        if (c[i].fence != (int64_t)i + 1) {
            qv_problem(id, "claim %zu of %zu has fence %" PRId64 " (by %s): a fence %s", i + 1, k,
                       c[i].fence, c[i].owner,
                       i > 0 && c[i].fence == c[i - 1].fence ? "handed out twice" : "unseen");
            return NULL;
        }
    return &c[k - 1];
}

/* How job id ended, by the records. */
static enum cr_end end_of(const struct cr_records *r, int64_t id)
{
    const struct qv_complete *last = claims_of(r, id), *done, *failed;
    if (last == NULL)
        return CR_BROKEN;
    size_t nd = entries_of(&r->completed, id, &done);
    size_t nf = entries_of(&r->failed, id, &failed);
    if (nd + nf > 1) {
        qv_problem(id, "ended %zu times: %zu completes and %zu final fails accepted", nd + nf, nd,
                   nf);
        return CR_BROKEN;
    }
    if (nd + nf == 0) {
        if (holds(&r->dropped, id, last))
            return CR_EXPIRED;
        qv_problem(id, "lost: its last lease (fence %" PRId64 ", %s) neither settled nor let go",
                   last->fence, last->owner);
        return CR_BROKEN;
    }
    const struct qv_complete *end = nd ? done : failed;
    if (end->fence != last->fence || strcmp(end->owner, last->owner) != 0) {
        qv_problem(id,
                   "%s by %s at fence %" PRId64 ", but its last lease is fence %" PRId64 " (%s)",
                   nd ? "completed" : "failed", end->owner, end->fence, last->fence, last->owner);
        return CR_BROKEN;
    }
    return nd ? CR_COMPLETED : CR_FAILED;
}

/* How many entries of a sorted log name one of the n jobs ids. */
static size_t entries_of_all(const struct qv_log *log, const int64_t *ids, size_t n)
{
    size_t k = 0;
    const struct qv_complete *e;
    for (size_t i = 0; i < n; i++)
        k += entries_of(log, ids[i], &e);
    return k;
}

struct cr_verdict cr_check(struct cr_records *r, const int64_t *ids, size_t n, enum cr_end *ends)
{
    struct cr_verdict v = {0};
    sort_log(&r->claims);
    sort_log(&r->completed);
    sort_log(&r->failed);
    sort_log(&r->dropped);
    for (size_t i = 0; i < n; i++) {
        enum cr_end e = end_of(r, ids[i]);
        v.completed += e == CR_COMPLETED;
        v.failed += e == CR_FAILED;
        v.expired += e == CR_EXPIRED;
        v.bad_jobs += e == CR_BROKEN;
        if (ends != NULL)
            ends[i] = e;
    }
    int64_t *sorted = malloc((n + 1) * sizeof(*sorted));
    if (sorted != NULL) {
        memcpy(sorted, ids, n * sizeof(*sorted));
        qsort(sorted, n, sizeof(*sorted), cmp_i64);
        for (size_t i = 1; i < n; i++)
            if (sorted[i] == sorted[i - 1])
                v.bad_jobs += qv_problem(sorted[i], "enqueued twice");
        free(sorted);
    }
    /* a job's one end is one of its entries: the rest are no job's, or a job's second end */
    v.strays = (r->claims.n - entries_of_all(&r->claims, ids, n)) +
               (r->completed.n - (size_t)v.completed) + (r->failed.n - (size_t)v.failed);
    return v;
}
