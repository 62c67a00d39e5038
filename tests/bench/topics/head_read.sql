-- Locked read of a key with a head: after st_head_lock found one, db_key_lock_head reads it
-- with st_head_read (HEAD_SELECT in db/topic_handles.c), verbatim ($1: the topic id; $2: the
-- key). Also the plain GET .../head.
SELECT h.head_id, h.compaction_rank, h.schema_version, m.value::text, m.value IS NULL 
FROM rowlock.topic_heads h JOIN rowlock.topic_messages m 
ON m.topic_id = h.topic_id AND m."offset" = h.head_id 
WHERE h.topic_id = $1::bigint AND h.key = $2
