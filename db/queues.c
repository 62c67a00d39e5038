/* Leased work queues (see queues.h). The protocol's predicates are named SQL fragments written
 * once below (LEASE_*) and composed into each statement; SET lists stay explicit per statement.
 * Every fenced write is one statement: lock the job, apply the change where the predicate holds,
 * and return what the row looked like, so the refusal reason is classified in one place
 * (lease_verdict). */
#include "db/queues.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/tx.h"

/* ---- the protocol's predicates (j is rowlock.jobs; $3 owner, $4 fence) ---- */

/* Claimable: due, and either pending or an expired lease that still has an attempt to give
 * (or is re-presented by the same owner, which spends none). claimable_at is run_at for
 * pending jobs and lease_expires_at for processing ones, so "due" is one indexed range. */
#define LEASE_CLAIMABLE                                                                            \
    "j.claimable_at <= now() AND (j.state = 'pending' OR j.attempts < j.max_attempts "             \
    "OR j.owner = $2)"
/* Owned: this owner, this fence, still processing. Hand-back and release need only this: a
 * worker whose lease ran out may still give the job back (nobody else has claimed it, or the
 * fence would differ), and refusing it would only delay the job until the lease is taken over. */
#define LEASE_OWNED_BY(owner, fence)                                                               \
    "j.owner = " owner " AND j.fence = " fence " AND j.state = 'processing'"
#define LEASE_OWNED LEASE_OWNED_BY("$3", "$4")
/* Fenced writes (heartbeat, complete, fail) also need a live lease: at expiry a takeover is
 * already licensed, so the old owner must not win that race. */
#define LEASE_LIVE_BY(owner, fence) LEASE_OWNED_BY(owner, fence) " AND j.lease_expires_at > now()"
#define LEASE_LIVE                  LEASE_LIVE_BY("$3", "$4")

/* The row as it was, for classifying a refusal: id, state, owner, fence, live. */
#define LEASE_TARGET                                                                               \
    "target AS (SELECT j.id, j.state, j.owner, j.fence, j.lease_expires_at > now() AS live "       \
    "FROM rowlock.jobs j WHERE j.id = $1 AND j.queue_id = $2 FOR UPDATE)"
#define LEASE_RESULT(extra)                                                                        \
    "SELECT target.state, target.owner, target.fence, target.live, w.id IS NOT NULL, " extra       \
    " FROM target LEFT JOIN w ON true"

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
/* Delay before retry n (attempts already spent): base * 2^(n-1), at most max (the exponent is
 * capped so that a job with a thousand attempts does not overflow the arithmetic). */
#define BACKOFF                                                                                    \
    "make_interval(secs => least(q.backoff_max_seconds, q.backoff_base_seconds * "                 \
    "power(2, least(greatest(j.attempts - 1, 0), 60))))"

#define QUEUE_COLUMNS                                                                              \
    "id, name, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds, "           \
    "retention_seconds, " TS("created_at") ", " TS("updated_at")

static const struct db_stmt st_queue_resolve = {
    "queue_resolve", "SELECT " QUEUE_COLUMNS " FROM rowlock.queues WHERE name = $1", 1};
static const struct db_stmt st_queue_upsert = {
    "queue_upsert",
    "INSERT INTO rowlock.queues AS q (name, max_attempts, lease_seconds, backoff_base_seconds, "
    "backoff_max_seconds, retention_seconds) VALUES ($1, $2, $3, $4, $5, $6) "
    "ON CONFLICT (name) DO UPDATE SET max_attempts = EXCLUDED.max_attempts, "
    "lease_seconds = EXCLUDED.lease_seconds, backoff_base_seconds = "
    "EXCLUDED.backoff_base_seconds, backoff_max_seconds = EXCLUDED.backoff_max_seconds, "
    "retention_seconds = EXCLUDED.retention_seconds, updated_at = now() "
    "RETURNING (xmax = 0), " QUEUE_COLUMNS,
    6};
#define STATS_COLUMNS                                                                              \
    "count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'processing'), "    \
    "count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'failed'), "      \
    "coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE state = 'pending' AND "         \
    "run_at <= now())), 0)"
static const struct db_stmt st_queue_stats = {
    "queue_stats", "SELECT " STATS_COLUMNS " FROM rowlock.jobs WHERE queue_id = $1", 1};
static const struct db_stmt st_queue_list = {
    "queue_list",
    "SELECT " QUEUE_COLUMNS ", s.* FROM rowlock.queues q2, LATERAL (SELECT " STATS_COLUMNS
    " FROM rowlock.jobs WHERE queue_id = q2.id) s WHERE q2.name > coalesce($1, '') "
    "ORDER BY q2.name LIMIT $2",
    2};

