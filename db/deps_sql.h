/* The dependency protocol's SQL (migration 22): how a parent's end settles the children waiting
 * for it, written once and composed into each statement that ends jobs. Only db/leases.c
 * includes it.
 *
 * A waiting child counts its parents not settled yet (waiting_on); each parent lists it in
 * children. The statement that ends a parent reads the parent's children from its own UPDATE's
 * RETURNING (the row's latest version: a child linked while that UPDATE waited for the parent's
 * row is in it), locks those children that are waiting, in id order, and takes its parents off
 * each child's count; the one that takes the last makes the child pending. The count is only ever
 * changed under the child's row lock and on its latest version (an UPDATE that finds its row
 * changed by a transaction that committed after its snapshot re-reads it, EvalPlanQual), so two
 * parents ending at once take one each, in turn: the second waits for the first's commit, and
 * only it releases the child, after both committed. */
#ifndef DB_DEPS_SQL_H
#define DB_DEPS_SQL_H

/* The children of the jobs fin (SQL of rows with id and children, from an UPDATE's RETURNING)
 * that ended succeeded, settled: deps_kid (each child with how many of its parents ended here),
 * deps_lk (those waiting, locked in id order), deps_rel (their counts taken down; pending at
 * zero; RETURNING id, queue_id, state). A statement ending no job with children looks nothing
 * up: every array is empty. */
#ifndef ROWLOCK_TEST_FANIN_SNAPSHOT
#define DEPS_RELEASE(fin)                                                                          \
    "deps_kid AS (SELECT k.id, count(*) AS n FROM (" fin ") f, unnest(f.children) k(id) "          \
    "  GROUP BY k.id), "                                                                           \
    "deps_lk AS (SELECT j.id FROM rowlock.jobs j WHERE j.id = ANY (ARRAY(SELECT id FROM "          \
    "  deps_kid)) AND j.state = 'waiting' ORDER BY j.id FOR NO KEY UPDATE OF j), "                 \
    "deps_rel AS (UPDATE rowlock.jobs j SET waiting_on = greatest(j.waiting_on - h.n, 0), "        \
    "  state = CASE WHEN j.waiting_on <= h.n THEN 'pending' ELSE 'waiting' END, "                  \
    "  claimable_at = CASE WHEN j.waiting_on <= h.n THEN greatest(j.run_at, now()) "               \
    "  ELSE j.claimable_at END, updated_at = now() FROM deps_kid h "                               \
    "  WHERE j.id = h.id AND j.id = ANY (ARRAY(SELECT id FROM deps_lk)) AND j.state = 'waiting' "  \
    "  RETURNING j.id, j.queue_id, j.state)"
#else
/* rowlock-unlocked (tests only): the count taken down from the value the statement's snapshot
 * holds, with no lock first, so that the race tests can show they catch the lost decrement of
 * two parents ending at once (the child then waits forever). */
#define DEPS_RELEASE(fin)                                                                          \
    "deps_kid AS (SELECT k.id, count(*) AS n, (SELECT c.waiting_on FROM rowlock.jobs c "           \
    "  WHERE c.id = k.id) AS snap FROM (" fin ") f, unnest(f.children) k(id) GROUP BY k.id), "     \
    "deps_rel AS (UPDATE rowlock.jobs j SET waiting_on = greatest(h.snap - h.n, 0), "              \
    "  state = CASE WHEN h.snap <= h.n THEN 'pending' ELSE 'waiting' END, "                        \
    "  claimable_at = CASE WHEN h.snap <= h.n THEN greatest(j.run_at, now()) "                     \
    "  ELSE j.claimable_at END, updated_at = now() FROM deps_kid h "                               \
    "  WHERE j.id = h.id AND j.state = 'waiting' RETURNING j.id, j.queue_id, j.state)"
#endif
/* Whether the finished job j is kept past its retention for a child that has not finished (a
 * child reads its parents' results while it runs). A plain job stops at the first operand. */
#define DEPS_HELD                                                                                  \
    "(j.children IS NOT NULL AND EXISTS (SELECT FROM rowlock.jobs c WHERE c.id = ANY "             \
    "(j.children) AND c.state IN ('waiting', 'pending', 'processing')))"

/* After DEPS_RELEASE: the released jobs' queues woken, every process's claims waiting on them
 * (DB_LISTENER_CHANNEL_ALL, "<count> queue:<name>", the queue family's channel). A SELECT CTE
 * runs only when read: the statement reads DEPS_WOKEN, the number of queues woken. */
#define DEPS_WAKE                                                                                  \
    "deps_wake AS (SELECT pg_notify('rowlock_wake_all', x.n || ' queue:' || q.name) "              \
    "  FROM (SELECT queue_id, count(*) AS n FROM deps_rel WHERE state = 'pending' "                \
    "  GROUP BY queue_id) x JOIN rowlock.queues q ON q.id = x.queue_id)"
#define DEPS_WOKEN "(SELECT count(*) FROM deps_wake)::text"

#endif
