/* Leased work queues (see queues.h): queues (create, read, list, delete) and jobs (enqueue,
 * reads, operator retry and cancel). The lease protocol (claims, fenced writes, settlements) is
 * in db/leases.c, the janitor and the metrics in db/queue_upkeep.c; what they share is in
 * db/queues_internal.h. */
#include "db/queues_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/hints.h"
#include "db/job_admin_sql.h"
#include "db/listener.h"
#include "db/tx.h"

/* clang-format off */
#define QUEUE_COLUMNS                                                                              \
    "id, name, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds, "           \
    "retention_seconds, " DB_TS("created_at") ", " DB_TS("updated_at") ", "                        \
    QUEUE_RETENTION("", "succeeded") ", " QUEUE_RETENTION("", "failed") ", "                       \
    QUEUE_RETENTION("", "cancelled") ", dedupe_window_seconds, "                                   \
    "coalesce(" DB_TS("paused_at") ", '')"                                                       \
    ", " QUEUE_LIMITS("")
/* clang-format on */
/* the columns QUEUE_COLUMNS reads, for a query that reads more after them */
#define QUEUE_NCOLUMNS 22

static const struct db_stmt st_queue_resolve = {
    "queue_resolve", "SELECT " QUEUE_COLUMNS " FROM rowlock.queues WHERE name = $1", 1};
static const struct db_stmt st_queue_upsert = {
    "queue_upsert",
    "INSERT INTO rowlock.queues AS q (name, max_attempts, lease_seconds, backoff_base_seconds, "
    "backoff_max_seconds, retention_seconds, succeeded_retention_seconds, "
    "failed_retention_seconds, cancelled_retention_seconds, dedupe_window_seconds, "
    "concurrency_limit, rate_limit, rate_period_seconds, rate_burst, key_concurrency_limit, "
    "key_rate_limit, key_rate_period_seconds, key_rate_burst) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) "
    "ON CONFLICT (name) DO UPDATE SET max_attempts = EXCLUDED.max_attempts, "
    "lease_seconds = EXCLUDED.lease_seconds, backoff_base_seconds = "
    "EXCLUDED.backoff_base_seconds, backoff_max_seconds = EXCLUDED.backoff_max_seconds, "
    "retention_seconds = EXCLUDED.retention_seconds, "
    "succeeded_retention_seconds = EXCLUDED.succeeded_retention_seconds, "
    "failed_retention_seconds = EXCLUDED.failed_retention_seconds, "
    "cancelled_retention_seconds = EXCLUDED.cancelled_retention_seconds, "
    "dedupe_window_seconds = EXCLUDED.dedupe_window_seconds, "
    "concurrency_limit = EXCLUDED.concurrency_limit, rate_limit = EXCLUDED.rate_limit, "
    "rate_period_seconds = EXCLUDED.rate_period_seconds, rate_burst = EXCLUDED.rate_burst, "
    "key_concurrency_limit = EXCLUDED.key_concurrency_limit, "
    "key_rate_limit = EXCLUDED.key_rate_limit, "
    "key_rate_period_seconds = EXCLUDED.key_rate_period_seconds, "
    "key_rate_burst = EXCLUDED.key_rate_burst, updated_at = now() "
    "RETURNING (xmax = 0), " QUEUE_COLUMNS,
    18};
static const struct db_stmt st_queue_stats = {"queue_stats", QUEUE_STATS("$1"), 1};
/* Pause ($2 true) or resume: paused_at keeps when the queue was first paused. The first column
 * says whether this statement changed it. */
static const struct db_stmt st_queue_pause = {
    "queue_pause",
    "WITH was AS (SELECT id AS was_id, paused_at AS was_paused FROM rowlock.queues "
    "  WHERE name = $1 FOR NO KEY UPDATE) "
    "UPDATE rowlock.queues SET paused_at = CASE WHEN $2::bool THEN coalesce(was_paused, now()) "
    "  END FROM was WHERE id = was_id "
    "RETURNING (was_paused IS NULL) = $2::bool, " QUEUE_COLUMNS,
    2};
/* clang-format off */
static const struct db_stmt st_queue_list = {
    "queue_list",
    "SELECT " QUEUE_COLUMNS ", s.* FROM rowlock.queues q2, LATERAL (" QUEUE_STATS("q2.id") ") s "
    "WHERE q2.name > coalesce($1, '') ORDER BY q2.name LIMIT $2",
    2};
/* clang-format on */

/* A dedupe window row d that an enqueue may take: its window has passed and no job it names is
 * pending or processing (a job longer unfinished than its window still holds its key). */
#define DEDUPE_FREE(d)                                                                             \
    "(" d ".expires_at <= now() AND NOT EXISTS (SELECT 1 FROM rowlock.jobs j WHERE j.id = " d      \
    ".job_id AND j.state IN ('pending', 'processing')))"
/* The job a dedupe window row names after an enqueue's upsert: ours when it was free. */
#define DEDUPE_TAKE(d, col)                                                                        \
    "CASE WHEN " DEDUPE_FREE(d) " THEN EXCLUDED." col " ELSE " d "." col " END"

/* Enqueue: ids are drawn first so that every input row maps to its job. $8, when not NULL, is a
 * NOTIFY payload sent by this transaction (db_listener_inline), once: with the first row, whose
 * notify column is then '' (NULL when not sent). Not with a synchronous standby: the NOTIFY's
 * lock would be held through the wait for it, and every notifying transaction would queue
 * behind. $9: each job's dedupe window in seconds (NULL: the queue's).
 *
 * The queue's row is locked FOR KEY SHARE, once a statement: a queue's delete (which locks it
 * FOR UPDATE first) and an enqueue wait for each other, and an enqueue that waited finds no
 * queue, inserts nothing and answers no row. The jobs have no foreign key to their queue
 * (migration 18): this lock is what keeps a job from going into a deleted queue.
 *
 * A job with a dedupe key takes the key's row in rowlock.job_dedupe first: the first job of the
 * batch with that key upserts it, which waits for any other enqueue or settlement holding it and
 * then, locked, names our job only when the row was free (DEDUPE_FREE) and no job this statement
 * sees unfinished holds the key (then the row names that job); the job goes in only when the row
 * names it, and jobs_dedupe still refuses it when an unfinished job the statement could not see
 * holds the key. So every enqueue of a key honours a live window, and the row holds the key for
 * the window of the enqueue that took it (0: until its job finishes, as jobs_dedupe does).
 * Columns: i, id, created, notify, then for a duplicate the state of its job as this statement
 * sees it (NULL: not seen) and its window's final_state (set: deleted as it ended), and whether
 * the window row names our own job though none went in (a job unfinished that the statement
 * could not see held the key). */
