-- Per user table: rows, dead rows, scans, updates, transaction-ID age and fillfactor.
SELECT s.schemaname AS schema,
       s.relname AS table,
       s.n_live_tup, s.n_dead_tup, s.seq_scan, s.seq_tup_read,
       coalesce(s.idx_scan, 0) AS idx_scan,
       s.n_tup_upd, s.n_tup_hot_upd,
       greatest(s.last_vacuum, s.last_autovacuum) AS last_vacuumed,
       greatest(age(c.relfrozenxid), coalesce(age(t.relfrozenxid), 0))::bigint AS xid_age,
       pg_total_relation_size(s.relid) AS total_bytes
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
ORDER BY s.schemaname, s.relname
