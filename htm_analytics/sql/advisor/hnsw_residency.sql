-- Share of each HNSW index's pages held in shared buffers (needs pg_buffercache).
SELECT n.nspname AS schema,
       c.relname AS index,
       count(b.bufferid)::bigint AS cached_pages,
       greatest(pg_relation_size(c.oid) / current_setting('block_size')::bigint, 1) AS pages
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_am am ON am.oid = c.relam AND am.amname = 'hnsw'
LEFT JOIN pg_buffercache b
  ON b.relfilenode = pg_relation_filenode(c.oid)
 AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
GROUP BY c.oid, n.nspname, c.relname
