-- Every index of the user schemas: key columns (with operator classes), predicate,
-- validity, usage and size; the advisor's unused, duplicate, invalid and HOT checks read it.
SELECT n.nspname AS schema,
       t.relname AS table,
       c.relname AS index,
       am.amname AS method,
       x.indisunique AS is_unique,
       x.indisprimary AS is_primary,
       x.indisvalid AS is_valid,
       ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, true)
             FROM generate_series(1, x.indnkeyatts) AS k ORDER BY k) AS key_columns,
       -- the columns of its keys, expressions and predicate: the index depends on each
       -- (a name matched in the expressions' text would be a pattern: "a(" breaks it)
       ARRAY(SELECT a.attname::text
             FROM pg_attribute a
             WHERE a.attrelid = x.indrelid AND a.attnum > 0
               AND (a.attnum = ANY (x.indkey::smallint[])
                    OR EXISTS (SELECT 1 FROM pg_depend d
                               WHERE d.classid = 'pg_class'::regclass
                                 AND d.objid = x.indexrelid
                                 AND d.refclassid = 'pg_class'::regclass
                                 AND d.refobjid = x.indrelid AND d.refobjsubid = a.attnum))
             ORDER BY a.attnum) AS referenced_columns,
       (x.indclass::oid[])[0:x.indnkeyatts - 1]::text AS operator_classes,
       coalesce(pg_get_expr(x.indpred, x.indrelid), '') AS predicate,
       coalesce(s.idx_scan, 0) AS idx_scan,
       pg_relation_size(x.indexrelid) AS size_bytes,
       EXISTS (SELECT 1 FROM pg_stat_progress_create_index p
               WHERE p.index_relid = x.indexrelid) AS being_built,
       pg_get_indexdef(x.indexrelid) AS definition
FROM pg_index x
JOIN pg_class c ON c.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
JOIN pg_am am ON am.oid = c.relam
LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = x.indexrelid
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
  AND t.relkind IN ('r', 'm', 'p')
ORDER BY n.nspname, t.relname, c.relname
