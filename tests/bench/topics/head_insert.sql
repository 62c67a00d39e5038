-- Locked read of a key without a row: sql_head_insert in db/topic_handles.c, verbatim ({h}: the
-- topic's head table; $1: the key).
INSERT INTO {h} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING RETURNING key
