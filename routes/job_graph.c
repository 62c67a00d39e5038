/* The dependencies of an enqueue batch (see job_graph.h): each job's members read and their
 * shapes checked, refs made unique and sorted so that a parent's ref is found by a binary
 * search, each job's parents checked for repeats, then Kahn's algorithm for the order and, when
 * it cannot order every job, a walk that finds a cycle. No SQL, no HTTP. */
#include "routes/job_graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes/json_util.h"

/* A job's ref and its batch index: the batch's refs, sorted by ref, then by index. */
struct named {
    const char *ref;
    size_t index;
};

/* One parent of a job at its position in the job's "parents", for the repeat check. */
struct slot {
    struct route_job_parent p;
    size_t pos;
};

/* One run of route_job_graph_check: its input, output and scratch. */
struct check {
    json_t *jobs; /* the array, or the one job */
    struct route_job_graph *g;
    struct route_job_graph_error *err;
    struct named *refs; /* nrefs, sorted */
    size_t nrefs;
    struct slot *slots; /* ROUTE_JOB_PARENTS_MAX */
    /* Kahn's algorithm: wait[i], job i's batch parents not yet in the order; the jobs naming p
     * a parent are kids[first[p]] to kids[first[p + 1] - 1]; at and path, n each, scratch */
    size_t *wait, *first, *kids, *at, *path;
};

/* Refuses the batch for job (its batch index): the detail is "job <job>: " and fmt's sentence,
 * the members {"job": job, "reference": reference} (reference borrowed; NULL: no such member).
 * INVALID, or NOMEM when the members cannot be built. */
static enum route_job_graph_status refuse(struct route_job_graph_error *err, size_t job,
                                          json_t *reference, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum route_job_graph_status refuse(struct route_job_graph_error *err, size_t job,
                                          json_t *reference, const char *fmt, ...)
{
    int n = snprintf(err->detail, sizeof(err->detail), "job %zu: ", job);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->detail + n, sizeof(err->detail) - (size_t)n, fmt, ap);
    va_end(ap);
    err->ext = json_pack("{s:I}", "job", (json_int_t)job);
    if (err->ext != NULL && reference != NULL &&
        json_object_set(err->ext, "reference", reference) != 0) {
        json_decref(err->ext);
        err->ext = NULL;
    }
    return err->ext != NULL ? ROUTE_JOB_GRAPH_INVALID : ROUTE_JOB_GRAPH_NOMEM;
}

static json_t *job_at(const struct check *c, size_t i)
{
    return json_is_array(c->jobs) ? json_array_get(c->jobs, i) : c->jobs;
}

/* j's member name; NULL when absent or null, or when j is not an object. */
static json_t *member(json_t *j, const char *name)
{
    json_t *m = json_object_get(j, name);
    return json_is_null(m) ? NULL : m;
}

/* Is s the JSON string word (all of it: a NUL inside s is not the end)? */
static int is_word(json_t *s, const char *word)
{
    size_t len = strlen(word);
    return json_is_string(s) && json_string_length(s) == len &&
           memcmp(json_string_value(s), word, len) == 0;
}

/* A ref: a string of the key rule, at most ROUTE_JOB_REF_MAX bytes. 1, or 0 with why. */
static int ref_ok(json_t *s, char *why, size_t size)
{
    if (!json_is_string(s)) {
        snprintf(why, size, "a ref is a string");
        return 0;
    }
    return route_text_ok(json_string_value(s), json_string_length(s), ROUTE_JOB_REF_MAX, "ref", why,
                         size);
}

/* The shape of parent k (p) of job i, whose own ref is ref (NULL: none). */
static enum route_job_graph_status read_parent(struct check *c, size_t i, size_t k, json_t *p,
                                               const char *ref)
{
    char why[160];
    if (json_is_integer(p) && json_integer_value(p) > 0)
        return ROUTE_JOB_GRAPH_OK;
    if (!json_is_string(p))
        return refuse(c->err, i, p,
                      "parent %zu is neither a job id (a positive integer) nor a ref of this "
                      "batch (a string)",
                      k);
    if (!ref_ok(p, why, sizeof(why)))
        return refuse(c->err, i, p, "parent %zu: %s", k, why);
    if (ref != NULL && strcmp(json_string_value(p), ref) == 0)
        return refuse(c->err, i, p,
                      "parent %zu is \"%s\", the job's own ref: a job is not its own "
                      "parent",
                      k, ref);
    return ROUTE_JOB_GRAPH_OK;
}