/* Enqueue: ids are drawn first so that every input row maps to its job. */
static const struct db_stmt st_enqueue = {
    "jobs_enqueue",
    "WITH q AS (SELECT id, max_attempts FROM rowlock.queues WHERE id = $1), "
    "input AS (SELECT nextval('rowlock.jobs_id_seq') AS id, u.* FROM (SELECT * FROM "
    "  unnest($2::text[], $3::text[], $4::text[], $5::float8[], $6::int[], $7::int[]) "
    "  WITH ORDINALITY AS x(payload, dedupe, run_at, delay, priority, max_attempts, i) "
    "  ORDER BY i) u), "
    "timed AS (SELECT input.*, coalesce(run_at::timestamptz, now() + make_interval(secs => "
    "  delay)) AS due FROM input), "
    "ins AS (INSERT INTO rowlock.jobs (id, queue_id, state, priority, run_at, claimable_at, "
    "  max_attempts, dedupe_key) SELECT t.id, q.id, 'pending', t.priority, t.due, t.due, "
    "  coalesce(nullif(t.max_attempts, 0), q.max_attempts), t.dedupe FROM timed t, q ORDER BY t.i "
    "  ON CONFLICT (queue_id, dedupe_key) WHERE dedupe_key IS NOT NULL AND state IN "
    "  ('pending', 'processing') DO NOTHING RETURNING id), "
    "bodies AS (INSERT INTO rowlock.job_bodies (job_id, payload) SELECT ins.id, "
    "  input.payload::jsonb FROM ins JOIN input ON input.id = ins.id) "
    "SELECT input.i, coalesce(ins.id, "
    "  (SELECT min(i2.id) FROM ins i2 JOIN input x2 ON x2.id = i2.id WHERE x2.dedupe = "
    "input.dedupe), "
    "  (SELECT j.id FROM rowlock.jobs j WHERE j.queue_id = $1 "
    "  AND j.dedupe_key = input.dedupe AND j.state IN ('pending', 'processing'))), "
    "  ins.id IS NOT NULL FROM input LEFT JOIN ins ON ins.id = input.id ORDER BY input.i",
    7};

#define JOB_COLUMNS                                                                                \
    "j.id, j.state, j.priority, j.attempts, j.max_attempts, j.fence, j.owner, "                    \
    "coalesce(" TS("j.lease_expires_at") ", ''), " TS("j.run_at") ", " TS("j.created_at") ", " TS( \
        "j.updated_at") ", coalesce(" TS("j.finished_at") ", ''), j.dedupe_key, "                  \
                                                          "b.payload::text, b.progress::text, "    \
                                                          "b.result::text, b.last_error::text"
static const struct db_stmt st_job_get = {
    "job_get",
    "SELECT " JOB_COLUMNS " FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "WHERE j.id = $1 AND j.queue_id = $2",
    2};
static const struct db_stmt st_job_history = {
    "job_history",
    "SELECT fence, attempt, owner, " TS("claimed_at") ", coalesce(" TS(
        "ended_at") ", ''), "
                    "coalesce(outcome, '') FROM rowlock.job_attempts WHERE job_id = $1 ORDER BY "
                    "fence",
    1};
static const struct db_stmt st_job_list = {
    "job_list",
    "SELECT " JOB_COLUMNS " FROM rowlock.jobs j JOIN rowlock.job_bodies b ON b.job_id = j.id "
    "WHERE j.queue_id = $1 AND j.id > $2 AND ($3::text IS NULL OR j.state = $3) "
    "ORDER BY j.id LIMIT $4",
    4};
static const struct db_stmt st_job_retry = {
    "job_retry",
    "UPDATE rowlock.jobs j SET state = 'pending', attempts = 0, run_at = now(), "
    "claimable_at = now(), finished_at = NULL, updated_at = now() "
    "WHERE j.id = $1 AND j.queue_id = $2 AND j.state = 'failed' RETURNING j.id",
    2};
static const struct db_stmt st_job_cancel = {
    "job_cancel",
    "WITH target AS (SELECT j.id, j.state, j.fence FROM rowlock.jobs j WHERE j.id = $1 AND "
    "  j.queue_id = $2 FOR UPDATE), "
    "w AS (UPDATE rowlock.jobs j SET state = 'failed', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now() FROM target "
    "  WHERE j.id = target.id AND j.state IN ('pending', 'processing') RETURNING j.id, j.fence), "
    "b AS (UPDATE rowlock.job_bodies b SET last_error = '{\"cancelled\": true}' FROM w "
    "  WHERE b.job_id = w.id), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'failed' FROM w "
    "  WHERE a.job_id = w.id AND a.ended_at IS NULL) "
    "SELECT target.state, w.id IS NOT NULL FROM target LEFT JOIN w ON true",
    2};

/* Statements that join a few rows (a claim's candidates, a batch's items) to rowlock.jobs say
 * "j.id = ANY (those ids)" as well: an index condition on the primary key. Without it the
 * planner, costing random reads as from disk, prefers to hash-join against a sequential scan of
 * the whole table up to tens of thousands of rows, and a claim then costs in proportion to every
 * job the table retains.
 *
 * Claim: one statement. $1 queue id, $2 owner, $3 max jobs, $4 lease seconds (NULL: queue's).
 * A re-claim by the same owner of its own expired lease keeps the attempt; any other claim
 * spends one. Every claim bumps the fence and opens an attempt-history row; the row of an
 * attempt whose lease ran out is closed as lease_expired. */
