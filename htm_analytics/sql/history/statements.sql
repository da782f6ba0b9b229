-- The statements of this database that took the most time since pg_stat_statements was
-- last reset (cumulative: a sample's figures are differences from the previous one), with
-- when each entry started counting (stats_since, pg_stat_statements 1.11 and later; read
-- through jsonb so that older versions, which lack the column, give NULL).
SELECT queryid::text AS queryid,
       -- leading comment lines left out: PostgreSQL 15 keeps them in the text, 18 does not
       left(regexp_replace(regexp_replace(query, '^(\s*--[^\n]*\n)+', ''), '\s+', ' ', 'g'),
            300) AS query,
       calls, total_exec_time::float8 AS total_ms, mean_exec_time::float8 AS mean_ms, rows,
       (to_jsonb(s) ->> 'stats_since')::timestamptz AS stats_since
FROM (SELECT * FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        -- Other roles' statements have no queryid without pg_read_all_stats: left out.
        AND queryid IS NOT NULL
      ORDER BY total_exec_time DESC
      LIMIT %(limit)s) s
ORDER BY total_exec_time DESC
