-- Whether pg_stat_statements can be read here: the extension exists in this database and the
-- library is loaded (the view raises an error otherwise): its settings exist only then, and
-- unlike shared_preload_libraries any role may read them.
SELECT to_regclass('pg_stat_statements') IS NOT NULL
       AND current_setting('pg_stat_statements.max', true) IS NOT NULL
       AS available