/* clang-format off */
static const struct db_stmt st_enqueue = {
    "jobs_enqueue",
    "WITH q AS (SELECT id, max_attempts, dedupe_window_seconds FROM rowlock.queues WHERE id = $1 "
    "  FOR KEY SHARE), "
    "input AS (SELECT nextval('rowlock.jobs_id_seq') AS id, u.* FROM (SELECT * FROM "
    "  unnest($2::text[], $3::text[], $4::text[], $5::float8[], $6::int[], $7::int[], $9::int[], "
    "  $10::text[]) WITH ORDINALITY AS x(payload, dedupe, run_at, delay, priority, max_attempts, "
    "  win, ckey, i) "
    "  ORDER BY i) u), "
    "timed AS (SELECT input.*, coalesce(run_at::timestamptz, now() + make_interval(secs => "
    "  delay)) AS due, coalesce(input.win, q.dedupe_window_seconds) AS hold, "
    "  CASE WHEN input.dedupe IS NOT NULL THEN (SELECT j.id FROM rowlock.jobs j "
    "  WHERE j.queue_id = $1 AND j.dedupe_key = input.dedupe "
    "  AND j.state IN ('pending', 'processing')) END AS held_by FROM input, q), "
    "win AS (INSERT INTO rowlock.job_dedupe AS d (queue_id, dedupe_key, job_id, expires_at) "
    "  SELECT DISTINCT ON (t.dedupe) $1, t.dedupe, coalesce(t.held_by, t.id), "
    "  now() + make_interval(secs => t.hold) FROM timed t WHERE t.dedupe IS NOT NULL "
    "  ORDER BY t.dedupe, t.i "
    "  ON CONFLICT (queue_id, dedupe_key) DO UPDATE SET job_id = " DEDUPE_TAKE("d", "job_id") ", "
    "  expires_at = " DEDUPE_TAKE("d", "expires_at") ", "
    "  final_state = " DEDUPE_TAKE("d", "final_state") " "
    "  RETURNING d.dedupe_key, d.job_id, d.final_state), "
    "ins AS (INSERT INTO rowlock.jobs (id, queue_id, state, priority, run_at, claimable_at, "
    "  max_attempts, dedupe_key, concurrency_key) SELECT t.id, q.id, 'pending', t.priority, "
    "  t.due, t.due, coalesce(nullif(t.max_attempts, 0), q.max_attempts), t.dedupe, t.ckey "
    "  FROM timed t, q "
    "  WHERE t.dedupe IS NULL OR t.id IN (SELECT job_id FROM win) ORDER BY t.i "
    "  ON CONFLICT (queue_id, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN "
    "  ('pending', 'processing') DO NOTHING RETURNING id), "
    "bodies AS (INSERT INTO rowlock.job_bodies (job_id, payload) SELECT ins.id, "
    "  input.payload::jsonb FROM ins JOIN input ON input.id = ins.id), "
    "res AS (SELECT t.i, ins.id AS created, coalesce(ins.id, nullif(w.job_id, t.id), "
    "  (SELECT min(i2.id) FROM ins i2 JOIN input x2 ON x2.id = i2.id WHERE x2.dedupe = t.dedupe), "
    "  t.held_by) AS id, "
    "  w.final_state, ins.id IS NULL AND w.job_id = t.id AS orphan, t.id AS drawn "
    "  FROM timed t LEFT JOIN ins ON ins.id = t.id "
    "  LEFT JOIN win w ON w.dedupe_key = t.dedupe) "
    "SELECT r.i, r.id, r.created IS NOT NULL, "
    "  CASE WHEN r.i = 1 AND $8::text IS NOT NULL "
    "    AND current_setting('synchronous_standby_names') = '' "
    "    THEN pg_notify('" DB_LISTENER_CHANNEL "', $8::text)::text END, "
    "  CASE WHEN r.created IS NULL THEN (SELECT j.state FROM rowlock.jobs j WHERE j.id = r.id) "
    "  END, r.final_state, coalesce(r.orphan, false), r.drawn "
    "FROM res r ORDER BY r.i",
    10};
/* clang-format on */

/* Links an enqueue's new jobs to their parents, in the enqueue's transaction: $1 children and
 * $2 parents (an edge each, in the order given), $3 the children and $4 their policies
 * ('cancel' or 'run'), $5 the children a parent may have. The parents are locked first, in id
 * order, and judged as they are now: a parent ending at this moment either committed first (its
 * state here is final, and it settles nothing of this child) or waits for this transaction and
 * then finds the child in its children (the trigger jobs_deps_settle, migration 22). A child counts
 * the parents not ended (waiting_on) and waits while any is; each parent lists its children. One
 * row: a parent that names no job, one failed or cancelled that a child with policy cancel names
 * (with its state), one that would have too many children, or, when none, the jobs made waiting (an
 * array's text). On a refusal nothing is written. */
/* clang-format off */
static const struct db_stmt st_enqueue_link = {
    "jobs_enqueue_link",
    "WITH e AS (SELECT * FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY e(child, parent, "
    "  i)), "
    "pl AS (SELECT p.id, p.state, coalesce(cardinality(p.children), 0) AS nkids "
    "  FROM rowlock.jobs p WHERE p.id = ANY (ARRAY(SELECT DISTINCT e.parent FROM e)) "
    "  ORDER BY p.id FOR NO KEY UPDATE OF p), "
    "pol AS (SELECT * FROM unnest($3::bigint[], $4::text[]) k(id, pol)), "
    "st AS (SELECT e.*, pl.state, pol.pol FROM e JOIN pol ON pol.id = e.child "
    "  LEFT JOIN pl ON pl.id = e.parent), "
    "verdict AS (SELECT (SELECT st.parent FROM st WHERE st.state IS NULL ORDER BY st.i LIMIT 1) "
    "  AS unknown, (SELECT st.parent FROM st WHERE st.state IN ('failed', 'cancelled') "
    "  AND st.pol = 'cancel' ORDER BY st.i LIMIT 1) AS failed, "
    "  (SELECT pl.id FROM pl JOIN (SELECT e.parent, count(*) AS n FROM e GROUP BY e.parent) c "
    "  ON c.parent = pl.id WHERE pl.nkids + c.n > $5 ORDER BY pl.id LIMIT 1) AS full), "
    "r AS (SELECT coalesce(a.id, c.id) AS id, a.kids, c.parents, c.open, c.pol "
    "  FROM (SELECT e.parent AS id, array_agg(e.child ORDER BY e.child) AS kids FROM e "
    "  GROUP BY e.parent) a FULL JOIN (SELECT st.child AS id, array_agg(st.parent ORDER BY st.i) "
    "  AS parents, count(*) FILTER (WHERE st.state IN ('waiting', 'pending', 'processing')) "
    "  AS open, min(st.pol) AS pol FROM st GROUP BY st.child) c ON c.id = a.id), "
    "w AS (UPDATE rowlock.jobs j SET "
    "  children = CASE WHEN r.kids IS NULL THEN j.children "
    "  ELSE coalesce(j.children, '{}') || r.kids END, "
    "  parents = coalesce(r.parents, j.parents), waiting_on = coalesce(r.open, j.waiting_on), "
    "  on_parent_failure = coalesce(r.pol, j.on_parent_failure), "
    "  state = CASE WHEN r.open > 0 THEN 'waiting' ELSE j.state END, updated_at = now() "
    "  FROM r, verdict v WHERE j.id = r.id AND j.id = ANY (ARRAY(SELECT r.id FROM r)) "
    "  AND v.unknown IS NULL AND v.failed IS NULL AND v.full IS NULL "
    "  RETURNING j.id, j.state) "
    "SELECT v.unknown, v.failed, (SELECT pl.state FROM pl WHERE pl.id = v.failed), v.full, "
    "  (SELECT coalesce(array_agg(w.id), '{}') FROM w WHERE w.state = 'waiting')::text "
    "FROM verdict v",
    5};
/* clang-format on */

/* The job holding a dedupe key that the enqueue above found taken but could not see: a
 * transaction still running held the key, so the INSERT waited for it to commit, and the
 * statement's snapshot (taken before that commit) does not show its job. A new statement
 * does. Its id and state. */
static const struct db_stmt st_enqueue_dedupe_id = {
    "jobs_enqueue_dedupe_id",
    /* clang-format off */
    "SELECT id, state FROM (" QUEUE_JOBS("j.id, j.state", "$1", " AND j.dedupe_key = $2") ") k "
    "ORDER BY state IN ('pending', 'processing') DESC, id DESC LIMIT 1",
    /* clang-format on */
    2};
/* A duplicate's job ($3) by its window's key ($2), as a new statement sees it: its state and
 * true while it is kept, else how it ended (when the window knows) and false. */
static const struct db_stmt st_enqueue_dedupe_state = {
    "jobs_enqueue_dedupe_state",
    "SELECT state, true FROM rowlock.jobs WHERE id = $3 AND queue_id = $1 UNION ALL "
    "SELECT coalesce(final_state, ''), false FROM rowlock.job_dedupe WHERE queue_id = $1 "
    "AND dedupe_key = $2 AND job_id = $3 LIMIT 1",
    3};
/* A window row that the enqueue took for its job ($4) though none went in, the key being held
 * by the unfinished job $3: the window names that job instead. */
