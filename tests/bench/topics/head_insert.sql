-- Locked read of a key without a row: st_head_insert in db/topic_handles.c, verbatim ($1: the
-- topic id; $2: the key).
INSERT INTO rowlock.topic_heads (topic_id, key) VALUES ($1::bigint, $2) 
ON CONFLICT (topic_id, key) DO NOTHING RETURNING key
