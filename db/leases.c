/* The lease protocol of queues (see queues.h): claims, fenced writes (heartbeat, complete, fail,
 * hand-back, release) and batch settlement. The protocol's predicates are named SQL fragments
 * written once in lease_sql.h (LEASE_*) and composed into each statement; SET lists stay explicit
 * per statement. Every fenced write is one statement: lock the job, apply the change where the
 * predicate holds, and return what the row looked like, so the refusal reason is classified in one
 * place (lease_verdict). Queues and jobs themselves are db/queues.c's. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/combine.h"
#include "db/effects.h"
#include "db/hints.h"
#include "db/lease_sql.h"
#include "db/queues_internal.h"
#include "db/tx.h"

/* Delay before retry n (attempts already spent): base * 2^(n-1), at most max (the exponent is
 * capped so that a job with a thousand attempts does not overflow the arithmetic). */
#define BACKOFF                                                                                    \
    "make_interval(secs => least(q.backoff_max_seconds, q.backoff_base_seconds * "                 \
    "power(2, least(greatest(j.attempts - 1, 0), 60))))"

/* What a claim reads of a candidate row as it was, for the attempt it supersedes. */
#define CLAIM_WAS                                                                                  \
    "j.id, j.ctid AS was_tid, j.state AS was, j.fence AS was_fence, j.attempt_no, "                \
    "j.attempt_owner, j.attempt_claimed_at, j.attempt_ended_at, j.attempt_outcome"
/* The claim's update returns the claimed row and carries what it superseded (cand, CLAIM_WAS)
 * and the payload's text, read once by CLAIM_FIT. */
#define CLAIM_RETURNING                                                                            \
    "j.id, j.fence, j.attempts, j.priority, j.lease_expires_at, cand.was, cand.was_fence, "        \
    "cand.attempt_no, cand.attempt_owner, cand.attempt_claimed_at, cand.attempt_ended_at, "        \
    "cand.attempt_outcome, cand.fit_payload, j.concurrency_key"
/* The superseded attempt moves to the history (as lease_expired when it never ended). */
#define CLAIM_SUPERSEDED                                                                           \
    "superseded AS (INSERT INTO rowlock.job_attempts (job_id, fence, attempt, owner, claimed_at, " \
    "  ended_at, outcome) SELECT id, was_fence, attempt_no, attempt_owner, attempt_claimed_at, "   \
    "  coalesce(attempt_ended_at, now()), coalesce(attempt_outcome, 'lease_expired') FROM w "      \
    "  WHERE was_fence > 0)"
/* What a claim answers a row (after the claim's index): id, fence, attempt, priority,
 * reclaimed, lease expiry, payload, and the lease's length in seconds (its expiry less now(),
 * the transaction's time the claim set it from, whichever lease the claim asked for). */
/* clang-format off */
#define CLAIMED_FROM(t) \
    "w.id, w.fence, w.attempts, w.priority, w.was = 'processing', " \
    DB_TS("w.lease_expires_at") ", w.fit_payload, " \
    "round(extract(epoch FROM w.lease_expires_at - " t "))::int, w.concurrency_key"
#define CLAIMED CLAIMED_FROM("now()")
/* A row of a claim's answer that is no lease: k (its first column) says what it is. */
#define CLAIM_NOTE(k, a, b, c, text) \
    "SELECT " k ", (" a ")::bigint, (" b ")::bigint, (" c ")::int, NULL::int, NULL::bool, " \
    "NULL::text, (" text ")::text, NULL::int, NULL::text"
/* clang-format on */
/* A claim's answer in order: the notes first (k below 1), then each claimer's leases (k), each
 * claimer's by priority then id. */
#define CLAIM_ANSWER_ORDER "ORDER BY 1, 5 DESC, 2"

/* A claim's answer carries each job's payload: of the rows locked (rows, in claim order within
 * each partition, one per claim), cand keeps those whose payloads' JSON text fits in budget
 * bytes, the first always (a payload larger than the budget is claimed alone). The rest are
 * left as they were: still claimable, by this claimer's next claim or anyone's. One window over
 * at most max_jobs locked rows; budget NULL keeps them all. Each payload is read and turned into
 * text once, here (fit_payload), and handed on to the answer. */
#define CLAIM_FIT(rows, partition, order, budget)                                                  \
    "cand AS (SELECT * FROM (SELECT " rows ".*, sum(octet_length(" rows ".fit_payload)) OVER fit " \
    "AS fit_bytes, row_number() OVER fit AS fit_k FROM (SELECT " rows ".*, " budget "::bigint AS " \
    "fit_budget, (SELECT b.payload::text FROM rowlock.job_bodies b WHERE b.job_id = " rows ".id) " \
    "AS fit_payload FROM " rows " OFFSET 0) " rows " WINDOW fit AS (" partition " ORDER BY " order \
    ")) s "                                                                                        \
    "WHERE s.fit_k = 1 OR s.fit_budget IS NULL OR s.fit_bytes <= s.fit_budget)"

/* The rows a claim locks (cols of rowlock.jobs j, including priority, claimable_at and id), at
 * most lim, in claim order (priority, due time, id): the claimable rows of queue $1 that nobody
 * holds, from two branches, each locked as it is read (FOR UPDATE SKIP LOCKED) and in claim
 * order by its own index: the due pending jobs (jobs_pending) and the expired leases that
 * takeable admits (jobs_leased, a range of lease expiry: only the queue's leases, sorted). The
 * branches are merged in claim order and cut at lim (when both found rows, those past the cut
 * stay locked until the claim commits, unclaimed: other claims skip them meanwhile, as they skip
 * any row a claim holds). PostgreSQL allows no FOR UPDATE in a branch of a UNION itself, so
 * each branch is a subquery of its own. One index over both states (jobs_claim, before
 * migration 17) took an entry at every claim, and listing or counting a queue's leases read
 * them among its whole backlog. */
/* A claim's queue: its row when it hands out jobs (QUEUE_RUNNING), none while it is paused.
 * Each branch of CLAIM_LOCK reads nothing without it (a one-time filter: no job is looked at,
 * none locked). */
/* A queue with a limit (QUEUE_LIMITED) is claimed from only by the limited claim below, in a
 * transaction that locked its row first: a claim that finds it limited locks and takes nothing,
 * and answers a note (CLAIM_NOTE, k -1) that sends its claimers there. */
#define CLAIM_QUEUE                                                                                \
    "q AS MATERIALIZED (SELECT lq.id, lq.lease_seconds, " QUEUE_LIMITED(                           \
        "lq.") " AS limited "                                                                      \
               "FROM rowlock.queues lq WHERE lq.id = $1 AND " QUEUE_RUNNING("lq.") ")"
#define CLAIM_UNLIMITED "EXISTS (SELECT FROM q WHERE NOT q.limited)"
#define CLAIM_LIMITED_NOTE                                                                         \
    CLAIM_NOTE("-1", "NULL", "NULL", "NULL", "NULL") " FROM q WHERE q.limited"
/* A claim's order over rows r (an alias and a dot, or ""): priority, due time, id. */
#define CLAIM_ORDER(r) r "priority DESC, " r "claimable_at, " r "id"
/* clang-format off */
#define CLAIM_LOCK(cols, takeable, lim, gate) \
    "SELECT * FROM (SELECT * FROM (SELECT " cols " FROM rowlock.jobs j WHERE j.queue_id = $1 AND " \
    gate " AND " LEASE_PENDING " ORDER BY " CLAIM_ORDER("j.") " LIMIT " lim " FOR UPDATE OF j " \
    "SKIP LOCKED) p UNION ALL SELECT * FROM (SELECT " cols " FROM rowlock.jobs j WHERE " \
    "j.queue_id = $1 AND " gate " AND " LEASE_EXPIRED " AND (" takeable ") ORDER BY " CLAIM_ORDER("j.") \
    " LIMIT " lim " FOR UPDATE OF j SKIP LOCKED) e) u ORDER BY " CLAIM_ORDER("u.") " LIMIT " lim
/* clang-format on */

