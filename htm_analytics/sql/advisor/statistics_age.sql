-- Since when the cumulative statistics count: the last reset, or else the database's creation
-- (the modification time of its PG_VERSION file, readable by superusers and members of
-- pg_read_server_files; NULL otherwise).
SELECT d.stats_reset,
       CASE WHEN pg_has_role(current_user, 'pg_read_server_files', 'MEMBER')
            THEN (pg_stat_file(format('base/%s/PG_VERSION', d.datid))).modification
       END AS database_created,
       now() AS checked_at
FROM pg_stat_database d
WHERE d.datname = current_database()
