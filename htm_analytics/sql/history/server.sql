-- One sample's server facts: when it was taken, since when the counters count (the server's
-- start and this database's last statistics reset), and the vector search depth new
-- sessions get. The vector cast loads pgvector first, so hnsw.ef_search is its real value.
SELECT clock_timestamp() AS collected_at,
       current_database() AS database,
       current_setting('server_version') AS server_version,
       pg_postmaster_start_time() AS server_started_at,
       (SELECT stats_reset FROM pg_stat_database WHERE datname = current_database())
           AS stats_reset,
       -- Grows while the counters persist (a clean restart keeps them); back near zero
       -- after a crash discarded them.
       (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())
           AS xact_commit,
       CASE WHEN '[1]'::vector IS NOT NULL
            THEN current_setting('hnsw.ef_search', true)::int END AS ef_search,
       to_regclass('pg_stat_statements') IS NOT NULL
           AND current_setting('pg_stat_statements.max', true) IS NOT NULL
           AS statements_available,
       -- pg_stat_statements 1.9 (PostgreSQL 14) and later count their evictions
       to_regclass('pg_stat_statements_info') IS NOT NULL
           AND current_setting('pg_stat_statements.max', true) IS NOT NULL
           AS evictions_counted