/* Statements that join a few rows to rowlock.jobs also name them as an array: the claims their
 * candidates' tuple ids ("j.ctid = ANY (...)", a TID scan: the candidates are locked by FOR UPDATE
 * SKIP LOCKED, so their tuples stay where they were read until the update), others their ids
 * ("j.id = ANY (...)", an index condition on the primary key). Without it the planner,
 * costing random reads as from disk, prefers to hash-join against a sequential scan of the whole
 * table up to tens of thousands of rows (as a generic plan guesses a claim's LIMIT at a tenth of
 * the backlog), and a claim then costs in proportion to every job the table retains. For the same
 * reason CLAIM_FIT reads each payload by a lookup of its own (a subquery on job_bodies' primary
 * key): a join there became a sequential scan of job_bodies in the generic plan, whose cost grows
 * with every job the table holds.
 *
 * Claim: one statement. $1 queue id, $2 owner, $3 max jobs, $4 lease seconds (NULL: queue's),
 * $5 payload byte budget (NULL: none). A re-claim by the same owner of its own expired lease
 * keeps the attempt; any other claim spends one. Every claim bumps the fence and opens the
 * job's latest attempt on its row; the attempt it supersedes (if any) moves to
 * rowlock.job_attempts, as lease_expired when its lease ran out unsettled. */
/* clang-format off */
static const struct db_stmt st_claim = {
    "leases_claim",
    "WITH " CLAIM_QUEUE ", "
    "locked AS (" CLAIM_LOCK(CLAIM_WAS ", j.priority, j.claimable_at, "
    LEASE_NEXT_ATTEMPT("j", "$2") " AS next_attempt", LEASE_TAKEABLE_BY("$2"), "$3",
    CLAIM_UNLIMITED) "), "
    CLAIM_FIT("locked", "", CLAIM_ORDER("locked."), "$5") ", "
    "w AS (UPDATE rowlock.jobs j SET attempts = cand.next_attempt, "
    "  fence = j.fence + 1, state = 'processing', owner = $2, "
    "  lease_expires_at = now() + make_interval(secs => coalesce($4::float8, q.lease_seconds)), "
    "  claimable_at = now() + make_interval(secs => coalesce($4::float8, q.lease_seconds)), "
    "  updated_at = now(), attempt_no = cand.next_attempt, attempt_owner = $2, "
    "  attempt_claimed_at = now(), attempt_ended_at = NULL, attempt_outcome = NULL "
    "  FROM cand, q WHERE j.ctid = cand.was_tid AND j.ctid = ANY (ARRAY(SELECT was_tid FROM cand)) "
    "  RETURNING " CLAIM_RETURNING "), " CLAIM_SUPERSEDED " "
    "SELECT 1, " CLAIMED " FROM w UNION ALL " CLAIM_LIMITED_NOTE " " CLAIM_ANSWER_ORDER,
    5};
/* clang-format on */

/* Claims for several owners at once: what st_claim does, in one statement for concurrent
 * claims combined (db/combine.h). $1 queue id, $2 owners, $3 max jobs, $4 lease seconds (NULL:
 * queue's), $6 payload byte budgets (NULL: none), one element a claim, $5 the sum of $3. The
 * rows locked, in claim order, are dealt to the claims in turn, each its max, and each claim
 * keeps what fits its budget. Only rows any claimer may take are candidates: an expired lease
 * without attempts left, which only its own owner may re-claim, is left to a claim that runs
 * alone or to the janitor (as if that owner's claim came a moment later). */
/* The claims of a combined claim ($2 owners, $3 max jobs, $4 leases, $6 budgets): each one's
 * share (lo, hi] of the rows in claim order. */
#define CLAIM_CLAIMERS                                                                             \
    "claims AS (SELECT c.owner, c.lease, c.budget, c.i, "                                          \
    "  sum(c.max_jobs) OVER (ORDER BY c.i) AS hi, "                                                \
    "  sum(c.max_jobs) OVER (ORDER BY c.i) - c.max_jobs AS lo "                                    \
    "  FROM unnest($2::text[], $3::int[], $4::float8[], $6::bigint[]) WITH ORDINALITY "            \
    "  AS c(owner, max_jobs, lease, budget, i))"
/* Rows (SQL of a query, each row with its rank k in claim order) dealt to the claims in turn, each
 * its max, then each claim's share cut to what fits its budget (cand). */
#define CLAIM_DEAL(rows)                                                                           \
    "dealt AS (SELECT n.*, claims.owner AS claimer, claims.lease, claims.budget, claims.i "        \
    "  FROM (" rows ") n JOIN claims ON n.k > claims.lo AND n.k <= claims.hi), "                   \
    "offered AS (SELECT dealt.*, " LEASE_NEXT_ATTEMPT(                                             \
        "dealt", "dealt.claimer") " AS "                                                           \
                                  "  next_attempt FROM dealt), " CLAIM_FIT(                        \
                                      "offered", "PARTITION BY offered.i", "offered.k",            \
                                      "offered.budget")
/* The update of a combined claim's rows (cand), its leases from time t (from: more of the FROM
 * list), returning CLAIM_RETURNING and the claim's number; then the history it supersedes. */
#define CLAIM_TAKE(t, from)                                                                        \
    "w AS (UPDATE rowlock.jobs j SET attempts = cand.next_attempt, "                               \
    "  fence = j.fence + 1, state = 'processing', owner = cand.claimer, "                          \
    "  lease_expires_at = " t " + make_interval(secs => coalesce(cand.lease, q.lease_seconds)), "  \
    "  claimable_at = " t " + make_interval(secs => coalesce(cand.lease, q.lease_seconds)), "      \
    "  updated_at = now(), attempt_no = cand.next_attempt, attempt_owner = cand.claimer, "         \
    "  attempt_claimed_at = " t ", attempt_ended_at = NULL, attempt_outcome = NULL "               \
    "  FROM cand, q" from " WHERE j.ctid = cand.was_tid "                                          \
    "  AND j.ctid = ANY (ARRAY(SELECT was_tid FROM cand)) "                                        \
    "  RETURNING " CLAIM_RETURNING ", cand.i), " CLAIM_SUPERSEDED
/* What a combined claim locks of each row. */
#define CLAIM_MANY_COLS CLAIM_WAS ", j.state, j.owner, j.attempts, j.priority, j.claimable_at"

/* Claims for several owners at once: what st_claim does, in one statement for concurrent
 * claims combined (db/combine.h). $1 queue id, $2 owners, $3 max jobs, $4 lease seconds (NULL:
 * queue's), $6 payload byte budgets (NULL: none), one element a claim, $5 the sum of $3. The
 * rows locked, in claim order, are dealt to the claims in turn, each its max, and each claim
 * keeps what fits its budget. Only rows any claimer may take are candidates: an expired lease
 * without attempts left, which only its own owner may re-claim, is left to a claim that runs
 * alone or to the janitor (as if that owner's claim came a moment later). */
/* clang-format off */
static const struct db_stmt st_claim_many = {
    "leases_claim_many",
    "WITH " CLAIM_QUEUE ", " CLAIM_CLAIMERS ", "
    "locked AS (" CLAIM_LOCK(CLAIM_MANY_COLS, LEASE_TAKEABLE, "$5", CLAIM_UNLIMITED) "), "
    CLAIM_DEAL("SELECT locked.*, row_number() OVER (ORDER BY " CLAIM_ORDER("") ") AS k "
    "FROM locked") ", "
    CLAIM_TAKE("now()", "") " "
    "SELECT w.i, " CLAIMED " FROM w UNION ALL " CLAIM_LIMITED_NOTE " " CLAIM_ANSWER_ORDER,
    6};
/* clang-format on */