static const struct db_stmt st_enqueue_dedupe_repoint = {
    "jobs_enqueue_dedupe_repoint",
    "UPDATE rowlock.job_dedupe SET job_id = $3 WHERE queue_id = $1 AND dedupe_key = $2 "
    "AND job_id = $4",
    4};

/* clang-format off */
#define JOB_COLUMNS \
    "j.id, j.state, j.priority, j.attempts, j.max_attempts, j.fence, j.owner, " \
    "coalesce(" DB_TS("j.lease_expires_at") ", ''), " DB_TS("j.run_at") ", " \
    DB_TS("j.created_at") ", " DB_TS("j.updated_at") ", " \
    "coalesce(" DB_TS("j.finished_at") ", ''), j.dedupe_key, " \
    "b.payload::text, b.progress::text, b.result::text, b.last_error::text, j.concurrency_key, " \
    "j.parents::text, j.children::text, coalesce(j.waiting_on, 0), " \
    "coalesce(j.on_parent_failure, '')"
/* clang-format on */
#define JOB_NCOLUMNS 22
static const struct db_stmt st_job_get = {
    "job_get",
    "SELECT " JOB_COLUMNS " FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "WHERE j.id = $1 AND j.queue_id = $2",
    2};
/* clang-format off */
static const struct db_stmt st_job_history = {
    "job_history",
    "SELECT fence, attempt, owner, " DB_TS("claimed_at") ", "
    "coalesce(" DB_TS("ended_at") ", ''), "
    "coalesce(outcome, '') FROM rowlock.job_attempt_history WHERE job_id = $1 "
    "ORDER BY fence",
    1};
/* clang-format on */
/* A job's parents: $1 job, $2 queue id, $3 after (position), $4 limit. The first column says
 * whether the job was found; a job without parents (or none after) is one row of NULLs. */
/* clang-format off */
static const struct db_stmt st_job_parents = {
    "job_parents",
    "SELECT c.id IS NOT NULL, p.ord, p.id, coalesce(q.name, ''), coalesce(j.state, ''), "
    "  coalesce(" DB_TS("j.finished_at") ", ''), b.result::text "
    "FROM (SELECT) one LEFT JOIN rowlock.jobs c ON c.id = $1 AND c.queue_id = $2 "
    "LEFT JOIN LATERAL (SELECT * FROM unnest(c.parents) WITH ORDINALITY p(id, ord) "
    "  WHERE p.ord > $3 ORDER BY p.ord LIMIT $4) p ON true "
    "LEFT JOIN rowlock.jobs j ON j.id = p.id LEFT JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "LEFT JOIN rowlock.queues q ON q.id = j.queue_id ORDER BY p.ord",
    4};
/* clang-format on */
/* The bytes of a job's stored JSON as a list answers it (b is rowlock.job_bodies). */
#define BODY_BYTES                                                                                 \
    "(octet_length(b.payload::text) + coalesce(octet_length(b.progress::text), 0) + "              \
    "coalesce(octet_length(b.result::text), 0) + coalesce(octet_length(b.last_error::text), 0))"   \
    "::bigint"
/* The next job of a listing after id (b its body, and its bytes). */
#define LIST_NEXT(after)                                                                           \
    "SELECT j.id, " BODY_BYTES " AS bytes FROM rowlock.jobs j JOIN rowlock.job_bodies b ON "       \
    "b.job_id = j.id WHERE j.queue_id = $1 AND j.id > " after " AND ($3::text IS NULL OR "         \
    "j.state = $3) ORDER BY j.id LIMIT 1"
/* Listing: $1 queue id, $2 after, $3 state (NULL: any), $4 limit, $5 byte budget (NULL: none).
 * A walk from job to job that stops at the limit or at the first job whose bytes would pass the
 * budget (marked over: not listed, but it says the page ends early): no job past it is read. */
/* clang-format off */
static const struct db_stmt st_job_list = {
    "job_list",
    "WITH RECURSIVE walk (k, id, bytes, over) AS ("
    "  (SELECT 1, n.id, n.bytes, false FROM (" LIST_NEXT("$2") ") n) "
    "  UNION ALL (SELECT walk.k + 1, n.id, walk.bytes + n.bytes, "
    "  coalesce(walk.bytes + n.bytes > $5::bigint, false) "
    "  FROM walk, LATERAL (" LIST_NEXT("walk.id") ") n "
    "  WHERE walk.k < $4 AND NOT walk.over)) "
    "SELECT " JOB_COLUMNS ", EXISTS (SELECT 1 FROM walk WHERE over) FROM walk "
    "JOIN rowlock.jobs j ON j.id = walk.id JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "WHERE NOT walk.over ORDER BY j.id",
    5};
/* clang-format on */
static const struct db_stmt st_job_retry = {
    "job_retry",
    "UPDATE rowlock.jobs j SET " JOB_RETRY_SET
    " WHERE j.id = $1 AND j.queue_id = $2 AND " JOB_RETRYABLE " RETURNING j.id",
    2};
/* Cancel (JOBS_CANCEL) of one job. Columns: the state it had, whether it was cancelled,
 * whether it was deleted. */
/* clang-format off */
static const struct db_stmt st_job_cancel = {
    "job_cancel",
    "WITH " JOB_CANCEL_QUEUE("$2") ", "
    "target AS (SELECT j.id, j.state, j.fence FROM rowlock.jobs j WHERE j.id = $1 AND "
    "  j.queue_id = $2 FOR UPDATE), " JOBS_CANCEL " "
    "SELECT target.state, w.id IS NOT NULL OR gone.id IS NOT NULL, gone.id IS NOT NULL "
    "FROM target LEFT JOIN w ON true LEFT JOIN gone ON true",
    2};
/* clang-format on */

/* ---- helpers ---- */

static struct {
    _Atomic unsigned long long succeeded, failed, cancelled;
} deleted;

void db_jobs_deleted_add(const char *final_state, unsigned long long n)
{
    if (strcmp(final_state, "succeeded") == 0)
        deleted.succeeded += n;
    else if (strcmp(final_state, "cancelled") == 0)
        deleted.cancelled += n;
    else
        deleted.failed += n;
}

void db_jobs_deleted_get(struct db_jobs_deleted *out)
{
    out->succeeded = deleted.succeeded;
    out->failed = deleted.failed;
    out->cancelled = deleted.cancelled;
}

static char *dup_or_null(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NULL : strdup(PQgetvalue(r, row, col));
}

const char *db_queue_verdict_name(enum db_queue_verdict v)
{
    static const char *const names[] = {"ok",
                                        "created",
                                        "duplicate",
                                        "queue_not_found",
                                        "job_not_found",
                                        "lease_owner_mismatch",
                                        "lease_fence_mismatch",
                                        "lease_expired",
                                        "job_terminal",
                                        "job_cancelled",
                                        "job_not_failed",
                                        "bad_input",
                                        "queue_busy",
                                        "queue_has_schedules",
                                        "key_not_found",
                                        "unknown_parent",
                                        "parent_failed",
                                        "too_many_children"};
    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "unknown";
}

static void queue_from_row(const PGresult *r, int row, int col, struct db_queue *q)
{
    q->id = strtoll(PQgetvalue(r, row, col), NULL, 10);
    db_copy(q->name, sizeof(q->name), PQgetvalue(r, row, col + 1));
    q->cfg.max_attempts = atoi(PQgetvalue(r, row, col + 2));
    q->cfg.lease_seconds = atoi(PQgetvalue(r, row, col + 3));
    q->cfg.backoff_base_seconds = atof(PQgetvalue(r, row, col + 4));
    q->cfg.backoff_max_seconds = atof(PQgetvalue(r, row, col + 5));
    q->cfg.retention_seconds = atoi(PQgetvalue(r, row, col + 6));
    db_copy(q->created_at, sizeof(q->created_at), PQgetvalue(r, row, col + 7));
    db_copy(q->updated_at, sizeof(q->updated_at), PQgetvalue(r, row, col + 8));
    int *per_state[] = {&q->cfg.succeeded_retention_seconds, &q->cfg.failed_retention_seconds,
                        &q->cfg.cancelled_retention_seconds};
    for (int i = 0; i < 3; i++) {
        *per_state[i] = atoi(PQgetvalue(r, row, col + 9 + i));
        if (*per_state[i] == 0)
            *per_state[i] = DB_RETENTION_DELETE;
    }
    q->cfg.dedupe_window_seconds = atoi(PQgetvalue(r, row, col + 12));
    db_copy(q->paused_at, sizeof(q->paused_at), PQgetvalue(r, row, col + 13));
    db_queue_limits_from_row(r, row, col + 14, &q->cfg.limits);
    db_queue_limits_from_row(r, row, col + 18, &q->cfg.key_limits);
}

