-- Sequences owned by a column (serial or identity), how far they have come, which way they
-- go, and the largest and smallest values the column and the sequence can hold.
SELECT sn.nspname AS sequence_schema,
       s.relname AS sequence,
       tn.nspname AS schema,
       t.relname AS table,
       a.attname AS column,
       format_type(a.atttypid, a.atttypmod) AS column_type,
       coalesce(ps.last_value, ps.start_value) AS last_value,
       least(ps.max_value,
             CASE a.atttypid WHEN 'int2'::regtype THEN 32767
                             WHEN 'int4'::regtype THEN 2147483647
                             ELSE 9223372036854775807 END) AS max_value,
       greatest(ps.min_value,
                CASE a.atttypid WHEN 'int2'::regtype THEN -32768
                                WHEN 'int4'::regtype THEN -2147483648
                                ELSE -9223372036854775808 END) AS min_value,
       ps.increment_by
FROM pg_depend d
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_namespace sn ON sn.oid = s.relnamespace
JOIN pg_class t ON t.oid = d.refobjid
JOIN pg_namespace tn ON tn.oid = t.relnamespace
JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
JOIN pg_sequences ps ON ps.schemaname = sn.nspname AND ps.sequencename = s.relname
WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
  AND d.deptype IN ('a', 'i') AND t.relpersistence <> 't'
ORDER BY sn.nspname, s.relname