/* ---- the limited claim ----
 *
 * A queue with a limit (QUEUE_LIMITED: concurrency or rate, the queue's or its keys') is
 * claimed from by one transaction at a time: it locks the queue's row (st_queue_lock, FOR NO
 * KEY UPDATE: enqueues, which lock it FOR KEY SHARE, go on), then claims with st_claim_limited
 * in statements of their own, whose snapshots see every lease the claims before committed. So
 * what it counts is exact:
 *   - A lease holds its slot while it is live (its expiry ahead of the claim's now()). An expired
 *     one frees it once this claim has locked and written its row (expired, touched: SKIP
 *     LOCKED, so that a lease a write holds now still counts), as a fenced write judges liveness
 *     on the clock when it runs (LEASE_LIVE_NOW) and, finding the row written by the claim
 *     after it found it live, judges it again. Only a queue with a concurrency limit frees
 *     them so, and at most CLAIM_EXPIRED_MAX a round (one past it counts as held: the safe
 *     side).
 *   - A rate is a token bucket (rowlock.queue_limiter: key '' the queue's, else a key's) of
 *     rate_burst tokens, refilled rate_limit per rate_period_seconds, at clk: the clock as the
 *     statement runs, after the lock, so that the buckets' times only move on. Each job a claim
 *     hands out takes a token; its lease runs from clk, and clk is its attempt's claimed_at.
 * Of the rows locked (at most $5, and CLAIM_LIMITED_PAST more past keys found full, in claim
 * order), those of keys
 * already found full ($7) left out, each key keeps what its room allows (the least of its free
 * slots and whole tokens), then the queue's room cuts the rest in claim order; what is left is
 * dealt as in st_claim_many (at most $5). A first note (k 0) says how many due rows a key's
 * limit held back, how many the queue's (the counters count only the first $5 rows: those past
 * them were no claimer's to take), whether the queue still has a limit, and the keys held back so
 * far ($7 and this statement's, an array's text), so that the claim can go on past those keys,
 * in a transaction of its own, while its claimers want more. */
/* clang-format off */
#define LIMIT_TOKENS(b, rl, rp, rb) \
    "least(" rb ", coalesce(" b ".tokens + " rl "::float8 / " rp " * " \
    "greatest(0, extract(epoch FROM clk.t - " b ".refilled_at)), " rb "))"
/* A room: the least of free slots and whole tokens (NULL: no limit). */
#define LIMIT_ROOM(r) "least(" r ".cfree, floor(" r ".tokens))"
/* Rows a round of the limited claim after the first (one that goes past keys found full) locks
 * beyond what its claimers want, so that more jobs of keys full too do not fill its whole view: a
 * free key's job behind a hundred full keys' jobs is still found. Those not dealt stay locked
 * until the round commits, as limited claims run one at a time anyway. The first round locks no
 * more than wanted: when no key is full (the common case) a round costs what it hands out. */
#define CLAIM_LIMITED_PAST "100"
/* Expired leases a round locks and counts as free (the first in expiry order): past it they
 * count as held until a later round, so that a backlog of them never makes a claim slow. */
#define CLAIM_EXPIRED_MAX "1000"
static const struct db_stmt st_claim_limited = {
    "leases_claim_limited",
    "WITH q AS MATERIALIZED (SELECT lq.id, lq.lease_seconds, lq.concurrency_limit AS cl, "
    "  lq.key_concurrency_limit AS kcl, lq.rate_limit AS rl, lq.rate_period_seconds AS rp, "
    "  coalesce(lq.rate_burst, lq.rate_limit) AS rb, lq.key_rate_limit AS krl, "
    "  lq.key_rate_period_seconds AS krp, coalesce(lq.key_rate_burst, lq.key_rate_limit) AS krb "
    "  FROM rowlock.queues lq WHERE lq.id = $1 AND " QUEUE_RUNNING("lq.") "), "
    "clk AS MATERIALIZED (SELECT clock_timestamp() AS t), " CLAIM_CLAIMERS ", "
    "locked AS (SELECT x.*, row_number() OVER (ORDER BY " CLAIM_ORDER("x.") ") AS lk FROM ("
    CLAIM_LOCK(CLAIM_MANY_COLS ", j.concurrency_key", LEASE_TAKEABLE,
    "$5 + CASE WHEN cardinality($7::text[]) > 0 THEN " CLAIM_LIMITED_PAST " ELSE 0 END",
    "EXISTS (SELECT FROM q) AND (j.concurrency_key IS NULL OR "
    "j.concurrency_key <> ALL ($7::text[]))") ") x), "
    "expired AS (SELECT j.ctid AS tid, j.id, j.concurrency_key FROM rowlock.jobs j "
    "  WHERE j.queue_id = $1 AND EXISTS (SELECT FROM q WHERE q.cl IS NOT NULL "
    "  OR q.kcl IS NOT NULL OR EXISTS (SELECT FROM rowlock.queue_keys o WHERE o.queue_id = $1 "
    "  AND o.concurrency_limit IS NOT NULL)) AND " LEASE_EXPIRED " "
    "  ORDER BY j.claimable_at LIMIT " CLAIM_EXPIRED_MAX " FOR NO KEY UPDATE OF j SKIP LOCKED), "
    "keys AS (SELECT DISTINCT l.concurrency_key AS key FROM locked l "
    "  WHERE l.concurrency_key IS NOT NULL), "

    "klim AS (SELECT k.key, coalesce(o.concurrency_limit, q.kcl) AS cl, "
    "  CASE WHEN o.rate_limit IS NOT NULL THEN o.rate_limit ELSE q.krl END AS rl, "
    "  CASE WHEN o.rate_limit IS NOT NULL THEN o.rate_period_seconds ELSE q.krp END AS rp, "
    "  CASE WHEN o.rate_limit IS NOT NULL THEN coalesce(o.rate_burst, o.rate_limit) "
    "  ELSE q.krb END AS rb "
    "  FROM keys k CROSS JOIN q LEFT JOIN rowlock.queue_keys o ON o.queue_id = $1 "
    "  AND o.key = k.key), "
    "kroom AS (SELECT kl.key, CASE WHEN kl.cl IS NOT NULL THEN kl.cl - "
    "  (SELECT count(*) FROM rowlock.jobs j WHERE j.queue_id = $1 AND " JOBS_LEASED " "
    "  AND j.concurrency_key = kl.key) + coalesce(ex.n, 0) END AS cfree, "
    "  CASE WHEN kl.rl IS NOT NULL THEN " LIMIT_TOKENS("b", "kl.rl", "kl.rp", "kl.rb") " END "
    "  AS tokens FROM klim kl CROSS JOIN clk LEFT JOIN rowlock.queue_limiter b "
    "  ON b.queue_id = $1 AND b.key = kl.key "
    "  LEFT JOIN (SELECT e.concurrency_key, count(*) AS n FROM expired e GROUP BY 1) ex "
    "  ON ex.concurrency_key = kl.key), "
    "qroom AS (SELECT CASE WHEN q.cl IS NOT NULL THEN q.cl - "
    "  (SELECT count(*) FROM rowlock.jobs j WHERE j.queue_id = $1 AND " JOBS_LEASED ") + "
    "  (SELECT count(*) FROM expired) END AS cfree, "
    "  CASE WHEN q.rl IS NOT NULL THEN " LIMIT_TOKENS("b", "q.rl", "q.rp", "q.rb") " END "
    "  AS tokens FROM q CROSS JOIN clk LEFT JOIN rowlock.queue_limiter b "
    "  ON b.queue_id = $1 AND b.key = ''), "
    "kmap AS (SELECT coalesce(jsonb_object_agg(kr.key, jsonb_build_object('c', kr.cfree, "
    "  't', floor(kr.tokens))), '{}') AS m FROM kroom kr), "
    "keyfit AS (SELECT r.*, r.concurrency_key IS NULL OR r.kr <= coalesce(least("
    "  (r.room->>'c')::bigint, (r.room->>'t')::float8), r.kr) AS key_ok, "
    "  r.kr > coalesce((r.room->>'c')::bigint, r.kr) AS by_slots FROM (SELECT l.*, "
    "  row_number() OVER (PARTITION BY l.concurrency_key ORDER BY " CLAIM_ORDER("l.") ") AS kr, "
    "  (SELECT m FROM kmap) -> l.concurrency_key AS room FROM locked l) r), "
    "fitted AS (SELECT f.*, row_number() OVER (ORDER BY " CLAIM_ORDER("f.") ") AS k "
    "  FROM keyfit f WHERE f.key_ok), "
    "qcut AS (SELECT count(*) FILTER (WHERE f.k > coalesce(" LIMIT_ROOM("qr") ", f.k) "
    "  AND f.k <= $5) AS n "
    "  FROM fitted f, qroom qr), "
    CLAIM_DEAL("SELECT f.* FROM fitted f, qroom qr WHERE f.k <= coalesce(" LIMIT_ROOM("qr")
    ", f.k)") ", "
    CLAIM_TAKE("clk.t", ", clk") ", "
    "touched AS (UPDATE rowlock.jobs j SET claimable_at = j.claimable_at FROM expired e "
    "  WHERE j.ctid = e.tid AND j.ctid = ANY (ARRAY(SELECT tid FROM expired)) "
    "  AND NOT EXISTS (SELECT FROM cand WHERE cand.id = e.id)), "
    "charged AS (SELECT w.concurrency_key AS key, count(*) AS n FROM w "
    "  WHERE w.concurrency_key IS NOT NULL GROUP BY w.concurrency_key), "
    "tally AS (SELECT count(*) FILTER (WHERE NOT f.key_ok AND f.by_slots AND f.lk <= $5) "
    "  AS hkc, count(*) FILTER (WHERE NOT f.key_ok AND NOT f.by_slots AND f.lk <= $5) AS hkr, "
    "  (SELECT CASE WHEN qr.tokens IS NULL OR qr.cfree <= floor(qr.tokens) THEN qcut.n ELSE 0 "
    "  END FROM qroom qr, qcut) AS hc, (SELECT CASE WHEN qr.tokens IS NULL OR qr.cfree <= "
    "  floor(qr.tokens) THEN 0 ELSE qcut.n END FROM qroom qr, qcut) AS hr, "
    "  (SELECT qr.tokens - (SELECT count(*) FROM w) FROM qroom qr) AS qtokens FROM keyfit f), "
    "buckets AS (INSERT INTO rowlock.queue_limiter AS b (queue_id, key, tokens, refilled_at, "
    "  held_concurrency, held_key_concurrency, held_rate, held_key_rate) "
    "  SELECT $1, '', coalesce(t.qtokens, 'Infinity'), clk.t, t.hc, t.hkc, t.hr, t.hkr "
    "  FROM tally t, clk "
    "  WHERE t.qtokens IS NOT NULL OR t.hc + t.hkc + t.hr + t.hkr > 0 "
    "  UNION ALL SELECT $1, kr.key, kr.tokens - c.n, clk.t, 0, 0, 0, 0 "
    "  FROM kroom kr JOIN charged c ON c.key = kr.key, clk WHERE kr.tokens IS NOT NULL "
    "  ON CONFLICT (queue_id, key) DO UPDATE SET tokens = EXCLUDED.tokens, "
    "  refilled_at = EXCLUDED.refilled_at, "
    "  held_concurrency = b.held_concurrency + EXCLUDED.held_concurrency, "
    "  held_key_concurrency = b.held_key_concurrency + EXCLUDED.held_key_concurrency, "
    "  held_rate = b.held_rate + EXCLUDED.held_rate, "
    "  held_key_rate = b.held_key_rate + EXCLUDED.held_key_rate) "
    "SELECT w.i, " CLAIMED_FROM("clk.t") " FROM w, clk UNION ALL "
    CLAIM_NOTE("0", "(SELECT count(*) FROM keyfit WHERE NOT key_ok)", "(SELECT n FROM qcut)",
    "(SELECT " QUEUE_LIMITED("lq.") "::int FROM rowlock.queues lq WHERE lq.id = $1)",
    "(SELECT coalesce(array_agg(DISTINCT f.concurrency_key), '{}') FROM keyfit f "
    "WHERE NOT f.key_ok) || $7::text[]") " "
    CLAIM_ANSWER_ORDER,
    7};
