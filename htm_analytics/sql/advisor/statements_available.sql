-- Whether pg_stat_statements can be read here: the extension exists in this database and the
-- library is loaded (the view raises an error otherwise).
SELECT to_regclass('pg_stat_statements') IS NOT NULL
       AND current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_stat_statements([ ,]|$)'
       AS available