/* Job i's ref, policy and parents' shapes into g->jobs[i]; *edges sums the parents so far. */
static enum route_job_graph_status read_job(struct check *c, size_t i, size_t *edges)
{
    struct route_job_deps *d = &c->g->jobs[i];
    json_t *j = job_at(c, i), *ref = member(j, "ref"), *pol = member(j, "on_parent_failure");
    json_t *parents = member(j, "parents");
    char why[160];
    if (ref != NULL && !ref_ok(ref, why, sizeof(why)))
        return refuse(c->err, i, ref, "\"ref\": %s", why);
    d->ref = json_string_value(ref);
    if (pol != NULL && !is_word(pol, "cancel") && !is_word(pol, "run"))
        return refuse(c->err, i, NULL,
                      "\"on_parent_failure\" is \"cancel\" (the default) or \"run\"");
    d->policy = is_word(pol, "run") ? ROUTE_PARENT_RUN : ROUTE_PARENT_CANCEL;
    if (parents != NULL && !json_is_array(parents))
        return refuse(c->err, i, NULL, "\"parents\" is an array of job ids and refs of this batch");
    d->nparents = json_array_size(parents);
    if (d->nparents > ROUTE_JOB_PARENTS_MAX)
        return refuse(c->err, i, NULL, "a job has at most %d parents; this one has %zu",
                      ROUTE_JOB_PARENTS_MAX, d->nparents);
    *edges += d->nparents;
    if (*edges > ROUTE_JOB_EDGES_MAX)
        return refuse(c->err, i, NULL,
                      "a request names at most %d parents in all; jobs 0 to %zu name %zu",
                      ROUTE_JOB_EDGES_MAX, i, *edges);
    enum route_job_graph_status st = ROUTE_JOB_GRAPH_OK;
    for (size_t k = 0; st == ROUTE_JOB_GRAPH_OK && k < d->nparents; k++)
        st = read_parent(c, i, k, json_array_get(parents, k), d->ref);
    return st;
}

static int by_ref(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int r = strcmp(x->ref, y->ref);
    return r != 0 ? r : (x->index > y->index) - (x->index < y->index);
}

/* Sorts the batch's refs; refuses the first job (in batch order) whose ref an earlier job has. */
static enum route_job_graph_status unique_refs(struct check *c)
{
    for (size_t i = 0; i < c->g->n; i++)
        if (c->g->jobs[i].ref != NULL)
            c->refs[c->nrefs++] = (struct named){c->g->jobs[i].ref, i};
    qsort(c->refs, c->nrefs, sizeof(*c->refs), by_ref);
    size_t dup = 0; /* the repeat with the lowest index: refs[dup], after refs[dup - 1] */
    for (size_t k = 1; k < c->nrefs; k++)
        if (strcmp(c->refs[k - 1].ref, c->refs[k].ref) == 0 &&
            (dup == 0 || c->refs[k].index < c->refs[dup].index))
            dup = k;
    if (dup == 0)
        return ROUTE_JOB_GRAPH_OK;
    const struct named *d = &c->refs[dup];
    return refuse(c->err, d->index, member(job_at(c, d->index), "ref"),
                  "ref \"%s\" is already the ref of job %zu", d->ref, c->refs[dup - 1].index);
}

/* The batch index of the job whose ref is ref, or SIZE_MAX (the refs are unique). */
static size_t find_ref(const struct check *c, const char *ref)
{
    size_t lo = 0, hi = c->nrefs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(c->refs[mid].ref, ref);
        if (r == 0)
            return c->refs[mid].index;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return SIZE_MAX;
}