static const struct db_stmt st_claim = {
    "leases_claim",
    "WITH q AS (SELECT id, lease_seconds FROM rowlock.queues WHERE id = $1), "
    "cand AS (SELECT j.id, j.state AS was, j.owner AS was_owner FROM rowlock.jobs j "
    "  WHERE j.queue_id = $1 AND " LEASE_CLAIMABLE " "
    "  ORDER BY j.priority DESC, j.claimable_at, j.id LIMIT $3 FOR UPDATE OF j SKIP LOCKED), "
    "w AS (UPDATE rowlock.jobs j SET "
    "  attempts = CASE WHEN cand.was = 'processing' AND cand.was_owner = $2 THEN j.attempts "
    "    ELSE j.attempts + 1 END, "
    "  fence = j.fence + 1, state = 'processing', owner = $2, "
    "  lease_expires_at = now() + make_interval(secs => coalesce($4::float8, q.lease_seconds)), "
    "  claimable_at = now() + make_interval(secs => coalesce($4::float8, q.lease_seconds)), "
    "  updated_at = now() "
    "  FROM cand, q WHERE j.id = cand.id AND j.id = ANY (ARRAY(SELECT id FROM cand)) "
    "  RETURNING j.id, j.fence, j.attempts, j.priority, j.lease_expires_at, cand.was), "
    "closed AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'lease_expired' "
    "  FROM w WHERE w.was = 'processing' AND a.job_id = w.id AND a.ended_at IS NULL), "
    "opened AS (INSERT INTO rowlock.job_attempts (job_id, fence, attempt, owner) "
    "  SELECT id, fence, attempts, $2 FROM w) "
    "SELECT w.id, w.fence, w.attempts, w.priority, w.was = 'processing', " TS(
        "w.lease_expires_at") ", "
                              "(SELECT b.payload::text FROM rowlock.job_bodies b "
                              "WHERE b.job_id = w.id) FROM w ORDER BY w.priority DESC, w.id",
    4};

/* Fenced writes: $1 job id, $2 queue id, $3 owner, $4 fence, then their own. */
static const struct db_stmt st_heartbeat = {
    "lease_heartbeat",
    "WITH q AS (SELECT lease_seconds FROM rowlock.queues WHERE id = $2), " LEASE_TARGET ", "
    "w AS (UPDATE rowlock.jobs j SET "
    "  lease_expires_at = now() + make_interval(secs => coalesce($5::float8, q.lease_seconds)), "
    "  claimable_at = now() + make_interval(secs => coalesce($5::float8, q.lease_seconds)), "
    "  updated_at = now() FROM target, q WHERE j.id = target.id AND " LEASE_LIVE " "
    "  RETURNING j.id, j.lease_expires_at), "
    "b AS (UPDATE rowlock.job_bodies b SET progress = coalesce($6::jsonb, b.progress) FROM w "
    "  WHERE b.job_id = w.id) " LEASE_RESULT("coalesce(" TS("w.lease_expires_at") ", '')"),
    6};
static const struct db_stmt st_complete = {
    "lease_complete",
    "WITH " LEASE_TARGET ", "
    "w AS (UPDATE rowlock.jobs j SET state = 'succeeded', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now() FROM target "
    "  WHERE j.id = target.id AND " LEASE_LIVE " RETURNING j.id), "
    "b AS (UPDATE rowlock.job_bodies b SET result = $5::jsonb FROM w "
    "  WHERE b.job_id = w.id AND $5::jsonb IS NOT NULL), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'completed' FROM w "
    "  WHERE a.job_id = w.id AND a.fence = $4) " LEASE_RESULT("''"),
    5};
static const struct db_stmt st_fail = {
    "lease_fail",
    "WITH q AS (SELECT * FROM rowlock.queues WHERE id = $2), " LEASE_TARGET ", "
    "w AS (UPDATE rowlock.jobs j SET "
    "  state = CASE WHEN $6 AND j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END, "
    "  owner = NULL, lease_expires_at = NULL, "
    "  run_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN now() + " BACKOFF
    "    ELSE j.run_at END, "
    "  claimable_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN now() + " BACKOFF
    "    ELSE NULL END, "
    "  finished_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN NULL ELSE now() END, "
    "  updated_at = now() FROM target, q WHERE j.id = target.id AND " LEASE_LIVE " "
    "  RETURNING j.id, j.state), "
    "b AS (UPDATE rowlock.job_bodies b SET last_error = $5::jsonb FROM w WHERE b.job_id = w.id), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'failed' FROM w "
    "  WHERE a.job_id = w.id AND a.fence = $4) " LEASE_RESULT("coalesce(w.state, '')"),
    6};
static const struct db_stmt st_handback = {
    "lease_handback",
    "WITH " LEASE_TARGET ", "
    "w AS (UPDATE rowlock.jobs j SET state = 'pending', owner = NULL, lease_expires_at = NULL, "
    "  attempts = j.attempts - 1, run_at = now(), claimable_at = now(), updated_at = now() "
    "  FROM target WHERE j.id = target.id AND " LEASE_OWNED " RETURNING j.id), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'handed_back' FROM w "
    "  WHERE a.job_id = w.id AND a.fence = $4) " LEASE_RESULT("''"),
    4};
static const struct db_stmt st_release = {
    "lease_release",
    "WITH " LEASE_TARGET ", "
    "w AS (UPDATE rowlock.jobs j SET "
    "  state = CASE WHEN j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END, "
    "  owner = NULL, lease_expires_at = NULL, run_at = now(), "
    "  claimable_at = CASE WHEN j.attempts < j.max_attempts THEN now() ELSE NULL END, "
    "  finished_at = CASE WHEN j.attempts < j.max_attempts THEN NULL ELSE now() END, "
    "  updated_at = now() FROM target WHERE j.id = target.id AND " LEASE_OWNED " "
    "  RETURNING j.id, j.state), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'released' FROM w "
    "  WHERE a.job_id = w.id AND a.fence = $4) " LEASE_RESULT("coalesce(w.state, '')"),
    4};

