-- The topic resolve every rowlock workflow starts with: st_resolve in db/topic_handles.c (TOPIC_COLUMNS
-- expanded), verbatim. topics.sh binds $1 (the topic name) and checks this text against
-- db/topic_handles.c before each run. Lines starting with -- are dropped when the script is composed.
SELECT id, name, headless_ttl_seconds, coalesce(retention_seconds, 0), default_schema_version, 
to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 
to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), retention_ignores_consumers
 FROM rowlock.topics WHERE name = $1