/* clang-format on */
/* The limited claim's first statement: the queue's row, locked. */
static const struct db_stmt st_queue_lock = {
    "leases_queue_lock", "SELECT 1 FROM rowlock.queues WHERE id = $1 FOR NO KEY UPDATE", 1};

/* Fenced writes: $1 job id, $2 queue id, $3 owner, $4 fence, then their own. */
/* clang-format off */
static const struct db_stmt st_heartbeat = {
    "lease_heartbeat",
    "WITH q AS (SELECT lease_seconds FROM rowlock.queues WHERE id = $2), "
    "w AS (UPDATE rowlock.jobs j SET "
    "  lease_expires_at = now() + make_interval(secs => coalesce($5::float8, q.lease_seconds)), "
    "  claimable_at = now() + make_interval(secs => coalesce($5::float8, q.lease_seconds)), "
    "  updated_at = now() FROM q WHERE " LEASE_JOB " AND " LEASE_LIVE " "
    "  RETURNING j.id, j.lease_expires_at), "
    "b AS (UPDATE rowlock.job_bodies b SET progress = coalesce($6::jsonb, b.progress) FROM w "
    "  WHERE b.job_id = w.id), " LEASE_REFUSED " "
    LEASE_RESULT("coalesce(" DB_TS("w.lease_expires_at") ", '')"),
    6};
/* What a settlement knows of its queue (qid: SQL of its id): whether it keeps succeeded and
 * failed jobs, each. */
#define SETTLE_QUEUE_OF(qid)                                                                       \
    "q AS (SELECT q.*, " QUEUE_RETENTION("q.", "succeeded") " = 0 AS drop_succeeded, "             \
    QUEUE_RETENTION("q.", "failed") " = 0 AS drop_failed FROM rowlock.queues q WHERE q.id = " qid ")"
#define SETTLE_QUEUE SETTLE_QUEUE_OF("$2")
/* Whether the queue keeps no job ending in state, as a subquery of nothing but q: the planner
 * makes it a one-time filter, evaluated once before the rows under it are looked at, so that a
 * batch settlement of a queue that keeps its jobs looks none up to delete, and one of a queue
 * that deletes them none up to update (as a join filter on q it looked every item up twice). */
#define SETTLE_DROPS(state) "(SELECT q.drop_" state " FROM q)"
/* The other half of a settlement that can end the job in a state its queue keeps none of (when:
 * SQL of that case, final: the state): the job deleted (gone, with what goes with it, JOBS_GONE)
 * instead of updated (w), then the refusal, judged after whichever of the two applied. */
#define SETTLE_GONE(when, final) SETTLE_GONE_FIRST(when, final) ", " SETTLE_JUDGED
/* Its halves: the delete (before the update, when the update reads what it deleted), and the
 * refusal judged after whichever applied. */
#define SETTLE_GONE_FIRST(when, final)                                                             \
    "gone AS (DELETE FROM rowlock.jobs j USING q WHERE " LEASE_JOB " AND " when                    \
    " RETURNING " JOBS_GONE_RETURNING(final) "), " JOBS_GONE("gone")
#define SETTLE_JUDGED LEASE_DONE ", " LEASE_REFUSED_AFTER("done") " "
/* A settlement's result row (LEASE_RESULT_OF) after SETTLE_GONE; extra as in LEASE_RESULT. */
#define SETTLE_RESULT(extra) LEASE_RESULT_OF("done", extra, "EXISTS (SELECT FROM gone)")
/* The state a settlement left its job in, or ended it in when it deleted it. */
#define SETTLE_STATE "coalesce((SELECT state FROM w), (SELECT final FROM gone), '')"
/* The children of the jobs a completion made succeed (w, from its RETURNING: each job's id and
 * children as the row's latest version, locked) settled by rowlock.deps_settle_edges (migration
 * 22), once a statement, in statements of its own whose snapshots see a child linked while the
 * completion waited for its parent's row. A completion of jobs without children calls nothing
 * (no edge, no row). A SELECT CTE runs only when read: DEPS_RELEASED reads it, the number of
 * jobs released. */
#define DEPS_RELEASE                                                                               \
    "deps AS (SELECT rowlock.deps_settle_edges(array_agg(w.id), array_agg(k.id), true) AS n "      \
    "  FROM w, unnest(w.children) k(id) HAVING count(*) > 0)"