/* Batch completion: $1 queue id, $2 ids, $3 owners, $4 fences, $5 results. Rows are locked in
 * id order so that concurrent settlements cannot deadlock. */
static const struct db_stmt st_complete_batch = {
    "lease_complete_batch",
    "WITH items AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[]) "
    "  WITH ORDINALITY AS x(id, owner, fence, result, i)), "
    /* each item's job, locked in id order, carrying what the item claims (a join here, not in
     * w, keeps the cost linear in the batch) */
    "target AS (SELECT j.id, j.state, j.owner, j.fence, j.lease_expires_at > now() AS live, "
    "  items.owner AS want_owner, items.fence AS want_fence, items.result "
    "  FROM rowlock.jobs j JOIN items ON items.id = j.id "
    "  WHERE j.queue_id = $1 AND j.id = ANY ($2::bigint[]) ORDER BY j.id FOR UPDATE OF j), "
    "w AS (UPDATE rowlock.jobs j SET state = 'succeeded', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now() FROM target "
    "  WHERE j.id = target.id AND " LEASE_LIVE_BY(
        "target.want_owner",
        "target.want_fence") "  RETURNING j.id, target.want_fence AS fence, target.result), "
                             "b AS (UPDATE rowlock.job_bodies b SET result = w.result::jsonb FROM "
                             "w "
                             "  WHERE b.job_id = w.id AND w.result IS NOT NULL), "
                             "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = "
                             "'completed' FROM w "
                             "  WHERE a.job_id = w.id AND a.fence = w.fence) "
                             "SELECT items.i, target.state, target.owner, target.fence, "
                             "target.live, w.id IS NOT NULL, "
                             "  target.id IS NOT NULL FROM items LEFT JOIN target ON target.id = "
                             "items.id "
                             "  LEFT JOIN w ON w.id = items.id ORDER BY items.i",
    5};

static const struct db_stmt st_queue_ids = {
    "queue_ids", "SELECT id, name, retention_seconds FROM rowlock.queues ORDER BY id", 0};
/* Janitor: $1 queue id, $2 batch, $3 retention seconds. */
static const struct db_stmt st_expire = {
    "queue_expire",
    "WITH dead AS (SELECT j.id FROM rowlock.jobs j WHERE j.queue_id = $1 AND "
    "  j.claimable_at <= now() AND j.state = 'processing' AND j.attempts >= j.max_attempts "
    "  LIMIT $2 FOR UPDATE SKIP LOCKED), "
    "w AS (UPDATE rowlock.jobs j SET state = 'failed', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now() FROM dead "
    "  WHERE j.id = dead.id RETURNING j.id), "
    "b AS (UPDATE rowlock.job_bodies b SET last_error = '{\"lease_expired\": true}' FROM w "
    "  WHERE b.job_id = w.id), "
    "h AS (UPDATE rowlock.job_attempts a SET ended_at = now(), outcome = 'lease_expired' FROM w "
    "  WHERE a.job_id = w.id AND a.ended_at IS NULL) "
    "SELECT count(*) FROM w",
    2};
static const struct db_stmt st_purge = {
    "queue_purge",
    "WITH gone AS (DELETE FROM rowlock.jobs WHERE id IN (SELECT j.id FROM rowlock.jobs j WHERE "
    "  j.queue_id = $1 AND j.finished_at < now() - make_interval(secs => $3::float8) "
    "  LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id), "
    "history AS (DELETE FROM rowlock.job_attempts a USING gone WHERE a.job_id = gone.id) "
    "SELECT count(*) FROM gone",
    3};
static const struct db_stmt st_all_stats = {
    "queues_all_stats",
    "SELECT q.name, s.* FROM rowlock.queues q, LATERAL (SELECT " STATS_COLUMNS
    " FROM rowlock.jobs WHERE queue_id = q.id) s ORDER BY q.name",
    0};
/* What slows every Postgres queue: dead tuples in its tables, and the oldest transaction that
 * holds back vacuum (its snapshot keeps dead tuples alive). */
static const struct db_stmt st_vacuum_health = {
    "queues_vacuum_health",
    "SELECT (SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE schemaname = "
    "'rowlock' AND relname IN ('jobs', 'job_bodies', 'job_attempts')), "
    "(SELECT coalesce(extract(epoch FROM now() - min(xact_start)), 0) FROM pg_stat_activity "
    "WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid())",
    0};

/* ---- helpers ---- */

static void i64(char *buf, size_t size, int64_t v)
{
    snprintf(buf, size, "%" PRId64, v);
}

/* Copies src into dst of size bytes, cut to fit, always terminated. */
static void copy(char *dst, size_t size, const char *src)
{
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
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
                                        "job_not_failed",
                                        "bad_input"};
    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "unknown";
}

static void queue_from_row(const PGresult *r, int row, int col, struct db_queue *q)
{
    q->id = strtoll(PQgetvalue(r, row, col), NULL, 10);
    copy(q->name, sizeof(q->name), PQgetvalue(r, row, col + 1));
    q->cfg.max_attempts = atoi(PQgetvalue(r, row, col + 2));
    q->cfg.lease_seconds = atoi(PQgetvalue(r, row, col + 3));
    q->cfg.backoff_base_seconds = atof(PQgetvalue(r, row, col + 4));
    q->cfg.backoff_max_seconds = atof(PQgetvalue(r, row, col + 5));
    q->cfg.retention_seconds = atoi(PQgetvalue(r, row, col + 6));
    copy(q->created_at, sizeof(q->created_at), PQgetvalue(r, row, col + 7));
    copy(q->updated_at, sizeof(q->updated_at), PQgetvalue(r, row, col + 8));
}

