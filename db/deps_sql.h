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

#endif
