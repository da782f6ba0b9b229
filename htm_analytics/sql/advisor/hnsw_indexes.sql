-- HNSW indexes with their size, build parameters, dimension and the rows they cover, beside
-- the memory settings that decide whether they are cached and how fast they rebuild.
SELECT n.nspname AS schema,
       t.relname AS table,
       c.relname AS index,
       pg_relation_size(c.oid) AS size_bytes,
       coalesce((SELECT split_part(o, '=', 2)::int FROM unnest(c.reloptions) AS o
                 WHERE o LIKE 'm=%'), 16) AS m,
       coalesce((SELECT split_part(o, '=', 2)::int FROM unnest(c.reloptions) AS o
                 WHERE o LIKE 'ef_construction=%'), 64) AS ef_construction,
       coalesce(nullif(substring(pg_get_indexdef(c.oid) FROM '::vector\((\d+)\)'), '')::int,
                (SELECT a.atttypmod FROM pg_attribute a
                 WHERE a.attrelid = x.indrelid AND a.attnum = x.indkey[0] AND a.attnum > 0))
           AS dimension,
       greatest(c.reltuples, 0)::bigint AS indexed_rows,
       coalesce(s.idx_scan, 0) AS idx_scan,
       pg_size_bytes(current_setting('shared_buffers')) AS shared_buffers_bytes,
       pg_size_bytes(current_setting('maintenance_work_mem')) AS maintenance_work_mem_bytes,
       current_setting('maintenance_work_mem') AS maintenance_work_mem
FROM pg_index x
JOIN pg_class c ON c.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_am am ON am.oid = c.relam AND am.amname = 'hnsw'
LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = x.indexrelid
ORDER BY n.nspname, t.relname, c.relname
