-- When the database was created: the modification time of its PG_VERSION file (superusers and
-- members of pg_read_server_files only; statistics_age.sql says whether this role may).
SELECT (pg_stat_file(format('base/%s/PG_VERSION', d.datid))).modification AS database_created
FROM pg_stat_database d
WHERE d.datname = current_database()
