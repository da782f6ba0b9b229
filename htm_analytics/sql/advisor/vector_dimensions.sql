-- Stored vectors per dimension, and whether a native-dimension HNSW index covers them.
SELECT embedding_dimension AS dimension,
       count(*) AS vectors,
       to_regclass(format('public.idx_nodes_embedding_%s', embedding_dimension)) IS NOT NULL
           AS has_native_index,
       pg_size_bytes(current_setting('maintenance_work_mem')) AS maintenance_work_mem_bytes,
       current_setting('maintenance_work_mem') AS maintenance_work_mem
FROM nodes
WHERE embedding IS NOT NULL AND embedding_dimension IS NOT NULL
GROUP BY embedding_dimension
ORDER BY vectors DESC