#define DEPS_RELEASED "coalesce((SELECT n FROM deps), 0)::text"
static const struct db_stmt st_complete = {
    "lease_complete",
    "WITH " SETTLE_QUEUE ", "
    SETTLE_GONE_FIRST(LEASE_LIVE " AND " SETTLE_DROPS("succeeded") " AND " JOB_CHILDLESS,
    "'succeeded'") ", "
    "w AS (UPDATE rowlock.jobs j SET state = 'succeeded', owner = NULL, "
    "  lease_expires_at = NULL, claimable_at = NULL, finished_at = now(), updated_at = now(), "
    ATTEMPT_END("completed") " WHERE " LEASE_JOB " AND " LEASE_LIVE " "
    "  AND (NOT " SETTLE_DROPS("succeeded") " OR $1 NOT IN (SELECT id FROM gone)) "
    "  RETURNING j.id, j.children), "
    "b AS (UPDATE rowlock.job_bodies b SET result = $5::jsonb FROM w "
    "  WHERE b.job_id = w.id AND $5::jsonb IS NOT NULL), " DEPS_RELEASE ", " SETTLE_JUDGED
    SETTLE_RESULT(DEPS_RELEASED),
    5};
/* A failure is final when it asks for no retry or the job has no attempt left ($6: retry). */
#define FAIL_FINAL "NOT ($6 AND j.attempts < j.max_attempts)"
static const struct db_stmt st_fail = {
    "lease_fail",
    "WITH " SETTLE_QUEUE ", "
    "w AS (UPDATE rowlock.jobs j SET "
    "  state = CASE WHEN $6 AND j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END, "
    "  owner = NULL, lease_expires_at = NULL, "
    "  run_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN now() + " BACKOFF
    "    ELSE j.run_at END, "
    "  claimable_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN now() + " BACKOFF
    "    ELSE NULL END, "
    "  finished_at = CASE WHEN $6 AND j.attempts < j.max_attempts THEN NULL ELSE now() END, "
    "  updated_at = now(), " ATTEMPT_END("failed") " FROM q "
    "  WHERE " LEASE_JOB " AND " LEASE_LIVE " AND NOT (" FAIL_FINAL " AND q.drop_failed AND "
    JOB_CHILDLESS ") "
    "  RETURNING j.id, j.state), "
    "b AS (UPDATE rowlock.job_bodies b SET last_error = $5::jsonb FROM w "
    "  WHERE b.job_id = w.id), "
    SETTLE_GONE(LEASE_LIVE " AND " FAIL_FINAL " AND q.drop_failed AND " JOB_CHILDLESS, "'failed'")
    SETTLE_RESULT(SETTLE_STATE),
    6};
static const struct db_stmt st_handback = {
    "lease_handback",
    "WITH w AS (UPDATE rowlock.jobs j SET state = 'pending', owner = NULL, "
    "  lease_expires_at = NULL, attempts = j.attempts - 1, run_at = now(), claimable_at = now(), "
    "  updated_at = now(), " ATTEMPT_END("handed_back") " "
    "  WHERE " LEASE_JOB " AND " LEASE_OWNED " RETURNING j.id), " LEASE_REFUSED " "
    LEASE_RESULT("''"),
    4};
/* A release is final when the job has no attempt left. */
#define RELEASE_FINAL "j.attempts >= j.max_attempts"
static const struct db_stmt st_release = {
    "lease_release",
    "WITH " SETTLE_QUEUE ", "
    "w AS (UPDATE rowlock.jobs j SET "
    "  state = CASE WHEN j.attempts < j.max_attempts THEN 'pending' ELSE 'failed' END, "
    "  owner = NULL, lease_expires_at = NULL, run_at = now(), "
    "  claimable_at = CASE WHEN j.attempts < j.max_attempts THEN now() ELSE NULL END, "
    "  finished_at = CASE WHEN j.attempts < j.max_attempts THEN NULL ELSE now() END, "
    "  updated_at = now(), " ATTEMPT_END("released") " FROM q "
    "  WHERE " LEASE_JOB " AND " LEASE_OWNED " AND NOT (" RELEASE_FINAL " AND q.drop_failed AND "
    JOB_CHILDLESS ") "
    "  RETURNING j.id, j.state), "
    SETTLE_GONE(LEASE_OWNED " AND " RELEASE_FINAL " AND q.drop_failed AND " JOB_CHILDLESS,
    "'failed'")
    SETTLE_RESULT(SETTLE_STATE),
    4};

/* Batch completion: $1 queue id, $2 ids, $3 owners, $4 fences, $5 results. As in the single
 * fenced writes (LEASE_REFUSED), the update takes each live lease's row lock itself, and only the
 * refused items are then locked, in id order, and read as they are now (refused, made to run
 * after w by reading it): their verdicts are judged on that. The update finds each item's row by
 * its primary key, the items in id order, so that concurrent settlements lock in one order (a
 * deadlock, were the plan to change, is run again by db/tx.c). Its queue check is written
 * IS NOT DISTINCT FROM (queue_id is never NULL) so that it is no index condition: as
 * "queue_id = $1" beside "state = 'processing'" the planner chose jobs_listing's range of every
 * processing job of the queue, fresh statistics calling it small, and compared each with every
 * item, a cost that grows with the queue's processing jobs times the batch. */
static const struct db_stmt st_complete_batch = {
    "lease_complete_batch",
    "WITH " SETTLE_QUEUE_OF("$1") ", "
    "items AS (SELECT * FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[]) "
    "  WITH ORDINALITY AS x(id, owner, fence, result, i) ORDER BY id), "
    "gone AS (DELETE FROM rowlock.jobs j USING items WHERE j.id = items.id "
    "  AND j.queue_id IS NOT DISTINCT FROM $1 AND " LEASE_LIVE_BY("items.owner", "items.fence")
    "  AND " SETTLE_DROPS("succeeded") " AND " JOB_CHILDLESS " "
    "  RETURNING " JOBS_GONE_RETURNING("'succeeded'") "), " JOBS_GONE("gone") ", "
    "w AS (UPDATE rowlock.jobs j SET state = 'succeeded', owner = NULL, lease_expires_at = NULL, "
    "  claimable_at = NULL, finished_at = now(), updated_at = now(), " ATTEMPT_END("completed")
    "  FROM items WHERE j.id = items.id AND j.queue_id IS NOT DISTINCT FROM $1 "
    "  AND " LEASE_LIVE_BY("items.owner", "items.fence") " AND (NOT " SETTLE_DROPS("succeeded")
    "  OR items.id NOT IN (SELECT id FROM gone)) RETURNING j.id, items.result, j.children), "
    "b AS (UPDATE rowlock.job_bodies b SET result = w.result::jsonb FROM w "
    "  WHERE b.job_id = w.id AND w.result IS NOT NULL), " DEPS_RELEASE ", " LEASE_DONE ", "
    "refused AS (SELECT " LEASE_AS_WAS " FROM rowlock.jobs j WHERE j.queue_id = $1 "
    "  AND j.id = ANY (ARRAY(SELECT id FROM items WHERE id NOT IN (SELECT id FROM done))) "
    "  ORDER BY j.id FOR UPDATE OF j) "
    "SELECT items.i, refused.state, refused.owner, refused.fence, refused.live, "
    "  done.id IS NOT NULL, gone.id IS NOT NULL, " DEPS_RELEASED " FROM items "
    "  LEFT JOIN done ON done.id = items.id "
    "  LEFT JOIN gone ON gone.id = items.id "
    "  LEFT JOIN refused ON refused.id = items.id ORDER BY items.i",
    5};
/* clang-format on */

/* Why a fenced write did not apply, from the row as it was (columns: state, owner, fence, live,
 * applied). The one place refusals are classified. */
static enum db_queue_verdict lease_verdict(const PGresult *r, int row, int col, const char *owner,
                                           int64_t fence)
{
    if (PQntuples(r) <= row)
        return DB_Q_JOB_NOT_FOUND;
    if (PQgetvalue(r, row, col + 4)[0] == 't')
        return DB_Q_OK;
    if (PQgetisnull(r, row, col))
        return DB_Q_JOB_NOT_FOUND;
    const char *state = PQgetvalue(r, row, col);
    if (strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0)
        return DB_Q_JOB_TERMINAL;
    if (strcmp(state, "cancelled") == 0)
        return DB_Q_JOB_CANCELLED;
    if (PQgetisnull(r, row, col + 1) || strcmp(PQgetvalue(r, row, col + 1), owner) != 0)
        return DB_Q_OWNER_MISMATCH;
    if (strtoll(PQgetvalue(r, row, col + 2), NULL, 10) != fence)
        return DB_Q_FENCE_MISMATCH;
    return DB_Q_LEASE_EXPIRED;
}

