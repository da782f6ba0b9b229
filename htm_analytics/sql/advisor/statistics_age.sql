-- Since when the cumulative statistics count: the last reset. can_read_files says whether this
-- role may read the database's creation time (database_created.sql): pg_stat_file is
-- restricted, and a statement naming it fails for other roles even where it would not run.
-- server_statistics_since: when the server last started without saved statistics. Crash
-- recovery discards them all and sets the reset time of the server-wide views to that start,
-- while each database's own stats_reset stays NULL; one of those views reset by hand moves
-- only itself, hence the earlier of two.
SELECT d.stats_reset,
       has_function_privilege('pg_catalog.pg_stat_file(text)', 'EXECUTE') AS can_read_files,
       (SELECT least(a.stats_reset, b.stats_reset)
        FROM pg_stat_archiver a, pg_stat_bgwriter b) AS server_statistics_since,
       now() AS checked_at
FROM pg_stat_database d
WHERE d.datname = current_database()