/* Orders parents by id, batch parents (id 0) by index. */
static int parent_cmp(const struct route_job_parent *x, const struct route_job_parent *y)
{
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int by_parent(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;
    int r = parent_cmp(&x->p, &y->p);
    return r != 0 ? r : (x->pos > y->pos) - (x->pos < y->pos);
}

/* Refuses job i when two of its n parents (resolved) name the same job: the first repeat. */
static enum route_job_graph_status repeated_parent(struct check *c, size_t i,
                                                   const struct route_job_parent *parents, size_t n)
{
    for (size_t k = 0; k < n; k++)
        c->slots[k] = (struct slot){parents[k], k};
    qsort(c->slots, n, sizeof(*c->slots), by_parent);
    size_t dup = 0; /* as in unique_refs: slots[dup] repeats slots[dup - 1] */
    for (size_t k = 1; k < n; k++)
        if (parent_cmp(&c->slots[k - 1].p, &c->slots[k].p) == 0 &&
            (dup == 0 || c->slots[k].pos < c->slots[dup].pos))
            dup = k;
    if (dup == 0)
        return ROUTE_JOB_GRAPH_OK;
    return refuse(c->err, i, json_array_get(member(job_at(c, i), "parents"), c->slots[dup].pos),
                  "parents %zu and %zu name the same job", c->slots[dup - 1].pos,
                  c->slots[dup].pos);
}

/* Job i's parents into out: an id as it is, a ref as the batch index of the job that has it. */
static enum route_job_graph_status resolve_job(struct check *c, size_t i,
                                               struct route_job_parent *out)
{
    json_t *parents = member(job_at(c, i), "parents");
    size_t n = c->g->jobs[i].nparents;
    for (size_t k = 0; k < n; k++) {
        json_t *p = json_array_get(parents, k);
        if (json_is_integer(p)) {
            out[k] = (struct route_job_parent){.id = json_integer_value(p)};
            continue;
        }
        size_t at = find_ref(c, json_string_value(p));
        if (at == SIZE_MAX)
            return refuse(c->err, i, p, "parent %zu, \"%s\", is the ref of no job of this batch", k,
                          json_string_value(p));
        out[k] = (struct route_job_parent){.id = 0, .index = at};
    }
    c->g->jobs[i].parents = out;
    return repeated_parent(c, i, out, n);
}

/* The batch's jobs that name each job a parent (first, kids) and how many each waits for. */
static void index_children(struct check *c)
{
    const struct route_job_graph *g = c->g;
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < g->jobs[i].nparents; k++)
            if (g->jobs[i].parents[k].id == 0) {
                c->wait[i]++;
                c->first[g->jobs[i].parents[k].index + 1]++;
            }
    for (size_t p = 0; p < g->n; p++) {
        c->first[p + 1] += c->first[p];
        c->at[p] = c->first[p];
    }
    for (size_t i = 0; i < g->n; i++)
        for (size_t k = 0; k < g->jobs[i].nparents; k++)
            if (g->jobs[i].parents[k].id == 0)
                c->kids[c->at[g->jobs[i].parents[k].index]++] = i;
}

/* Kahn's algorithm: g->order takes the jobs without batch parents, then each job once its last
 * batch parent has been taken. Returns how many jobs the order holds (n unless a cycle). */
static size_t order_jobs(struct check *c)
{
    struct route_job_graph *g = c->g;
    size_t head = 0, tail = 0;
    index_children(c);
    for (size_t i = 0; i < g->n; i++)
        if (c->wait[i] == 0)
            g->order[tail++] = i;
    while (head < tail) {
        size_t p = g->order[head++];
        for (size_t k = c->first[p]; k < c->first[p + 1]; k++)
            if (--c->wait[c->kids[k]] == 0)
                g->order[tail++] = c->kids[k];
    }
    return tail;
}

/* A batch parent of job j that Kahn's algorithm left out of the order (wait > 0). */
static size_t waiting_parent(const struct check *c, size_t j)
{
    const struct route_job_deps *d = &c->g->jobs[j];
    size_t k = 0;
    while (d->parents[k].id != 0 || c->wait[d->parents[k].index] == 0)
        k++;
    return d->parents[k].index;
}

/* Every job Kahn's algorithm left out waits for a batch parent left out too (wait counts just
 * those), so a depth-first walk along such parents never reaches a dead end to back out of: it
 * comes back to a job on its path, and the path from there is a cycle of the input. Refuses the
 * batch with that cycle, written from its job of the lowest index. */