/* ---- leases ---- */

void db_claimed_clear(struct db_claimed *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(c[i].payload);
        free(c[i].concurrency_key);
        c[i].payload = NULL;
        c[i].concurrency_key = NULL;
    }
}

/* Claims, combined (db/combine.h): concurrent claims on one queue of one pool wait for the one
 * running and then run as one transaction, st_claim_many; a claim that finds none running runs
 * st_claim alone. Either way a claim gets rows nobody holds, each with a fresh fence and the
 * attempt the protocol says; a combined claim only deals one statement's rows out among its
 * claimers. */
struct claim {
    const char *queue, *owner;
    int max_jobs, lease_seconds;
    long long budget; /* 0: none */
    struct db_claimed *out;
    size_t n;
    enum db_queue_verdict verdict;
    int copy_failed; /* a payload could not be copied out of the result (out of memory) */
    size_t kept;     /* leases of out committed by the limited claim's earlier rounds */
    enum db_status st;
    struct db_error err;
};

static struct db_combiner claims = DB_COMBINER_INIT(1, DB_QUEUE_BATCH_MAX, DB_COMBINE_BATCH_MAX);

/* Queues this process found limited (QUEUE_LIMITED), by name: a hint (db/hints.h) that sends
 * their claims straight to the limited claim. A claim without it that finds its queue limited
 * claims nothing and says so (CLAIM_LIMITED_NOTE); a limited claim that finds the queue no
 * longer limited forgets it. */
static struct db_hints limited_hints = DB_HINTS_INIT;

int db_queue_limited_hint(const char *queue)
{
    return db_hint_get(&limited_hints, queue) != 0;
}

static void claim_reset(struct claim *a)
{
    db_claimed_clear(a->out, a->n);
    a->n = 0;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    a->copy_failed = 0;
}

/* Appends row i of a claim's result (CLAIMED from column 1) to a's leases. A payload that cannot
 * be copied sets a->copy_failed: the lease is still recorded, for db_leases_claim to give back. */
static void claimed_row(struct claim *a, const PGresult *r, int i)
{
    if (a->n >= (size_t)a->max_jobs)
        return;
    struct db_claimed *o = &a->out[a->n++];
    o->id = strtoll(PQgetvalue(r, i, 1), NULL, 10);
    o->fence = strtoll(PQgetvalue(r, i, 2), NULL, 10);
    o->attempt = atoi(PQgetvalue(r, i, 3));
    o->priority = atoi(PQgetvalue(r, i, 4));
    o->reclaimed = PQgetvalue(r, i, 5)[0] == 't';
    db_copy(o->lease_expires_at, sizeof(o->lease_expires_at), PQgetvalue(r, i, 6));
    o->payload = strdup(PQgetvalue(r, i, 7));
    o->lease_seconds = atoi(PQgetvalue(r, i, 8));
    o->concurrency_key = PQgetisnull(r, i, 9) ? NULL : strdup(PQgetvalue(r, i, 9));
    if (o->payload == NULL || (o->concurrency_key == NULL && !PQgetisnull(r, i, 9)))
        a->copy_failed = 1;
}

/* The claims of one transaction: reqs[i]->arg are struct claim. */
struct claim_batch {
    struct db_combine_req **reqs;
    size_t n;
    int limited; /* the queue has a limit: its claims go to claim_limited_run */
    /* the limited claim's rounds: whether another may find more, past the keys found full so
     * far (an array's text, malloc'd) */
    int more;
    char *held_keys;
};

/* Hands out the leases of a claim's result: each row k (its first column) to claim k (1-based),
 * a note (k -1) that the queue is limited to b->limited. Returns the rows of other notes. */
static void claim_rows(struct claim_batch *b, const PGresult *r)
{
    for (int i = 0; i < PQntuples(r); i++) {
        long k = strtol(PQgetvalue(r, i, 0), NULL, 10);
        if (k == -1)
            b->limited = 1;
        else if (k >= 1 && (size_t)k <= b->n)
            claimed_row(b->reqs[k - 1]->arg, r, i);
    }
}

static enum db_status claim_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct claim_batch *b = arg;
    struct claim *a = b->reqs[0]->arg;
    struct db_queue q;
    int found;
    claim_reset(a);
    b->limited = 0;
    char max[DB_INT_TEXT], lease[DB_INT_TEXT], budget[DB_INT_TEXT];
    snprintf(max, sizeof(max), "%d", a->max_jobs);
    snprintf(lease, sizeof(lease), "%d", a->lease_seconds);
    snprintf(budget, sizeof(budget), "%lld", a->budget);
    const char *params[] = {NULL, a->owner, max, a->lease_seconds > 0 ? lease : NULL,
                            a->budget > 0 ? budget : NULL};
    PGresult *r = NULL;
    enum db_status st = db_queue_stmt_in(c, a->queue, &st_claim, params, 0, 1, &q, &found, &r, err);
    if (st != DB_OK || !found)
        return st;
    claim_rows(b, r);
    PQclear(r);
    a->verdict = DB_Q_OK;
    return DB_OK;
}

/* The claim arrays' column col of claim i: owner, jobs it still wants (max less what it got),
 * lease, budget. */
static const char *claim_column(const void *items, size_t i, size_t col, char *buf, size_t size)
{
    const struct claim *a = ((struct db_combine_req *const *)items)[i]->arg;
    switch (col) {
    case 0:
        return a->owner;
    case 1:
        snprintf(buf, size, "%d", a->max_jobs - (int)a->n);
        return buf;
    case 2:
        if (a->lease_seconds <= 0)
            return NULL;
        snprintf(buf, size, "%d", a->lease_seconds);
        return buf;
    default:
        if (a->budget <= 0)
            return NULL;
        snprintf(buf, size, "%lld", a->budget);
        return buf;
    }
}

/* The jobs b's claims still want. */
static long claim_wanted(const struct claim_batch *b)
{
    long total = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct claim *a = b->reqs[i]->arg;
        total += a->max_jobs - (long)a->n;
    }
    return total;
}

static void claim_batch_reset(struct claim_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        claim_reset(b->reqs[i]->arg);
}

static void claim_batch_found(struct claim_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        ((struct claim *)b->reqs[i]->arg)->verdict = DB_Q_OK;
}

/* The parameters the combined and the limited claim share: p[0] ($1, the queue's id) left for
 * db_queue_stmt_in, then $2 to $6, b's claims as arrays (arr, which the caller frees with
 * db_arrays_free) and the jobs they still want in all (sum). */
static enum db_status claim_batch_params(struct claim_batch *b, struct db_arrays *arr,
                                         char sum[DB_INT_TEXT], const char **p,
                                         struct db_error *err)
{
    enum db_status st = db_queue_arrays(arr, b->reqs, b->n, 4, claim_column, err);
    if (st != DB_OK)
        return st;
    snprintf(sum, DB_INT_TEXT, "%ld", claim_wanted(b));
    p[0] = NULL;
    p[1] = arr->arr[0];
    p[2] = arr->arr[1];
    p[3] = arr->arr[2];
    p[4] = sum;
    p[5] = arr->arr[3];
    return DB_OK;
}

static enum db_status claim_many_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct claim_batch *b = arg;
    claim_batch_reset(b);
    b->limited = 0;
    const struct claim *first = b->reqs[0]->arg;
    struct db_queue q;
    int found;
    struct db_arrays arr = {0, 0, NULL};
    char sum[DB_INT_TEXT];
    const char *params[6];
    enum db_status st = claim_batch_params(b, &arr, sum, params, err);
    if (st != DB_OK)
        return st;
    PGresult *r = NULL;
    st = db_queue_stmt_in(c, first->queue, &st_claim_many, params, 0, 1, &q, &found, &r, err);
    db_arrays_free(&arr);
    if (st != DB_OK || !found)
        return st;
    claim_rows(b, r);
    PQclear(r);
    claim_batch_found(b);
    return DB_OK;
}

/* Transactions of the limited claim one batch of claims runs at most: each after the first
 * claims past the keys the ones before found full, while its claimers want more. */
#define CLAIM_LIMITED_ROUNDS 4

