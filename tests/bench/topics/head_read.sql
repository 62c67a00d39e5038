-- Locked read of a key with a head: after sql_head_lock found one, db_key_lock_head reads it
-- with sql_head_read (HEAD_SELECT in db/topic_handles.c), verbatim ({h}, {m}: the topic's head and
-- message tables; $1: the key). Also the plain GET .../head.
SELECT h.head_id, h.compaction_rank, h.schema_version, m.value::text, m.value IS NULL 
FROM {h} h JOIN {m} m ON m."offset" = h.head_id WHERE h.key = $1
