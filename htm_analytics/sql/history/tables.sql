-- Every table of the memory's schema: its size and cumulative activity counters.
SELECT s.relid::bigint AS relid, s.relname AS table,
       pg_table_size(s.relid) AS table_bytes, pg_indexes_size(s.relid) AS index_bytes,
       s.seq_scan, s.seq_tup_read, coalesce(s.idx_scan, 0) AS idx_scan,
       coalesce(s.idx_tup_fetch, 0) AS idx_tup_fetch, s.n_tup_ins, s.n_tup_upd,
       s.n_tup_hot_upd, s.n_tup_del, s.n_live_tup, s.n_dead_tup
FROM pg_stat_user_tables s
WHERE s.schemaname = 'public'
ORDER BY s.relname