void db_queue_limits_from_row(const PGresult *r, int row, int col, struct db_queue_limits *l)
{
    l->concurrency = atoi(PQgetvalue(r, row, col));
    l->rate = atoi(PQgetvalue(r, row, col + 1));
    l->rate_period_seconds = atof(PQgetvalue(r, row, col + 2));
    l->rate_burst = atoi(PQgetvalue(r, row, col + 3));
}

/* A set of limits' parameters (4 texts from p on, NULL for each limit not set). */
void db_queue_limits_params(const struct db_queue_limits *l, char text[4][32], const char **p)
{
    snprintf(text[0], 32, "%d", l->concurrency);
    snprintf(text[1], 32, "%d", l->rate);
    snprintf(text[2], 32, "%.6f", l->rate_period_seconds);
    snprintf(text[3], 32, "%d", l->rate_burst);
    p[0] = l->concurrency > 0 ? text[0] : NULL;
    p[1] = l->rate > 0 ? text[1] : NULL;
    p[2] = l->rate > 0 ? text[2] : NULL;
    p[3] = l->rate > 0 && l->rate_burst > 0 ? text[3] : NULL;
}

void db_queue_stats_from_row(const PGresult *r, int row, int col, struct db_queue_stats *s)
{
    s->pending = strtoll(PQgetvalue(r, row, col), NULL, 10);
    s->processing = strtoll(PQgetvalue(r, row, col + 1), NULL, 10);
    s->succeeded = strtoll(PQgetvalue(r, row, col + 2), NULL, 10);
    s->failed = strtoll(PQgetvalue(r, row, col + 3), NULL, 10);
    s->oldest_pending_age_seconds = atof(PQgetvalue(r, row, col + 4));
    s->dedupe_keys = strtoll(PQgetvalue(r, row, col + 5), NULL, 10);
    s->paused_since = atof(PQgetvalue(r, row, col + 6));
    s->cancelled = strtoll(PQgetvalue(r, row, col + 7), NULL, 10);
    for (int i = 0; i < DB_LIMIT_KINDS; i++)
        s->held_back[i] = strtoll(PQgetvalue(r, row, col + 8 + i), NULL, 10);
    s->waiting = strtoll(PQgetvalue(r, row, col + 12), NULL, 10);
}

/* Resolves the queue by name in the caller's transaction; 0 when there is none. */
enum db_status db_queue_resolve_in(struct db_conn *c, const char *name, struct db_queue *q,
                                   int *found, struct db_error *err)
{
    const char *params[] = {name};
    PGresult *r = NULL;
    *found = 0;
    enum db_status st = db_query(c, &st_queue_resolve, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        queue_from_row(r, 0, 0, q);
        *found = 1;
    }
    PQclear(r);
    return DB_OK;
}

/* Queue ids by name, as hints (db/hints.h). */
static struct db_hints queue_hints = DB_HINTS_INIT;

enum db_status db_queue_stmts_in(struct db_conn *c, const char *name,
                                 const struct db_queue_call *calls, size_t n, int commit,
                                 struct db_queue *q, int *found, struct db_error *err)
{
    char qid[DB_INT_TEXT];
    struct db_call pipe[1 + DB_QUEUE_CALLS_MAX];
    *found = 0;
    if (n == 0 || n > DB_QUEUE_CALLS_MAX) {
        db_error_set(err, "", "%zu statements in one queue workflow's round trip", n);
        return DB_ERR_HARD;
    }
    for (size_t i = 0; i < n; i++)
        *calls[i].out = NULL;
    int64_t hint = db_hint_get(&queue_hints, name);
    if (hint == 0) {
        enum db_status st = db_queue_resolve_in(c, name, q, found, err);
        if (st != DB_OK || !*found)
            return st;
        db_hint_set(&queue_hints, name, q->id);
        db_i64(qid, sizeof(qid), q->id);
    } else {
        db_i64(qid, sizeof(qid), hint);
    }
    for (size_t i = 0; i < n; i++) {
        calls[i].params[calls[i].qid_param] = qid;
        pipe[1 + i] =
            (struct db_call){.st = calls[i].stmt, .params = calls[i].params, .out = calls[i].out};
    }
    if (commit)
        db_tx_commit_with_next(c);
    if (hint == 0)
        return db_query_pipeline(c, pipe + 1, n, err);
    const char *rparams[] = {name};
    PGresult *r = NULL;
    pipe[0] = (struct db_call){.st = &st_queue_resolve, .params = rparams, .out = &r};
    enum db_status st = db_query_pipeline(c, pipe, 1 + n, err);
    if (st != DB_OK)
        return st;
    *found = PQntuples(r) == 1;
    if (*found)
        queue_from_row(r, 0, 0, q);
    PQclear(r);
    if (*found && q->id == hint)
        return DB_OK;
    /* the queue is gone or has another id now: the statements ran on an id no queue has, where
     * they find no row to change; the transaction runs again without the hint */
    db_hint_set(&queue_hints, name, *found ? q->id : 0);
    for (size_t i = 0; i < n; i++) {
        PQclear(*calls[i].out);
        *calls[i].out = NULL;
    }
    *found = 0;
    db_error_set(err, "", "queue %s is no longer id %" PRId64, name, hint);
    return DB_ERR_REDO;
}

enum db_status db_queue_stmt_in(struct db_conn *c, const char *name, const struct db_stmt *stmt,
                                const char **params, int qid_param, int commit, struct db_queue *q,
                                int *found, PGresult **out, struct db_error *err)
{
    struct db_queue_call call = {stmt, params, qid_param, out};
    return db_queue_stmts_in(c, name, &call, 1, commit, q, found, err);
}

enum db_status db_queue_arrays(struct db_arrays *arr, const void *items, size_t n, size_t ncols,
                               db_column_fn get, struct db_error *err)
{
    if (db_arrays_build(arr, items, n, ncols, get) != 0) {
        db_arrays_free(arr);
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    return DB_OK;
}

/* ---- queues ---- */

struct put_queue {
    const char *name;
    const struct db_queue_config *cfg;
    struct db_queue *out;
    enum db_queue_verdict verdict;
};

static enum db_status put_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct put_queue *a = arg;
    char ma[DB_INT_TEXT], ls[DB_INT_TEXT], bb[32], bm[32], rs[DB_INT_TEXT];
    snprintf(ma, sizeof(ma), "%d", a->cfg->max_attempts);
    snprintf(ls, sizeof(ls), "%d", a->cfg->lease_seconds);
    snprintf(bb, sizeof(bb), "%.6f", a->cfg->backoff_base_seconds);
    snprintf(bm, sizeof(bm), "%.6f", a->cfg->backoff_max_seconds);
    snprintf(rs, sizeof(rs), "%d", a->cfg->retention_seconds);
    const int per_state[] = {a->cfg->succeeded_retention_seconds, a->cfg->failed_retention_seconds,
                             a->cfg->cancelled_retention_seconds, a->cfg->dedupe_window_seconds};
    char text[4][DB_INT_TEXT];
    const char *params[18] = {a->name, ma, ls, bb, bm, rs};
    char limits[2][4][32];
    db_queue_limits_params(&a->cfg->limits, limits[0], params + 10);
    db_queue_limits_params(&a->cfg->key_limits, limits[1], params + 14);
    for (int i = 0; i < 4; i++) {
        snprintf(text[i], sizeof(text[i]), "%d", per_state[i] < 0 ? 0 : per_state[i]);
        /* NULL: retention_seconds */
        params[6 + i] = per_state[i] == DB_RETENTION_INHERIT && i < 3 ? NULL : text[i];
    }
    PGresult *r = NULL;
    enum db_status st = db_query(c, &st_queue_upsert, params, &r, err);
    if (st != DB_OK)
        return st;
    a->verdict = PQgetvalue(r, 0, 0)[0] == 't' ? DB_Q_CREATED : DB_Q_OK;
    queue_from_row(r, 0, 1, a->out);
    PQclear(r);
    return DB_OK;
}