static enum route_job_graph_status refuse_cycle(struct check *c)
{
    const struct route_job_graph *g = c->g;
    size_t len = 0, j = 0;
    while (c->wait[j] == 0)
        j++;
    for (size_t i = 0; i < g->n; i++)
        c->at[i] = SIZE_MAX; /* not on the path; else the position on it */
    for (; c->at[j] == SIZE_MAX; j = waiting_parent(c, j)) {
        c->at[j] = len;
        c->path[len++] = j;
    }
    const size_t *cycle = c->path + c->at[j];
    size_t clen = len - c->at[j], low = 0;
    for (size_t k = 1; k < clen; k++)
        if (cycle[k] < cycle[low])
            low = k;
    json_t *refs = json_array();
    for (size_t k = 0; refs != NULL && k <= clen; k++)
        if (json_array_append_new(refs, json_string(g->jobs[cycle[(low + k) % clen]].ref)) != 0) {
            json_decref(refs);
            refs = NULL;
        }
    refuse(c->err, cycle[low], NULL,
           "ref \"%s\" waits for itself through %zu other job(s); each ref in \"cycle\" names the "
           "next as a parent",
           g->jobs[cycle[low]].ref, clen - 1);
    /* steals refs, also when refuse could not build ext or refs is NULL (then it fails) */
    if (json_object_set_new(c->err->ext, "cycle", refs) == 0)
        return ROUTE_JOB_GRAPH_CYCLE;
    json_decref(c->err->ext);
    c->err->ext = NULL;
    return ROUTE_JOB_GRAPH_NOMEM;
}

/* Reads every job and sorts the batch's refs; *edges: the parents of all the jobs. */
static enum route_job_graph_status read_all(struct check *c, size_t *edges)
{
    enum route_job_graph_status st = ROUTE_JOB_GRAPH_OK;
    for (size_t i = 0; st == ROUTE_JOB_GRAPH_OK && i < c->g->n; i++)
        st = read_job(c, i, edges);
    return st == ROUTE_JOB_GRAPH_OK ? unique_refs(c) : st;
}

/* Resolves every job's parents into g->edges (edges of them). */
static enum route_job_graph_status resolve_all(struct check *c, size_t edges)
{
    struct route_job_graph *g = c->g;
    if ((g->edges = calloc(edges + 1, sizeof(*g->edges))) == NULL ||
        (c->slots = calloc(ROUTE_JOB_PARENTS_MAX, sizeof(*c->slots))) == NULL)
        return ROUTE_JOB_GRAPH_NOMEM;
    enum route_job_graph_status st = ROUTE_JOB_GRAPH_OK;
    for (size_t i = 0; st == ROUTE_JOB_GRAPH_OK && i < g->n; i++) {
        st = resolve_job(c, i, g->edges + g->nedges);
        g->nedges += g->jobs[i].nparents;
    }
    return st;
}

/* g->order, or the refusal of a cycle. */
static enum route_job_graph_status order_all(struct check *c)
{
    struct route_job_graph *g = c->g;
    size_t n = g->n;
    if ((g->order = calloc(n + 1, sizeof(size_t))) == NULL ||
        (c->wait = calloc(n + 1, sizeof(size_t))) == NULL ||
        (c->first = calloc(n + 2, sizeof(size_t))) == NULL ||
        (c->kids = calloc(g->nedges + 1, sizeof(size_t))) == NULL ||
        (c->at = calloc(n + 1, sizeof(size_t))) == NULL ||
        (c->path = calloc(n + 1, sizeof(size_t))) == NULL)
        return ROUTE_JOB_GRAPH_NOMEM;
    return order_jobs(c) == n ? ROUTE_JOB_GRAPH_OK : refuse_cycle(c);
}

enum route_job_graph_status route_job_graph_check(json_t *jobs, struct route_job_graph *g,
                                                  struct route_job_graph_error *err)
{
    struct check c = {.jobs = jobs, .g = g, .err = err};
    enum route_job_graph_status st = ROUTE_JOB_GRAPH_NOMEM;
    size_t edges = 0;
    memset(g, 0, sizeof(*g));
    err->detail[0] = '\0';
    err->ext = NULL;
    g->n = json_is_array(jobs) ? json_array_size(jobs) : 1;
    if ((g->jobs = calloc(g->n + 1, sizeof(*g->jobs))) != NULL &&
        (c.refs = calloc(g->n + 1, sizeof(*c.refs))) != NULL)
        st = read_all(&c, &edges);
    if (st == ROUTE_JOB_GRAPH_OK)
        st = resolve_all(&c, edges);
    if (st == ROUTE_JOB_GRAPH_OK)
        st = order_all(&c);
    free(c.refs);
    free(c.slots);
    free(c.wait);
    free(c.first);
    free(c.kids);
    free(c.at);
    free(c.path);
    if (st != ROUTE_JOB_GRAPH_OK)
        route_job_graph_free(g);
    return st;
}

void route_job_graph_free(struct route_job_graph *g)
{
    free(g->jobs);
    free(g->order);
    free(g->edges);
    memset(g, 0, sizeof(*g));
}