static void stats_from_row(const PGresult *r, int row, int col, struct db_queue_stats *s)
{
    s->pending = strtoll(PQgetvalue(r, row, col), NULL, 10);
    s->processing = strtoll(PQgetvalue(r, row, col + 1), NULL, 10);
    s->succeeded = strtoll(PQgetvalue(r, row, col + 2), NULL, 10);
    s->failed = strtoll(PQgetvalue(r, row, col + 3), NULL, 10);
    s->oldest_pending_age_seconds = atof(PQgetvalue(r, row, col + 4));
}

/* Resolves the queue by name in the caller's transaction; 0 when there is none. */
static enum db_status resolve(struct db_conn *c, const char *name, struct db_queue *q, int *found,
                              struct db_error *err)
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

/* Why a fenced write did not apply, from the row as it was (columns: state, owner, fence, live,
 * applied). The one place refusals are classified. */
static enum db_queue_verdict lease_verdict(const PGresult *r, int row, int col, const char *owner,
                                           int64_t fence)
{
    if (PQntuples(r) <= row || PQgetisnull(r, row, col))
        return DB_Q_JOB_NOT_FOUND;
    if (PQgetvalue(r, row, col + 4)[0] == 't')
        return DB_Q_OK;
    const char *state = PQgetvalue(r, row, col);
    if (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0)
        return DB_Q_JOB_TERMINAL;
    if (PQgetisnull(r, row, col + 1) || strcmp(PQgetvalue(r, row, col + 1), owner) != 0)
        return DB_Q_OWNER_MISMATCH;
    if (strtoll(PQgetvalue(r, row, col + 2), NULL, 10) != fence)
        return DB_Q_FENCE_MISMATCH;
    return DB_Q_LEASE_EXPIRED;
}

/* Maps PostgreSQL refusing a value (class 22: bad timestamp, bad JSON) to bad input. */
static enum db_status bad_input(enum db_status st, const struct db_error *err,
                                enum db_queue_verdict *verdict)
{
    if (st == DB_ERR_HARD && strncmp(err->sqlstate, "22", 2) == 0) {
        *verdict = DB_Q_BAD_INPUT;
        return DB_ABORTED;
    }
    return st;
}

static enum db_status finish(enum db_status st)
{
    return st == DB_ABORTED ? DB_OK : st;
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
    char ma[16], ls[16], bb[32], bm[32], rs[16];
    snprintf(ma, sizeof(ma), "%d", a->cfg->max_attempts);
    snprintf(ls, sizeof(ls), "%d", a->cfg->lease_seconds);
    snprintf(bb, sizeof(bb), "%.6f", a->cfg->backoff_base_seconds);
    snprintf(bm, sizeof(bm), "%.6f", a->cfg->backoff_max_seconds);
    snprintf(rs, sizeof(rs), "%d", a->cfg->retention_seconds);
    const char *params[] = {a->name, ma, ls, bb, bm, rs};
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
    enum db_status st = resolve(c, a->name, a->out, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[24];
    i64(id, sizeof(id), a->out->id);
    const char *params[] = {id};
    PGresult *r = NULL;
    st = db_query(c, &st_queue_stats, params, &r, err);
    if (st != DB_OK)
        return st;
    stats_from_row(r, 0, 0, a->stats);
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

struct rows_query {
    const struct db_stmt *stmt;
    const char *const *params;
    PGresult *rows;
};

static enum db_status rows_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct rows_query *a = arg;
    PQclear(a->rows);
    a->rows = NULL;
    return db_query(c, a->stmt, a->params, &a->rows, err);
}

enum db_status db_queues_list(struct db_pool *pool, const char *after, int limit,
                              db_queue_each each, void *ctx, struct db_error *err)
{
    char lim[16];
    snprintf(lim, sizeof(lim), "%d", limit);
    const char *params[] = {after, lim};
    struct rows_query a = {&st_queue_list, params, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, rows_tx, &a, err);
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_queue q;
        struct db_queue_stats s;
        queue_from_row(a.rows, i, 0, &q);
        stats_from_row(a.rows, i, 9, &s);
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
    default:
        snprintf(buf, size, "%d", j->max_attempts);
        return buf;
    }
}

struct enqueue {
    const char *queue;
    const struct db_job_in *jobs;
    size_t n;
    struct db_job_ref *out;
    enum db_queue_verdict verdict;
};

static enum db_status enqueue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct enqueue *a = arg;
    struct db_queue q;
    int found;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    struct db_arrays arr = {0, 0, NULL};
    if (db_arrays_build(&arr, a->jobs, a->n, 6, job_column) != 0) {
        db_arrays_free(&arr);
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    char id[24];
    i64(id, sizeof(id), q.id);
    const char *params[] = {id,         arr.arr[0], arr.arr[1], arr.arr[2],
                            arr.arr[3], arr.arr[4], arr.arr[5]};
    PGresult *r = NULL;
    db_tx_commit_with_next(c);
    st = bad_input(db_query(c, &st_enqueue, params, &r, err), err, &a->verdict);
    db_arrays_free(&arr);
    if (st != DB_OK)
        return st;
    for (int i = 0; i < PQntuples(r) && (size_t)i < a->n; i++) {
        a->out[i].id = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        a->out[i].verdict = PQgetvalue(r, i, 2)[0] == 't' ? DB_Q_CREATED : DB_Q_DUPLICATE;
    }
    PQclear(r);
    a->verdict = DB_Q_OK;
    return DB_OK;
}