enum db_status db_queues_put(struct db_pool *pool, const char *name,
                             const struct db_queue_config *cfg, struct db_queue *out,
                             enum db_queue_verdict *verdict, struct db_error *err)
{
    struct put_queue a = {name, cfg, out, DB_Q_OK};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, put_queue_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct pause_queue {
    const char *name;
    int pause;
    struct db_queue *out;
    int changed;
    enum db_queue_verdict verdict;
};

static enum db_status pause_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct pause_queue *a = arg;
    const char *params[] = {a->name, a->pause ? "true" : "false"};
    PGresult *r = NULL;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    a->changed = 0;
    enum db_status st = db_query(c, &st_queue_pause, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        a->changed = PQgetvalue(r, 0, 0)[0] == 't';
        queue_from_row(r, 0, 1, a->out);
        a->verdict = DB_Q_OK;
    }
    PQclear(r);
    return DB_OK;
}

enum db_status db_queues_pause(struct db_pool *pool, const char *name, int pause,
                               struct db_queue *out, int *changed, enum db_queue_verdict *verdict,
                               struct db_error *err)
{
    struct pause_queue a = {name, pause, out, 0, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, pause_queue_tx, &a, err);
    *verdict = a.verdict;
    *changed = a.changed;
    return st;
}

struct get_queue {
    const char *name;
    struct db_queue *out;
    struct db_queue_stats *stats;
    enum db_queue_verdict verdict;
};

static enum db_status get_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct get_queue *a = arg;
    int found;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = db_queue_resolve_in(c, a->name, a->out, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->out->id);
    const char *params[] = {id};
    PGresult *r = NULL;
    st = db_query(c, &st_queue_stats, params, &r, err);
    if (st != DB_OK)
        return st;
    db_queue_stats_from_row(r, 0, 0, a->stats);
    PQclear(r);
    a->verdict = DB_Q_OK;
    return DB_OK;
}

enum db_status db_queues_get(struct db_pool *pool, const char *name, struct db_queue *out,
                             struct db_queue_stats *stats, enum db_queue_verdict *verdict,
                             struct db_error *err)
{
    struct get_queue a = {name, out, stats, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, get_queue_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

/* Delete: the queue's row locked first (an enqueue's lock of it, FOR KEY SHARE, waits for it,
 * and then finds no queue), a quick look for a job in processing, then every job's row locked (a
 * claim that locked one first has finished by then, and its job is seen as processing), then all
 * of it deleted: the attempt history and dedupe windows (no foreign keys), then the queue (its
 * jobs go with it by the trigger queue_jobs_gone of migration 18, their bodies by
 * job_bodies_gone of migration 16, and its janitor row by its foreign key's cascade). */
static const struct db_stmt st_queue_lock = {
    "queue_lock", "SELECT id FROM rowlock.queues WHERE name = $1 FOR UPDATE", 1};
static const struct db_stmt st_queue_busy = {
    "queue_busy",
    "SELECT EXISTS (SELECT 1 FROM rowlock.jobs j WHERE j.queue_id = $1 AND " JOBS_LEASED ")", 1};
/* The jobs are found first and then locked by id: a claim that locked a pending job before
 * the delete began makes it processing as it commits, which moves it from one partial index to
 * the other, and a lock that waited for it re-checks only the id, not the state the job was
 * found in. (No job can be added meanwhile: an enqueue waits for the queue's row.) */
static const struct db_stmt st_queue_jobs_lock = {
    "queue_jobs_lock",
    /* clang-format off */
    "SELECT count(*) FILTER (WHERE state = 'processing') FROM (SELECT j.state FROM rowlock.jobs j "
    "WHERE j.id = ANY (ARRAY(" QUEUE_JOBS("j.id", "$1", "") ")) FOR UPDATE) s",
    /* clang-format on */
    1};
static const struct db_stmt st_queue_drop = {
    "queue_drop",
    /* clang-format off */
    "WITH history AS (DELETE FROM rowlock.job_attempts a "
    "  WHERE a.job_id IN (" QUEUE_JOBS("j.id", "$1", "") ")), "
    "windows AS (DELETE FROM rowlock.job_dedupe WHERE queue_id = $1) "
    "DELETE FROM rowlock.queues WHERE id = $1",
    /* clang-format on */
    1};

struct delete_queue {
    const char *name;
    int force;
    int64_t processing;
    enum db_queue_verdict verdict;
};

/* Runs st ($1 the queue's id) and reads its first value as an integer ('t' is 1). */
static enum db_status queue_value(struct db_conn *c, const struct db_stmt *st, const char *id,
                                  int64_t *value, struct db_error *err)
{
    const char *params[] = {id};
    PGresult *r = NULL;
    enum db_status s = db_query(c, st, params, &r, err);
    if (s != DB_OK)
        return s;
    const char *v = PQgetvalue(r, 0, 0);
    *value = v[0] == 't' ? 1 : strtoll(v, NULL, 10);
    PQclear(r);
    return DB_OK;
}

static enum db_status delete_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct delete_queue *a = arg;
    const char *params[] = {a->name};
    PGresult *r = NULL;
    char id[DB_INT_TEXT];
    int64_t busy = 0;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    a->processing = 0;
    enum db_status st = db_query(c, &st_queue_lock, params, &r, err);
    if (st != DB_OK || PQntuples(r) == 0) {
        PQclear(r);
        return st;
    }
    db_copy(id, sizeof(id), PQgetvalue(r, 0, 0));
    PQclear(r);
    a->verdict = DB_Q_QUEUE_BUSY;
    /* the common refusal without locking every job of a large queue */
    if (!a->force && ((st = queue_value(c, &st_queue_busy, id, &busy, err)) != DB_OK || busy))
        return st == DB_OK ? DB_ABORTED : st;
    st = queue_value(c, &st_queue_jobs_lock, id, &a->processing, err);
    if (st != DB_OK || (a->processing > 0 && !a->force))
        return st == DB_OK ? DB_ABORTED : st;
    st = db_query(c, &st_queue_drop, (const char *[]){id}, NULL, err);
    if (st == DB_ERR_HARD && strcmp(err->sqlstate, "23503") == 0) {
        a->verdict = DB_Q_QUEUE_REFERENCED; /* schedules target it (ON DELETE RESTRICT) */
        return DB_ABORTED;
    }
    if (st == DB_OK)
        a->verdict = DB_Q_OK;
    return st;
}

enum db_status db_queues_delete(struct db_pool *pool, const char *name, int force,
                                int64_t *processing, enum db_queue_verdict *verdict,
                                struct db_error *err)
{
    struct delete_queue a = {name, force, 0, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, delete_queue_tx, &a, err);
    *verdict = a.verdict;
    *processing = a.processing;
    if (st == DB_OK && a.verdict == DB_Q_OK)
        db_hint_set(&queue_hints, name, 0);
    return finish(st);
}

enum db_status db_queue_rows_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct db_queue_rows *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, a->stmt, a->params, &a->rows, err);
}

