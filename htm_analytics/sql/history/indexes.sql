-- Every index of the memory's schema: its size and cumulative usage counters.
SELECT s.indexrelid::bigint AS indexrelid, s.relname AS table, s.indexrelname AS index,
       am.amname AS method, x.indisunique AS is_unique, pg_relation_size(s.indexrelid) AS index_bytes,
       s.idx_scan, s.idx_tup_read, s.idx_tup_fetch
FROM pg_stat_user_indexes s
JOIN pg_class i ON i.oid = s.indexrelid
JOIN pg_index x ON x.indexrelid = s.indexrelid
JOIN pg_am am ON am.oid = i.relam
WHERE s.schemaname = 'public'
ORDER BY s.relname, s.indexrelname
