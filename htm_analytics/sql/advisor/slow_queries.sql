-- Statements of this database slower on average than the threshold, called often enough.
SELECT queryid::text AS queryid,
       left(regexp_replace(query, '\s+', ' ', 'g'), 200) AS query,
       calls,
       mean_exec_time::float8 AS mean_ms,
       stddev_exec_time::float8 AS stddev_ms,
       total_exec_time::float8 AS total_ms
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND calls >= %(min_calls)s AND mean_exec_time >= %(slow_ms)s
ORDER BY total_exec_time DESC
LIMIT 10