enum db_status db_queues_list(struct db_pool *pool, const char *after, int limit,
                              db_queue_each each, void *ctx, struct db_error *err)
{
    char lim[DB_INT_TEXT];
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *params[] = {after, lim};
    struct db_queue_rows a = {&st_queue_list, params, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, db_queue_rows_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_queue q;
        struct db_queue_stats s;
        queue_from_row(a.rows, i, 0, &q);
        db_queue_stats_from_row(a.rows, i, QUEUE_NCOLUMNS, &s);
        each(&q, &s, ctx);
    }
    PQclear(a.rows);
    return st;
}

/* ---- jobs ---- */

static const char *job_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct db_job_in *j = (const struct db_job_in *)items + i;
    switch (col) {
    case 0:
        return j->payload;
    case 1:
        return j->dedupe_key;
    case 2:
        return j->run_at;
    case 3:
        snprintf(buf, size, "%.6f", j->delay_seconds);
        return buf;
    case 4:
        snprintf(buf, size, "%d", j->priority);
        return buf;
    case 5:
        snprintf(buf, size, "%d", j->max_attempts);
        return buf;
    case 6:
        if (j->dedupe_window == 0)
            return NULL; /* the queue's */
        snprintf(buf, size, "%d", j->dedupe_window < 0 ? 0 : j->dedupe_window);
        return buf;
    default:
        return j->concurrency_key;
    }
}

struct enqueue {
    const char *queue;
    const struct db_job_in *jobs;
    size_t n;
    struct db_job_ref *out;
    const char *notify; /* NULL, or the NOTIFY payload this transaction sends */
    int notified;       /* the statement sent it */
    int in_caller;      /* in a caller's transaction (db_jobs_enqueue_in): never COMMIT */
    struct db_dep_refusal refusal;
    enum db_queue_verdict verdict;
};

/* An edge of the graph enqueue_link writes, and a child with its policy. */
struct edge {
    int64_t child, parent;
};
struct child {
    int64_t id;
    int run;
};

static const char *edge_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct edge *e = (const struct edge *)items + i;
    db_i64(buf, size, col == 0 ? e->child : e->parent);
    return buf;
}

static const char *child_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct child *k = (const struct child *)items + i;
    if (col == 1)
        return k->run ? "run" : "cancel";
    db_i64(buf, size, k->id);
    return buf;
}

/* The edges of a's jobs that were created (a duplicate keeps the parents it was enqueued with),
 * each parent named by id or by the batch's job (a duplicate's: the job holding its key; one
 * not known names no job). Returns the number of edges in *edges (malloc'd), -1 out of memory. */
static long collect_edges(const struct enqueue *a, struct edge **edges, struct child **kids,
                          size_t *nkids)
{
    size_t total = 0;
    for (size_t i = 0; i < a->n; i++)
        total += a->jobs[i].nparents;
    *edges = malloc((total ? total : 1) * sizeof(**edges));
    *kids = malloc((a->n ? a->n : 1) * sizeof(**kids));
    if (*edges == NULL || *kids == NULL)
        return -1;
    size_t n = 0;
    *nkids = 0;
    for (size_t i = 0; i < a->n; i++) {
        const struct db_job_in *j = &a->jobs[i];
        if (j->nparents == 0 || a->out[i].verdict != DB_Q_CREATED)
            continue;
        (*kids)[(*nkids)++] = (struct child){a->out[i].id, j->run_on_parent_failure};
        for (size_t k = 0; k < j->nparents; k++) {
            const struct db_job_parent *p = &j->parents[k];
            int64_t parent = p->id;
            if (parent == 0 && p->index >= 0 && (size_t)p->index < a->n)
                parent = a->out[p->index].id;
            (*edges)[n++] = (struct edge){a->out[i].id, parent};
        }
    }
    return (long)n;
}

/* Marks the refs of the jobs made waiting (ids: an array's text). */
static void mark_waiting(struct enqueue *a, const char *ids)
{
    for (const char *p = ids; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            continue;
        char *end;
        int64_t id = strtoll(p, &end, 10);
        for (size_t i = 0; i < a->n; i++)
            a->out[i].waiting |= a->out[i].id == id && a->out[i].verdict == DB_Q_CREATED;
        p = end - 1;
    }
}

/* The links of an enqueue with parents (st_enqueue_link), in its transaction. A refusal:
 * DB_ABORTED, the verdict and a->refusal set. */
static enum db_status enqueue_link(struct db_conn *c, struct enqueue *a, struct db_error *err)
{
    struct edge *edges = NULL;
    struct child *kids = NULL;
    size_t nkids = 0;
    long n = collect_edges(a, &edges, &kids, &nkids);
    enum db_status st = DB_OK;
    struct db_arrays ea = {0, 0, NULL}, ka = {0, 0, NULL};
    if (n < 0) {
        db_error_set(err, "", "out of memory linking an enqueue's jobs to their parents");
        st = DB_ERR_HARD;
    } else if (n > 0) {
        st = db_queue_arrays(&ea, edges, (size_t)n, 2, edge_column, err);
        if (st == DB_OK)
            st = db_queue_arrays(&ka, kids, nkids, 2, child_column, err);
    }
    free(edges);
    free(kids);
    if (st != DB_OK || n <= 0) {
        db_arrays_free(&ea);
        db_arrays_free(&ka);
        return st;
    }
    char max[DB_INT_TEXT];
    snprintf(max, sizeof(max), "%d", DB_JOB_CHILDREN_MAX);
    const char *params[] = {ea.arr[0], ea.arr[1], ka.arr[0], ka.arr[1], max};
    PGresult *r = NULL;
    st = db_query(c, &st_enqueue_link, params, &r, err);
    db_arrays_free(&ea);
    db_arrays_free(&ka);
    if (st != DB_OK)
        return st;
    if (!PQgetisnull(r, 0, 0)) {
        a->verdict = DB_Q_UNKNOWN_PARENT;
        a->refusal.parent = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    } else if (!PQgetisnull(r, 0, 1)) {
        a->verdict = DB_Q_PARENT_FAILED;
        a->refusal.parent = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        db_copy(a->refusal.state, sizeof(a->refusal.state), PQgetvalue(r, 0, 2));
    } else if (!PQgetisnull(r, 0, 3)) {
        a->verdict = DB_Q_TOO_MANY_CHILDREN;
        a->refusal.parent = strtoll(PQgetvalue(r, 0, 3), NULL, 10);
    } else {
        mark_waiting(a, PQgetvalue(r, 0, 4));
    }
    PQclear(r);
    return a->verdict == DB_Q_OK ? DB_OK : DB_ABORTED;
}

/* A duplicate the enqueue could not fully see (its statement's snapshot predates the enqueue
 * that holds the key): a new statement reads the job holding the key (id 0 in *ref), or the
 * state of the one it knows; a window row the enqueue took for a job that never went in is
 * pointed at the job that holds the key. The enqueue has committed by now (its COMMIT went with
 * it): a failure here leaves the outcome of the other jobs of the batch unknown to the client. */
static enum db_status dedupe_follow_up(struct db_conn *c, int64_t queue, const char *key,
                                       int64_t drawn, int orphan, struct db_job_ref *ref,
                                       struct db_error *err)
{
    char qid[DB_INT_TEXT], id[DB_INT_TEXT], mine[DB_INT_TEXT];
    snprintf(qid, sizeof(qid), "%" PRId64, queue);
    PGresult *r = NULL;
    enum db_status st = DB_OK;
    if (ref->id == 0 || orphan) {
        const char *params[] = {qid, key};
        if (db_query(c, &st_enqueue_dedupe_id, params, &r, err) != DB_OK)
            return DB_ERR_OUTCOME_UNKNOWN;
        if (PQntuples(r) == 1) {
            ref->id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
            db_copy(ref->state, sizeof(ref->state), PQgetvalue(r, 0, 1));
            ref->kept = 1;
        }
        PQclear(r);
        if (orphan && ref->id != 0) {
            snprintf(id, sizeof(id), "%" PRId64, ref->id);
            snprintf(mine, sizeof(mine), "%" PRId64, drawn);
            const char *repoint[] = {qid, key, id, mine};
            st = db_query(c, &st_enqueue_dedupe_repoint, repoint, NULL, err);
        }
        return st == DB_OK ? DB_OK : DB_ERR_OUTCOME_UNKNOWN;
    }
    snprintf(id, sizeof(id), "%" PRId64, ref->id);
    const char *params[] = {qid, key, id};
    if (db_query(c, &st_enqueue_dedupe_state, params, &r, err) != DB_OK)
        return DB_ERR_OUTCOME_UNKNOWN;
    if (PQntuples(r) == 1) {
        db_copy(ref->state, sizeof(ref->state), PQgetvalue(r, 0, 0));
        ref->kept = PQgetvalue(r, 0, 1)[0] == 't';
    }
    PQclear(r);
    return DB_OK;
}