/* Drops the leases of b's claims past those committed by earlier rounds (kept). */
static void claim_batch_rewind(struct claim_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct claim *a = b->reqs[i]->arg;
        db_claimed_clear(a->out + a->kept, a->n - a->kept);
        a->n = a->kept;
    }
}

/* A round of the limited claim (st_claim_limited), one transaction in one round trip: the
 * queue's row locked, the claim, and COMMIT (which ends the lock as soon as the claim is done).
 * b->more says whether another round may find more, past b->held_keys. */
static enum db_status claim_limited_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct claim_batch *b = arg;
    claim_batch_rewind(b);
    b->more = 0;
    const struct claim *first = b->reqs[0]->arg;
    struct db_arrays arr = {0, 0, NULL};
    char sum[DB_INT_TEXT];
    const char *params[7];
    enum db_status st = claim_batch_params(b, &arr, sum, params, err);
    if (st != DB_OK)
        return st;
    params[6] = b->held_keys != NULL ? b->held_keys : "{}";
    const char *lparams[] = {NULL};
    PGresult *r = NULL, *locked = NULL;
    struct db_queue q;
    int found;
    struct db_queue_call calls[] = {{&st_queue_lock, lparams, 0, &locked},
                                    {&st_claim_limited, params, 0, &r}};
    st = db_queue_stmts_in(c, first->queue, calls, 2, 1, &q, &found, err);
    db_arrays_free(&arr);
    PQclear(locked);
    if (st != DB_OK || !found)
        return st;
    claim_batch_found(b);
    claim_rows(b, r);
    /* the note (k 0) sorts first */
    if (PQntuples(r) > 0 && strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
        long long key_held = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
        long long queue_held = strtoll(PQgetvalue(r, 0, 2), NULL, 10);
        if (strcmp(PQgetvalue(r, 0, 3), "0") == 0)
            db_hint_set(&limited_hints, first->queue, 0);
        char *keys = strdup(PQgetvalue(r, 0, 7));
        if (keys != NULL) {
            free(b->held_keys);
            b->held_keys = keys;
            b->more = key_held > 0 && queue_held == 0 && claim_wanted(b) > 0;
        }
    }
    PQclear(r);
    return DB_OK;
}

/* The limited claim: rounds of claim_limited_tx. A round that fails after one that committed
 * leaves the claimers what that one gave them (its failure changed nothing). */
static enum db_status claim_limited_run(struct db_pool *pool, struct claim_batch *b,
                                        struct db_error *err)
{
    enum db_status st = DB_OK;
    claim_batch_reset(b);
    for (size_t i = 0; i < b->n; i++)
        ((struct claim *)b->reqs[i]->arg)->kept = 0;
    for (int round = 0; round < CLAIM_LIMITED_ROUNDS; round++) {
        st = db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, claim_limited_tx, b, err);
        if (st != DB_OK) {
            claim_batch_rewind(b);
            if (round > 0)
                st = DB_OK;
            break;
        }
        for (size_t i = 0; i < b->n; i++) {
            struct claim *a = b->reqs[i]->arg;
            a->kept = a->n;
        }
        if (!b->more)
            break;
    }
    free(b->held_keys);
    b->held_keys = NULL;
    return st;
}

/* Claims run on generic plans (planned once a connection, not at every claim, where planning is
 * a large share of a short statement's time): with auto, PostgreSQL keeps choosing a custom plan,
 * as a generic one guesses LIMIT $3 at a tenth of the backlog and so looks dearer. The generic plan
 * is the custom one (the claim index, then primary-key lookups, held to them by the "= ANY" above)
 * at any backlog (docs/architecture.md, "The queue's rows", generic plans). A claim of a queue
 * not known to be limited that finds it limited has claimed nothing, and runs again limited. */
static void claim_run(struct db_pool *pool, struct db_combine_req **batch, size_t n)
{
    const struct claim *first = batch[0]->arg;
    struct claim_batch b = {batch, n, 0, 0, NULL};
    struct db_error err = {"", ""};
    enum db_status st = DB_OK;
    if (db_hint_get(&limited_hints, first->queue) == 0) {
        st = db_tx_run(pool, DB_READ_COMMITTED_GENERIC_PLANS, n == 1 ? claim_tx : claim_many_tx, &b,
                       &err);
        if (st == DB_OK && b.limited)
            db_hint_set(&limited_hints, first->queue, 1);
    }
    if (db_hint_get(&limited_hints, first->queue) != 0)
        st = claim_limited_run(pool, &b, &err);
    for (size_t i = 0; i < n; i++) {
        struct claim *a = batch[i]->arg;
        a->st = st;
        a->err = err;
    }
}

/* A claim whose payloads could not all be copied is an error, never a lease handed to a worker
 * without its payload. The claim committed with its statement (COMMIT rides with it), so there
 * is no rolling it back: each of its jobs is handed back instead (as db_leases_handback: pending
 * again at once, the attempt not spent), so that none waits for its lease to run out. */
static enum db_status claim_copy_failed(struct db_pool *pool, struct claim *a)
{
    for (size_t i = 0; i < a->n; i++) {
        struct db_lease l = {a->out[i].id, a->owner, a->out[i].fence};
        enum db_queue_verdict v;
        struct db_error ignored; /* (one that fails comes back when its lease runs out) */
        db_leases_handback(pool, a->queue, &l, &v, &ignored);
    }
    db_error_set(&a->err, "",
                 "out of memory copying a claimed job's payload: its claim of %zu "
                 "jobs was handed back",
                 a->n);
    return DB_ERR_HARD;
}

enum db_status db_leases_claim(struct db_pool *pool, const char *queue, const char *owner,
                               int max_jobs, int lease_seconds, long long budget,
                               struct db_claimed *out, size_t *n, enum db_queue_verdict *verdict,
                               struct db_error *err)
{
    struct claim a = {.queue = queue,
                      .owner = owner,
                      .max_jobs = max_jobs,
                      .lease_seconds = lease_seconds,
                      .budget = budget,
                      .out = out,
                      .verdict = DB_Q_QUEUE_NOT_FOUND};
    struct db_combine_req req = {.queue = queue, .weight = (size_t)max_jobs, .arg = &a};
    db_combine(&claims, pool, &req, claim_run);
    if (a.st == DB_OK && a.copy_failed)
        a.st = claim_copy_failed(pool, &a);
    *verdict = a.verdict;
    *n = a.st == DB_OK ? a.n : 0;
    if (a.st != DB_OK)
        db_claimed_clear(out, a.n);
    *err = a.err;
    return a.st;
}

/* A completion's effects (db/effects.h) and the lease they depend on: a job_op's then. */
struct fenced_fx {
    const struct db_lease *l;
    struct db_effects *fx;
};

/* Applies the effects once the fenced statement applied; a refused one rolls back, having done
 * no effect's work. */
static enum db_status fenced_effects(struct db_conn *c, struct job_op *a, struct db_error *err)
{
    const struct fenced_fx *x = a->ctx;
    if (lease_verdict(a->rows, 0, 0, x->l->owner, x->l->fence) != DB_Q_OK)
        return DB_ABORTED;
    return db_effects_apply(c, x->fx, err);
}

/* Runs a fenced statement ($1 job, $2 queue, $3 owner, $4 fence, then extra) and classifies
 * the outcome; with fx (NULL: none), the effects in the same transaction once it applied. info
 * (may be NULL, DB_TIME_TEXT bytes) gets the statement's extra column; a job the statement
 * deleted (its deleted column) is counted as ended in state final, unless all was rolled back. */
