-- Migration 9: rowlock.jobs leaves half of each page free (fillfactor 50, was 70). A job's row
-- is updated twice on its way through a queue (claimed, settled), and each update writes a new
-- version of the row. With 70 the new version often found no room on its page: PostgreSQL then
-- logged a row lock before moving it to another page (a third of the heap lock records a job
-- cost) and spread the job over two pages, as tests/bench/queues.sh PIN=1 shows (its WAL and
-- row-lock counts a job). Applies to pages written from now on; existing pages
-- keep their layout until rewritten. Expand only: a storage parameter, which the previous
-- release neither reads nor depends on, so serves_from stays 6; ALTER TABLE ... SET takes a
-- SHARE UPDATE EXCLUSIVE lock, which blocks neither reads nor writes of jobs.
ALTER TABLE rowlock.jobs SET (fillfactor = 50);