/* Reads row i of st_enqueue's result into ref; *follow set when the row needs
 * dedupe_follow_up. */
static void enqueued_row(const PGresult *r, int i, struct db_job_ref *ref, int *follow)
{
    memset(ref, 0, sizeof(*ref));
    ref->id = PQgetisnull(r, i, 1) ? 0 : strtoll(PQgetvalue(r, i, 1), NULL, 10);
    ref->verdict = PQgetvalue(r, i, 2)[0] == 't' ? DB_Q_CREATED : DB_Q_DUPLICATE;
    *follow = 0;
    if (ref->verdict == DB_Q_CREATED) {
        db_copy(ref->state, sizeof(ref->state), "pending");
        ref->kept = 1;
    } else if (!PQgetisnull(r, i, 5)) {
        /* deleted as it ended: newer than what the statement's snapshot may still show */
        db_copy(ref->state, sizeof(ref->state), PQgetvalue(r, i, 5));
    } else if (!PQgetisnull(r, i, 4)) {
        db_copy(ref->state, sizeof(ref->state), PQgetvalue(r, i, 4));
        ref->kept = 1;
    } else {
        *follow = 1;
    }
}

static enum db_status enqueue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct enqueue *a = arg;
    struct db_queue q;
    int found, graph = 0; /* a job has parents: linked before COMMIT (enqueue_link) */
    for (size_t i = 0; i < a->n; i++)
        graph |= a->jobs[i].nparents > 0;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    struct db_arrays arr = {0, 0, NULL};
    enum db_status st = db_queue_arrays(&arr, a->jobs, a->n, 8, job_column, err);
    if (st != DB_OK)
        return st;
    const char *params[] = {NULL,       arr.arr[0], arr.arr[1], arr.arr[2], arr.arr[3],
                            arr.arr[4], arr.arr[5], a->notify,  arr.arr[6], arr.arr[7]};
    PGresult *r = NULL;
    st = bad_input(db_queue_stmt_in(c, a->queue, &st_enqueue, params, 0, !graph && !a->in_caller,
                                    &q, &found, &r, err),
                   err, &a->verdict);
    db_arrays_free(&arr);
    if (st != DB_OK || !found)
        return st;
    if (PQntuples(r) == 0 && a->n > 0) {
        /* the queue's row, locked FOR KEY SHARE, was deleted meanwhile: no job went in */
        PQclear(r);
        db_hint_set(&queue_hints, a->queue, 0);
        return DB_ABORTED;
    }
    a->notified = PQntuples(r) > 0 && !PQgetisnull(r, 0, 3);
    for (int i = 0; i < PQntuples(r) && (size_t)i < a->n; i++) {
        int follow;
        enqueued_row(r, i, &a->out[i], &follow);
        /* the window row names our drawn id, though no job went in */
        int orphan = PQgetvalue(r, i, 6)[0] == 't';
        int64_t drawn = strtoll(PQgetvalue(r, i, 7), NULL, 10);
        follow = follow || orphan;
        if (st == DB_OK && follow && a->jobs[i].dedupe_key != NULL)
            st = dedupe_follow_up(c, q.id, a->jobs[i].dedupe_key, drawn, orphan, &a->out[i], err);
    }
    PQclear(r);
    a->verdict = DB_Q_OK;
    if (st == DB_OK && graph)
        st = enqueue_link(c, a, err);
    return st;
}

enum db_status db_jobs_enqueue(struct db_pool *pool, const char *queue,
                               const struct db_job_in *jobs, size_t n, struct db_job_ref *out,
                               enum db_queue_verdict *verdict, struct db_error *err)
{
    int notified;
    return db_jobs_enqueue_notify(pool, queue, jobs, n, out, NULL, &notified, NULL, verdict, err);
}

enum db_status db_jobs_enqueue_notify(struct db_pool *pool, const char *queue,
                                      const struct db_job_in *jobs, size_t n,
                                      struct db_job_ref *out, const char *notify, int *notified,
                                      struct db_dep_refusal *refusal,
                                      enum db_queue_verdict *verdict, struct db_error *err)
{
    struct enqueue a = {.queue = queue,
                        .jobs = jobs,
                        .n = n,
                        .out = out,
                        .notify = notify,
                        .verdict = DB_Q_QUEUE_NOT_FOUND};
    /* a generic plan, as for claims (db/leases.c): the custom one is planned anew at every
     * enqueue for the same plan */
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, enqueue_tx, &a, err);
    *verdict = a.verdict;
    *notified = st == DB_OK && a.verdict == DB_Q_OK && a.notified;
    if (refusal != NULL)
        *refusal = a.refusal;
    return finish(st);
}

