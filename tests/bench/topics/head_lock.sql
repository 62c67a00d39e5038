-- Locked read, step 1: st_head_lock in db/topic_handles.c, verbatim ($1: the topic id; $2: the
-- key). Lines starting with -- are dropped when topics.sh composes a pgbench script.
SELECT head_id IS NOT NULL FROM rowlock.topic_heads WHERE topic_id = $1::bigint AND key = $2 
FOR UPDATE
