-- Compacted produce of a batch: st_produce in db/topic_handles.c, verbatim, one line per C string
-- piece. $1 keys, $2 values (JSON text), $3 ranks, $4 sequences, $5 producer, $6 schema version,
-- $7 the topic id, $8 its offset sequence (a regclass).
WITH input AS (
  SELECT i, k, v, r, s, nextval($8::regclass) AS off FROM (
    SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) 
      WITH ORDINALITY AS u(k, v, r, s, i) ORDER BY i) o
), ins AS (
  INSERT INTO rowlock.topic_messages (topic_id, "offset", key, value, producer, sequence, 
    schema_version, rank) 
  SELECT $7::bigint, off, k, v::jsonb, $5, s, $6, coalesce(r, off) FROM input ORDER BY i 
  ON CONFLICT (topic_id, producer, sequence) WHERE sequence IS NOT NULL DO NOTHING 
  RETURNING "offset", key, rank
), cand AS (
  SELECT DISTINCT ON (key) key, "offset", rank FROM ins ORDER BY key, rank DESC, "offset"
), up AS (
  INSERT INTO rowlock.topic_heads AS h (topic_id, key, head_id, schema_version, 
    compaction_rank) 
  SELECT $7::bigint, key, "offset", $6, rank FROM cand ORDER BY key 
  ON CONFLICT (topic_id, key) DO UPDATE SET head_id = EXCLUDED.head_id, 
    schema_version = EXCLUDED.schema_version, compaction_rank = EXCLUDED.compaction_rank, 
    updated_at = now() 
  WHERE h.compaction_rank IS NULL OR h.compaction_rank < EXCLUDED.compaction_rank 
  RETURNING key, head_id
) 
SELECT input.i, input.off, ins."offset" IS NOT NULL, 
  coalesce(up.head_id, (SELECT head_id FROM rowlock.topic_heads 
    WHERE topic_id = $7::bigint AND key = input.k)) 
FROM input LEFT JOIN ins ON ins."offset" = input.off 
LEFT JOIN up ON up.key = input.k 
ORDER BY input.i
