-- Share of table and index block reads served from shared buffers.
SELECT coalesce(sum(heap_blks_hit), 0)::bigint AS heap_hit,
       coalesce(sum(heap_blks_read), 0)::bigint AS heap_read,
       coalesce(sum(idx_blks_hit), 0)::bigint AS index_hit,
       coalesce(sum(idx_blks_read), 0)::bigint AS index_read,
       current_setting('shared_buffers') AS shared_buffers
FROM pg_statio_user_tables
