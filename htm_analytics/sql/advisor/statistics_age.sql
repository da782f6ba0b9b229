-- Since when the cumulative statistics count: the last reset. can_read_files says whether this
-- role may read the database's creation time (database_created.sql): pg_stat_file is
-- restricted, and a statement naming it fails for other roles even where it would not run.
SELECT d.stats_reset,
       has_function_privilege('pg_catalog.pg_stat_file(text)', 'EXECUTE') AS can_read_files,
       now() AS checked_at
FROM pg_stat_database d
WHERE d.datname = current_database()