enum db_status db_jobs_enqueue(struct db_pool *pool, const char *queue,
                               const struct db_job_in *jobs, size_t n, struct db_job_ref *out,
                               enum db_queue_verdict *verdict, struct db_error *err)
{
    struct enqueue a = {queue, jobs, n, out, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, enqueue_tx, &a, err);
    *verdict = a.verdict;
    return finish(st);
}

void db_job_clear(struct db_job *j)
{
    free(j->owner);
    free(j->dedupe_key);
    free(j->payload);
    free(j->progress);
    free(j->result);
    free(j->last_error);
    free(j->history);
    memset(j, 0, sizeof(*j));
}

static void job_from_row(const PGresult *r, int i, struct db_job *j)
{
    memset(j, 0, sizeof(*j));
    j->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
    copy(j->state, sizeof(j->state), PQgetvalue(r, i, 1));
    j->priority = atoi(PQgetvalue(r, i, 2));
    j->attempts = atoi(PQgetvalue(r, i, 3));
    j->max_attempts = atoi(PQgetvalue(r, i, 4));
    j->fence = strtoll(PQgetvalue(r, i, 5), NULL, 10);
    j->owner = dup_or_null(r, i, 6);
    copy(j->lease_expires_at, sizeof(j->lease_expires_at), PQgetvalue(r, i, 7));
    copy(j->run_at, sizeof(j->run_at), PQgetvalue(r, i, 8));
    copy(j->created_at, sizeof(j->created_at), PQgetvalue(r, i, 9));
    copy(j->updated_at, sizeof(j->updated_at), PQgetvalue(r, i, 10));
    copy(j->finished_at, sizeof(j->finished_at), PQgetvalue(r, i, 11));
    j->dedupe_key = dup_or_null(r, i, 12);
    j->payload = dup_or_null(r, i, 13);
    j->progress = dup_or_null(r, i, 14);
    j->result = dup_or_null(r, i, 15);
    j->last_error = dup_or_null(r, i, 16);
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
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[24], qid[24];
    i64(id, sizeof(id), a->id);
    i64(qid, sizeof(qid), q.id);
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
        copy(h->owner, sizeof(h->owner), PQgetvalue(r, (int)i, 2));
        copy(h->claimed_at, sizeof(h->claimed_at), PQgetvalue(r, (int)i, 3));
        copy(h->ended_at, sizeof(h->ended_at), PQgetvalue(r, (int)i, 4));
        copy(h->outcome, sizeof(h->outcome), PQgetvalue(r, (int)i, 5));
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
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char qid[24], after[24], lim[16];
    i64(qid, sizeof(qid), q.id);
    i64(after, sizeof(after), a->after);
    snprintf(lim, sizeof(lim), "%d", a->limit);
    const char *params[] = {qid, after, a->state, lim};
    a->verdict = DB_Q_OK;
    return db_query(c, &st_job_list, params, &a->rows, err);
}

enum db_status db_jobs_list(struct db_pool *pool, const char *queue, const char *state,
                            int64_t after, int limit, db_job_each each, void *ctx,
                            enum db_queue_verdict *verdict, struct db_error *err)
{
    struct list_jobs a = {queue, state, after, limit, NULL, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, list_jobs_tx, &a, err);
    *verdict = a.verdict;
    for (int i = 0; st == DB_OK && i < PQntuples(a.rows); i++) {
        struct db_job j;
        job_from_row(a.rows, i, &j);
        each(&j, ctx);
        db_job_clear(&j);
    }
    PQclear(a.rows);
    return st;
}

/* Runs a statement on one job of a queue ($1 job id, $2 queue id, then extra params). */
struct job_op {
    const char *queue;
    const struct db_stmt *stmt;
    int64_t id;
    const char *extra[4];
    PGresult *rows;
    enum db_queue_verdict verdict;
};

static enum db_status job_op_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct job_op *a = arg;
    struct db_queue q;
    int found;
    PQclear(a->rows);
    a->rows = NULL;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char id[24], qid[24];
    i64(id, sizeof(id), a->id);
    i64(qid, sizeof(qid), q.id);
    const char *params[] = {id, qid, a->extra[0], a->extra[1], a->extra[2], a->extra[3]};
    a->verdict = DB_Q_OK;
    db_tx_commit_with_next(c);
    return bad_input(db_query(c, a->stmt, params, &a->rows, err), err, &a->verdict);
}

static enum db_status job_op_run(struct db_pool *pool, struct job_op *a, struct db_error *err)
{
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, job_op_tx, a, err);
    return finish(st);
}