static enum db_status fenced(struct db_pool *pool, const char *queue, const struct db_stmt *stmt,
                             const struct db_lease *l, const char *x1, const char *x2,
                             struct db_effects *fx, char *info, const char *final,
                             enum db_queue_verdict *verdict, struct db_error *err)
{
    char fence[DB_INT_TEXT];
    db_i64(fence, sizeof(fence), l->fence);
    struct fenced_fx x = {l, fx};
    struct job_op a = {.queue = queue,
                       .stmt = stmt,
                       .id = l->job_id,
                       .extra = {l->owner, fence, x1, x2},
                       .then = fx != NULL ? fenced_effects : NULL,
                       .ctx = &x,
                       .verdict = DB_Q_QUEUE_NOT_FOUND};
    if (fx != NULL)
        fx->refused = DB_FX_OK;
    enum db_status st = db_job_op_run(pool, &a, err);
    *verdict = a.verdict;
    if (st == DB_OK && a.verdict == DB_Q_OK) {
        *verdict = lease_verdict(a.rows, 0, 0, l->owner, l->fence);
        if (info != NULL)
            db_copy(info, DB_TIME_TEXT, PQntuples(a.rows) > 0 ? PQgetvalue(a.rows, 0, 5) : "");
        if (*verdict == DB_Q_OK && !a.rolled_back && PQntuples(a.rows) > 0 &&
            PQgetvalue(a.rows, 0, 6)[0] == 't')
            db_jobs_deleted_add(final, 1);
    }
    PQclear(a.rows);
    return st;
}

enum db_status db_leases_heartbeat(struct db_pool *pool, const char *queue,
                                   const struct db_lease *l, int lease_seconds,
                                   const char *progress, char *expires_at,
                                   enum db_queue_verdict *verdict, struct db_error *err)
{
    char lease[DB_INT_TEXT];
    snprintf(lease, sizeof(lease), "%d", lease_seconds);
    return fenced(pool, queue, &st_heartbeat, l, lease_seconds > 0 ? lease : NULL, progress, NULL,
                  expires_at, "", verdict, err);
}

enum db_status db_leases_complete(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  const char *result, enum db_queue_verdict *verdict,
                                  struct db_error *err)
{
    return fenced(pool, queue, &st_complete, l, result, NULL, NULL, NULL, "succeeded", verdict,
                  err);
}

enum db_status db_leases_complete_fx(struct db_pool *pool, const char *queue,
                                     const struct db_lease *l, const char *result,
                                     struct db_effects *fx, enum db_queue_verdict *verdict,
                                     struct db_error *err)
{
    return fenced(pool, queue, &st_complete, l, result, NULL, fx, NULL, "succeeded", verdict, err);
}

enum db_status db_leases_fail(struct db_pool *pool, const char *queue, const struct db_lease *l,
                              const char *error, int retry, char *new_state,
                              enum db_queue_verdict *verdict, struct db_error *err)
{
    char state[DB_TIME_TEXT];
    enum db_status st = fenced(pool, queue, &st_fail, l, error ? error : "null",
                               retry ? "true" : "false", NULL, state, "failed", verdict, err);
    if (new_state != NULL)
        db_copy(new_state, DB_JOB_STATE_TEXT, state);
    return st;
}

enum db_status db_leases_handback(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                  enum db_queue_verdict *verdict, struct db_error *err)
{
    return fenced(pool, queue, &st_handback, l, NULL, NULL, NULL, NULL, "", verdict, err);
}

enum db_status db_leases_release(struct db_pool *pool, const char *queue, const struct db_lease *l,
                                 char *new_state, enum db_queue_verdict *verdict,
                                 struct db_error *err)
{
    char state[DB_TIME_TEXT];
    enum db_status st =
        fenced(pool, queue, &st_release, l, NULL, NULL, NULL, state, "failed", verdict, err);
    if (new_state != NULL)
        db_copy(new_state, DB_JOB_STATE_TEXT, state);
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
    enum db_status st;
    struct db_error err;
    unsigned long long deleted; /* jobs the settlement deleted (their queue keeps none) */
};

static enum db_status settle_tx(struct db_conn *c, void *arg, struct db_error *err)
{
    struct settle *a = arg;
    struct db_queue q;
    int found;
    a->verdict = DB_Q_QUEUE_NOT_FOUND;
    struct db_arrays arr = {0, 0, NULL};
    enum db_status st = db_queue_arrays(&arr, a->items, a->n, 4, settlement_column, err);
    if (st != DB_OK)
        return st;
    const char *params[] = {NULL, arr.arr[0], arr.arr[1], arr.arr[2], arr.arr[3]};
    PGresult *r = NULL;
    st = bad_input(
        db_queue_stmt_in(c, a->queue, &st_complete_batch, params, 0, 1, &q, &found, &r, err), err,
        &a->verdict);
    db_arrays_free(&arr);
    if (st != DB_OK || !found)
        return st;
    /* columns 1..5 are state, owner, fence, live, applied: the shape lease_verdict reads */
    unsigned long long gone = 0;
    for (int i = 0; i < PQntuples(r) && (size_t)i < a->n; i++) {
        a->items[i].verdict =
            lease_verdict(r, i, 1, a->items[i].lease.owner, a->items[i].lease.fence);
        gone += PQgetvalue(r, i, 6)[0] == 't';
    }
    PQclear(r);
    a->deleted = gone;
    a->verdict = DB_Q_OK;
    return DB_OK;
}

/* Settlements, combined like claims: concurrent settlements of one queue run as one statement
 * over all their items, each item fenced and answered on its own as in its own settlement. */
static struct db_combiner settlements =
    DB_COMBINER_INIT(1, DB_QUEUE_BATCH_MAX, DB_COMBINE_BATCH_MAX);

static void settle_alone(struct db_pool *pool, struct settle *a)
{
    a->deleted = 0;
    a->st = finish(db_tx_run(pool, DB_READ_COMMITTED, settle_tx, a, &a->err));
    if (a->st == DB_OK && a->verdict == DB_Q_OK && a->deleted > 0)
        db_jobs_deleted_add("succeeded", a->deleted);
}

static int cmp_id(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Whether a job appears in two of the batch's settlements (each one's items are distinct; the
 * statement answers each job once). -1 when out of memory. */
static int repeats_a_job(struct db_combine_req **batch, size_t n, size_t total)
{
    int64_t *ids = malloc(total * sizeof(*ids));
    if (ids == NULL)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct settle *a = batch[i]->arg;
        for (size_t j = 0; j < a->n; j++)
            ids[k++] = a->items[j].lease.job_id;
    }
    qsort(ids, total, sizeof(*ids), cmp_id);
    int repeats = 0;
    for (size_t i = 1; i < total && !repeats; i++)
        repeats = ids[i] == ids[i - 1];
    free(ids);
    return repeats;
}

static void settle_run(struct db_pool *pool, struct db_combine_req **batch, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ((struct settle *)batch[i]->arg)->n;
    struct db_settlement *all = n > 1 ? malloc(total * sizeof(*all)) : NULL;
    if (all == NULL || repeats_a_job(batch, n, total) != 0) {
        free(all);
        for (size_t i = 0; i < n; i++)
            settle_alone(pool, batch[i]->arg);
        return;
    }
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const struct settle *a = batch[i]->arg;
        memcpy(all + off, a->items, a->n * sizeof(*all));
        off += a->n;
    }
    struct settle joint = {.queue = ((struct settle *)batch[0]->arg)->queue,
                           .items = all,
                           .n = total,
                           .verdict = DB_Q_QUEUE_NOT_FOUND};
    settle_alone(pool, &joint);
    off = 0;
    for (size_t i = 0; i < n; i++) {
        struct settle *a = batch[i]->arg;
        if (joint.st == DB_OK && joint.verdict == DB_Q_BAD_INPUT) {
            /* one item's result was refused; alone, only its own settlement is */
            settle_alone(pool, a);
            continue;
        }
        a->st = joint.st;
        a->err = joint.err;
        a->verdict = joint.verdict;
        for (size_t j = 0; j < a->n; j++)
            a->items[j].verdict = all[off + j].verdict;
        off += a->n;
    }
    free(all);
}

enum db_status db_leases_complete_batch(struct db_pool *pool, const char *queue,
                                        struct db_settlement *items, size_t n,
                                        enum db_queue_verdict *verdict, struct db_error *err)
{
    struct settle a = {.queue = queue, .items = items, .n = n, .verdict = DB_Q_QUEUE_NOT_FOUND};
    struct db_combine_req req = {.queue = queue, .weight = n, .arg = &a};
    db_combine(&settlements, pool, &req, settle_run);
    *verdict = a.verdict;
    *err = a.err;
    return a.st;
}

void db_leases_combined_get(struct db_leases_combined *out)
{
    db_combine_counts(&claims, &out->claims, &out->claim_transactions);
    db_combine_counts(&settlements, &out->settlements, &out->settlement_transactions);
}