enum db_status db_jobs_enqueue_in(struct db_conn *c, const char *queue,
                                  const struct db_job_in *jobs, size_t n, struct db_job_ref *out,
                                  struct db_dep_refusal *refusal, enum db_queue_verdict *verdict,
                                  struct db_error *err)
{
    struct enqueue a = {.queue = queue,
                        .jobs = jobs,
                        .n = n,
                        .out = out,
                        .in_caller = 1,
                        .verdict = DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = enqueue_tx(c, &a, err);
    *verdict = a.verdict;
    *refusal = a.refusal;
    return st;
}

void db_job_clear(struct db_job *j)
{
    free(j->owner);
    free(j->dedupe_key);
    free(j->payload);
    free(j->progress);
    free(j->result);
    free(j->last_error);
    free(j->concurrency_key);
    free(j->parents);
    free(j->children);
    free(j->history);
    memset(j, 0, sizeof(*j));
}

static void job_from_row(const PGresult *r, int i, struct db_job *j)
{
    memset(j, 0, sizeof(*j));
    j->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
    db_copy(j->state, sizeof(j->state), PQgetvalue(r, i, 1));
    j->priority = atoi(PQgetvalue(r, i, 2));
    j->attempts = atoi(PQgetvalue(r, i, 3));
    j->max_attempts = atoi(PQgetvalue(r, i, 4));
    j->fence = strtoll(PQgetvalue(r, i, 5), NULL, 10);
    j->owner = dup_or_null(r, i, 6);
    db_copy(j->lease_expires_at, sizeof(j->lease_expires_at), PQgetvalue(r, i, 7));
    db_copy(j->run_at, sizeof(j->run_at), PQgetvalue(r, i, 8));
    db_copy(j->created_at, sizeof(j->created_at), PQgetvalue(r, i, 9));
    db_copy(j->updated_at, sizeof(j->updated_at), PQgetvalue(r, i, 10));
    db_copy(j->finished_at, sizeof(j->finished_at), PQgetvalue(r, i, 11));
    j->dedupe_key = dup_or_null(r, i, 12);
    j->payload = dup_or_null(r, i, 13);
    j->progress = dup_or_null(r, i, 14);
    j->result = dup_or_null(r, i, 15);
    j->last_error = dup_or_null(r, i, 16);
    j->concurrency_key = dup_or_null(r, i, 17);
    j->parents = dup_or_null(r, i, 18);
    j->children = dup_or_null(r, i, 19);
    j->waiting_on = atoi(PQgetvalue(r, i, 20));
    db_copy(j->on_parent_failure, sizeof(j->on_parent_failure), PQgetvalue(r, i, 21));
}

struct get_job {
    const char *queue;
    int64_t id;
    struct db_job *out;
    enum db_queue_verdict verdict;
};

static enum db_status get_job_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct get_job *a = arg;
    struct db_queue q;
    int found;
    db_job_clear(a->out);
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = db_queue_resolve_in(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[DB_INT_TEXT], qid[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->id);
    db_i64(qid, sizeof(qid), q.id);
    const char *params[] = {id, qid};
    PGresult *r = NULL;
    a->verdict = DB_Q_JOB_NOT_FOUND;
    st = db_query(c, &st_job_get, params, &r, err);
    if (st != DB_OK)
        return st;
    if (PQntuples(r) == 1) {
        job_from_row(r, 0, a->out);
        a->verdict = DB_Q_OK;
    }
    a->out->queue = q.cfg;
    PQclear(r);
    if (a->verdict != DB_Q_OK)
        return DB_OK;
    st = db_query(c, &st_job_history, params, &r, err);
    if (st != DB_OK)
        return st;
    size_t n = (size_t)PQntuples(r);
    a->out->history = calloc(n ? n : 1, sizeof(struct db_attempt));
    for (size_t i = 0; a->out->history && i < n; i++) {
        struct db_attempt *h = &a->out->history[i];
        h->fence = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
        h->attempt = atoi(PQgetvalue(r, (int)i, 1));
        db_copy(h->owner, sizeof(h->owner), PQgetvalue(r, (int)i, 2));
        db_copy(h->claimed_at, sizeof(h->claimed_at), PQgetvalue(r, (int)i, 3));
        db_copy(h->ended_at, sizeof(h->ended_at), PQgetvalue(r, (int)i, 4));
        db_copy(h->outcome, sizeof(h->outcome), PQgetvalue(r, (int)i, 5));
        a->out->nhistory++;
    }
    PQclear(r);
    return DB_OK;
}

enum db_status db_jobs_get(struct db_pool *pool, const char *queue, int64_t id, struct db_job *out,
                           enum db_queue_verdict *verdict, struct db_error *err)
{
    memset(out, 0, sizeof(*out));
    struct get_job a = {queue, id, out, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_REPEATABLE_READ, get_job_tx, &a, err);
    *verdict = a.verdict;
    return st;
}

struct list_jobs {
    const char *queue, *state;
    int64_t after;
    int limit;
    long long budget;
    PGresult *rows;
    enum db_queue_verdict verdict;
};

static enum db_status list_jobs_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct list_jobs *a = arg;
    struct db_queue q;
    int found;
    PQclear(a->rows);
    a->rows = NULL;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = db_queue_resolve_in(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char qid[DB_INT_TEXT], after[DB_INT_TEXT], lim[DB_INT_TEXT], budget[DB_INT_TEXT];
    db_i64(qid, sizeof(qid), q.id);
    db_i64(after, sizeof(after), a->after);
    snprintf(lim, sizeof(lim), "%d", a->limit);
    snprintf(budget, sizeof(budget), "%lld", a->budget);
    const char *params[] = {qid, after, a->state, lim, a->budget > 0 ? budget : NULL};
    a->verdict = DB_Q_OK;
    return db_query(c, &st_job_list, params, &a->rows, err);
}

enum db_status db_jobs_list(struct db_pool *pool, const char *queue, const char *state,
                            int64_t after, int limit, long long budget, db_job_each each, void *ctx,
                            int *more, enum db_queue_verdict *verdict, struct db_error *err)
{
    struct list_jobs a = {.queue = queue,
                          .state = state,
                          .after = after,
                          .limit = limit,
                          .budget = budget,
                          .verdict = DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_jobs_tx, &a, err);
    *verdict = a.verdict;
    *more = 0;
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_job j;
        job_from_row(a.rows, i, &j);
        *more = PQgetvalue(a.rows, i, JOB_NCOLUMNS)[0] == 't';
        each(&j, ctx);
        db_job_clear(&j);
    }
    PQclear(a.rows);
    return st;
}

enum db_status db_jobs_parents(struct db_pool *pool, const char *queue, int64_t id, int64_t after,
                               int limit, db_job_parent_each each, void *ctx,
                               enum db_queue_verdict *verdict, struct db_error *err)
{
    char from[DB_INT_TEXT], lim[DB_INT_TEXT];
    db_i64(from, sizeof(from), after);
    snprintf(lim, sizeof(lim), "%d", limit);
    struct job_op a = {.queue = queue,
                       .stmt = &st_job_parents,
                       .id = id,
                       .extra = {from, lim},
                       .verdict = DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_job_op_run(pool, &a, err);
    if (st == DB_OK && a.verdict == DB_Q_OK && PQgetvalue(a.rows, 0, 0)[0] != 't')
        a.verdict = DB_Q_JOB_NOT_FOUND;
    *verdict = a.verdict;
    for (int i = 0; st == DB_OK && a.verdict == DB_Q_OK && i < PQntuples(a.rows); i++) {
        if (PQgetisnull(a.rows, i, 1))
            continue;
        struct db_job_parent_row p = {strtoll(PQgetvalue(a.rows, i, 1), NULL, 10),
                                      strtoll(PQgetvalue(a.rows, i, 2), NULL, 10),
                                      PQgetvalue(a.rows, i, 3),
                                      PQgetvalue(a.rows, i, 4),
                                      PQgetvalue(a.rows, i, 5),
                                      PQgetisnull(a.rows, i, 6) ? NULL : PQgetvalue(a.rows, i, 6)};
        each(&p, ctx);
    }
    PQclear(a.rows);
    return st;
}

static enum db_status job_op_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct job_op *a = arg;
    struct db_queue q;
    int found;
    PQclear(a->rows);
    a->rows = NULL;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    a->rolled_back = 0;
    char id[DB_INT_TEXT];
    db_i64(id, sizeof(id), a->id);
    const char *params[] = {id, NULL, a->extra[0], a->extra[1], a->extra[2], a->extra[3]};
    enum db_status st = db_queue_stmt_in(c, a->queue, a->stmt, params, 1, a->then == NULL, &q,
                                         &found, &a->rows, err);
    if (st == DB_OK && found)
        a->verdict = DB_Q_OK;
    if (st == DB_OK && found && a->then != NULL) {
        st = a->then(c, a, err);
        a->rolled_back = st == DB_ABORTED;
    }
    return bad_input(st, err, &a->verdict);
}

enum db_status db_job_op_run(struct db_pool *pool, struct job_op *a, struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, job_op_tx, a, err);
    return finish(st);
}

enum db_status db_jobs_retry(struct db_pool *pool, const char *queue, int64_t id,
                             enum db_queue_verdict *verdict, struct db_error *err)
{
    struct job_op a = {
        .queue = queue, .stmt = &st_job_retry, .id = id, .verdict = DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_job_op_run(pool, &a, err);
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_Q_OK && PQntuples(a.rows) == 0) {
        /* not failed: say whether it exists */
        struct db_job j;
        enum db_queue_verdict v;
        st = db_jobs_get(pool, queue, id, &j, &v, err);
        *verdict = v == DB_Q_OK ? DB_Q_NOT_FAILED : v;
        db_job_clear(&j);
    }
    PQclear(a.rows);
    return st;
}

enum db_status db_jobs_cancel(struct db_pool *pool, const char *queue, int64_t id,
                              enum db_queue_verdict *verdict, struct db_error *err)
{
    struct job_op a = {
        .queue = queue, .stmt = &st_job_cancel, .id = id, .verdict = DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_job_op_run(pool, &a, err);
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_Q_OK)
        *verdict = PQntuples(a.rows) == 0               ? DB_Q_JOB_NOT_FOUND
                   : PQgetvalue(a.rows, 0, 1)[0] == 't' ? DB_Q_OK
                                                        : DB_Q_JOB_TERMINAL;
    if (st == DB_OK && *verdict == DB_Q_OK && PQgetvalue(a.rows, 0, 2)[0] == 't')
        db_jobs_deleted_add("cancelled", 1);
    PQclear(a.rows);
    return st;
}
