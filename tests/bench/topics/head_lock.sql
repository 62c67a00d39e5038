-- Locked read, step 1: sql_head_lock in db/topic_handles.c, verbatim ({h}: the topic's head table; $1:
-- the key). Lines starting with -- are dropped when topics.sh composes a pgbench script.
SELECT head_id IS NOT NULL FROM {h} WHERE key = $1 FOR UPDATE
