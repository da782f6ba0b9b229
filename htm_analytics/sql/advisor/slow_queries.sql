-- Statements of this database slower on average than the threshold, called often enough; the
-- ten that took the most time of the application's, and of this toolkit's own analyses (their
-- statements carry its marker, their named cursors its prefix: see store/tracing.py).
WITH slow AS (
    SELECT s.*,
           (strpos(s.query, %(marker)s) > 0 OR strpos(s.query, %(cursor_prefix)s) > 0)
               AS toolkit
    FROM pg_stat_statements s
    WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND s.calls >= %(min_calls)s AND s.mean_exec_time >= %(slow_ms)s
), ranked AS (
    SELECT slow.*,
           row_number() OVER (PARTITION BY toolkit ORDER BY total_exec_time DESC) AS place,
           count(*) OVER (PARTITION BY toolkit) AS of_its_kind
    FROM slow
)
SELECT queryid::text AS queryid,
       -- leading comment lines left out: PostgreSQL 15 keeps them in the text, 18 does not
       left(regexp_replace(regexp_replace(query, '^(\s*--[^\n]*\n)+', ''), '\s+', ' ', 'g'),
            200) AS query,
       calls,
       mean_exec_time::float8 AS mean_ms,
       stddev_exec_time::float8 AS stddev_ms,
       total_exec_time::float8 AS total_ms,
       toolkit,
       of_its_kind
FROM ranked
WHERE place <= 10
ORDER BY toolkit, total_exec_time DESC