enum db_status db_jobs_retry(struct db_pool *pool, const char *queue, int64_t id,
                             enum db_queue_verdict *verdict, struct db_error *err)
{
    struct job_op a = {queue, &st_job_retry, id, {NULL}, NULL, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = job_op_run(pool, &a, err);
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
    struct job_op a = {queue, &st_job_cancel, id, {NULL}, NULL, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = job_op_run(pool, &a, err);
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_Q_OK)
        *verdict = PQntuples(a.rows) == 0               ? DB_Q_JOB_NOT_FOUND
                   : PQgetvalue(a.rows, 0, 1)[0] == 't' ? DB_Q_OK
                                                        : DB_Q_JOB_TERMINAL;
    PQclear(a.rows);
    return st;
}

/* ---- leases ---- */

void db_claimed_clear(struct db_claimed *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c[i].payload);
        c[i].payload = NULL;
    }
}

struct claim {
    const char *queue, *owner;
    int max_jobs, lease_seconds;
    struct db_claimed *out;
    size_t n;
    enum db_queue_verdict verdict;
};

static enum db_status claim_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct claim *a = arg;
    struct db_queue q;
    int found;
    db_claimed_clear(a->out, a->n);
    a->n = 0;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    char qid[24], max[16], lease[16];
    i64(qid, sizeof(qid), q.id);
    snprintf(max, sizeof(max), "%d", a->max_jobs);
    snprintf(lease, sizeof(lease), "%d", a->lease_seconds);
    const char *params[] = {qid, a->owner, max, a->lease_seconds > 0 ? lease : NULL};
    PGresult *r = NULL;
    db_tx_commit_with_next(c);
    st = db_query(c, &st_claim, params, &r, err);
    if (st != DB_OK)
        return st;
    for (int i = 0; i < PQntuples(r) && i < a->max_jobs; i++) {
        struct db_claimed *o = &a->out[a->n++];
        o->id = strtoll(PQgetvalue(r, i, 0), NULL, 10);
        o->fence = strtoll(PQgetvalue(r, i, 1), NULL, 10);
        o->attempt = atoi(PQgetvalue(r, i, 2));
        o->priority = atoi(PQgetvalue(r, i, 3));
        o->reclaimed = PQgetvalue(r, i, 4)[0] == 't';
        copy(o->lease_expires_at, sizeof(o->lease_expires_at), PQgetvalue(r, i, 5));
        o->payload = strdup(PQgetvalue(r, i, 6));
    }
    PQclear(r);
    a->verdict = DB_Q_OK;
    return DB_OK;
}

enum db_status db_leases_claim(struct db_pool *pool, const char *queue, const char *owner,
                               int max_jobs, int lease_seconds, struct db_claimed *out, size_t *n,
                               enum db_queue_verdict *verdict, struct db_error *err)
{
    struct claim a = {queue, owner, max_jobs, lease_seconds, out, 0, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, claim_tx, &a, err);
    *verdict = a.verdict;
    *n = st == DB_OK ? a.n : 0;
    if (st != DB_OK)
        db_claimed_clear(out, a.n);
    return st;
}

/* Runs a fenced statement ($1 job, $2 queue, $3 owner, $4 fence, then extra) and classifies
 * the outcome. info (may be NULL, 40 bytes) gets the statement's last column. */
static enum db_status fenced(struct db_pool *pool, const char *queue, const struct db_stmt *stmt,
                             const struct db_lease *l, const char *x1, const char *x2, char *info,
                             enum db_queue_verdict *verdict, struct db_error *err)
{
    char fence[24];
    i64(fence, sizeof(fence), l->fence);
    struct job_op a = {
        queue, stmt, l->job_id, {l->owner, fence, x1, x2}, NULL, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = job_op_run(pool, &a, err);
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_Q_OK) {
        *verdict = lease_verdict(a.rows, 0, 0, l->owner, l->fence);
        if (info != NULL)
            copy(info, 40, PQntuples(a.rows) > 0 ? PQgetvalue(a.rows, 0, 5) : "");
    }
    PQclear(a.rows);
    return st;
}

enum db_status db_leases_heartbeat(struct db_pool *pool, const char *queue,
                                   const struct db_lease *l, int lease_seconds,
                                   const char *progress, char *expires_at,
                                   enum db_queue_verdict *verdict, struct db_error *err)
{
    char lease[16];
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    return fenced(pool, queue, &st_heartbeat, l, lease_seconds > 0 ? lease : NULL, progress,
                  expires_at, verdict, err);
}

enum db_status db_leases_complete(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  const char *result, enum db_queue_verdict *verdict,
                                  struct db_error *err)
{
    return fenced(pool, queue, &st_complete, l, result, NULL, NULL, verdict, err);
}

enum db_status db_leases_fail(struct db_pool *pool, const char *queue, const struct db_lease *l,
                              const char *error, int retry, char *new_state,
                              enum db_queue_verdict *verdict, struct db_error *err)
{
    char state[40];
    enum db_status st = fenced(pool, queue, &st_fail, l, error ? error : "null",
                               retry ? "true" : "false", state, verdict, err);
    if (new_state != NULL)
        copy(new_state, 16, state);
    return st;
}

enum db_status db_leases_handback(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  enum db_queue_verdict *verdict, struct db_error *err)
{
    return fenced(pool, queue, &st_handback, l, NULL, NULL, NULL, verdict, err);
}

enum db_status db_leases_release(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                 char *new_state, enum db_queue_verdict *verdict,
                                 struct db_error *err)
{
    char state[40];
    enum db_status st = fenced(pool, queue, &st_release, l, NULL, NULL, state, verdict, err);
    if (new_state != NULL)
        copy(new_state, 16, state);
    return st;
}

