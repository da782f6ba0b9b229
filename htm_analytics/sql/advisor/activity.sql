-- Other sessions of this database that are running a statement or holding a transaction open.
SELECT pid,
       state,
       coalesce(application_name, '') AS application,
       extract(epoch FROM now() - coalesce(query_start, xact_start))::float8 AS query_seconds,
       extract(epoch FROM now() - state_change)::float8 AS state_seconds,
       left(regexp_replace(query, '\s+', ' ', 'g'), 200) AS query
FROM pg_stat_activity
WHERE datname = current_database()
  AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
  AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')
ORDER BY pid