static const char *settlement_column(const void *items, size_t i, size_t col, char *buf,
                                     size_t size)
{
    const struct db_settlement *s = (const struct db_settlement *)items + i;
    switch (col) {
    case 0:
        snprintf(buf, size, "%" PRId64, s->lease.job_id);
        return buf;
    case 1:
        return s->lease.owner;
    case 2:
        snprintf(buf, size, "%" PRId64, s->lease.fence);
        return buf;
    default:
        return s->result;
    }
}

struct settle {
    const char *queue;
    struct db_settlement *items;
    size_t n;
    enum db_queue_verdict verdict;
};

static enum db_status settle_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct settle *a = arg;
    struct db_queue q;
    int found;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    enum db_status st = resolve(c, a->queue, &q, &found, err);
    if (st != DB_OK || !found)
        return st;
    struct db_arrays arr = {0, 0, NULL};
    if (db_arrays_build(&arr, a->items, a->n, 4, settlement_column) != 0) {
        db_arrays_free(&arr);
        db_error_set(err, "", "out of memory");
        return DB_ERR_HARD;
    }
    char qid[24];
    i64(qid, sizeof(qid), q.id);
    const char *params[] = {qid, arr.arr[0], arr.arr[1], arr.arr[2], arr.arr[3]};
    PGresult *r = NULL;
    db_tx_commit_with_next(c);
    st = bad_input(db_query(c, &st_complete_batch, params, &r, err), err, &a->verdict);
    db_arrays_free(&arr);
    if (st != DB_OK)
        return st;
    /* columns 1..5 are state, owner, fence, live, applied: the shape lease_verdict reads */
    for (int i = 0; i < PQntuples(r) && (size_t)i < a->n; i++)
        a->items[i].verdict =
            lease_verdict(r, i, 1, a->items[i].lease.owner, a->items[i].lease.fence);
    PQclear(r);
    a->verdict = DB_Q_OK;
    return DB_OK;
}

enum db_status db_leases_complete_batch(struct db_pool *pool, const char *queue,
                                        struct db_settlement *items, size_t n,
                                        enum db_queue_verdict *verdict, struct db_error *err)
{
    struct settle a = {queue, items, n, DB_Q_QUEUE_NOT_FOUND};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, settle_tx, &a, err);
    *verdict = a.verdict;
    return finish(st);
}

/* ---- janitor and metrics ---- */

struct janitor_queue {
    const char *id, *retention;
    int batch;
    int64_t expired, purged;
};

static enum db_status janitor_queue_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct janitor_queue *a = arg;
    char batch[16];
    snprintf(batch, sizeof(batch), "%d", a->batch);
    const char *p2[] = {a->id, batch};
    const char *p3[] = {a->id, batch, a->retention};
    PGresult *r = NULL;
    a->expired = a->purged = 0;
    enum db_status st = db_query(c, &st_expire, p2, &r, err);
    if (st != DB_OK)
        return st;
    a->expired = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    st = db_query(c, &st_purge, p3, &r, err);
    if (st != DB_OK)
        return st;
    a->purged = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    PQclear(r);
    return DB_OK;
}

enum db_status db_queues_janitor(struct db_pool *pool, int batch, db_queue_janitor_each each,
                                 void *ctx, struct db_error *err)
{
    struct rows_query ids = {&st_queue_ids, NULL, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, rows_tx, &ids, err);
    for (int i = 0; st == DB_OK && i < PQntuples(ids.rows); i++) {
        struct janitor_queue a = {PQgetvalue(ids.rows, i, 0), PQgetvalue(ids.rows, i, 2), batch, 0,
                                  0};
        enum db_status one = db_tx_run(pool, DB_READ_COMMITTED, janitor_queue_tx, &a, err);
        if (one != DB_OK)
            st = one;
        else if (each != NULL)
            each(PQgetvalue(ids.rows, i, 1), a.expired, a.purged, ctx);
    }
    PQclear(ids.rows);
    return st;
}

struct all_stats {
    PGresult *rows, *health;
};

static enum db_status all_stats_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct all_stats *a = arg;
    PQclear(a->rows);
    PQclear(a->health);
    a->rows = a->health = NULL;
    enum db_status st = db_query(c, &st_all_stats, NULL, &a->rows, err);
    if (st == DB_OK)
        st = db_query(c, &st_vacuum_health, NULL, &a->health, err);
    return st;
}

enum db_status db_queues_stats(struct db_pool *pool, db_queue_stats_each each, void *ctx,
                               int64_t *dead_tuples, double *oldest_xact_age_seconds,
                               struct db_error *err)
{
    struct all_stats a = {NULL, NULL};
    enum db_status st = db_tx_run(pool, DB_READ_COMMITTED, all_stats_tx, &a, err);
    *dead_tuples = 0;
    *oldest_xact_age_seconds = 0;
    if (st == DB_OK) {
        for (int i = 0; i < PQntuples(a.rows); i++) {
            struct db_queue_stats s;
            stats_from_row(a.rows, i, 1, &s);
            each(PQgetvalue(a.rows, i, 0), &s, ctx);
        }
        *dead_tuples = strtoll(PQgetvalue(a.health, 0, 0), NULL, 10);
        *oldest_xact_age_seconds = atof(PQgetvalue(a.health, 0, 1));
    }
    PQclear(a.rows);
    PQclear(a.health);
    return st;
}
