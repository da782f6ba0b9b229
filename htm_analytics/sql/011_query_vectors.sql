-- htm_analytics addition (the HTM tables keep their columns): a bounded log of the query vectors
-- the toolkit's recall searched with, so that `htm-analytics collect` can measure the recall of
-- the live index on the questions really asked, not only on stored vectors (docs/history.md).
--
-- Bounded by construction: 1,000 rows at most. The n-th query logged takes slot n % 1000 and
-- replaces the one logged 1,000 queries before it; the table never grows past that.
--
-- Written only through htm_analytics_log_query_vector(), SECURITY DEFINER with a fixed
-- search_path as every function of the toolkit (migration 007): a role needs EXECUTE on it (granted
-- below to every role that may insert into nodes), nothing on the table. Nothing is added to the
-- HTM tables or to what other writers (the Ruby gem) run: no trigger, no column.

CREATE TABLE IF NOT EXISTS public.memory_query_vectors (
    slot integer PRIMARY KEY,
    query_id bigint NOT NULL,
    logged_at timestamp with time zone NOT NULL DEFAULT CURRENT_TIMESTAMP,
    robot_id bigint,
    embedding vector NOT NULL,
    CONSTRAINT memory_query_vectors_slot_check CHECK (slot >= 0 AND slot < 1000)
);

CREATE SEQUENCE IF NOT EXISTS public.memory_query_vectors_query_id_seq;

-- The query's own type resolves the vector type here, so the body needs nothing from pgvector's
-- schema (which may not be public).
CREATE OR REPLACE FUNCTION public.htm_analytics_log_query_vector(query vector, robot bigint)
RETURNS bigint LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
    INSERT INTO public.memory_query_vectors AS q (slot, query_id, robot_id, embedding)
    SELECT (s.n % 1000)::integer, s.n, robot, query
    FROM (SELECT nextval('public.memory_query_vectors_query_id_seq') AS n) AS s
    ON CONFLICT (slot) DO UPDATE
        SET query_id = EXCLUDED.query_id, logged_at = EXCLUDED.logged_at,
            robot_id = EXCLUDED.robot_id, embedding = EXCLUDED.embedding
    RETURNING q.query_id
$$;

REVOKE ALL ON FUNCTION public.htm_analytics_log_query_vector(vector, bigint) FROM PUBLIC;

DO $$
DECLARE
    grantee record;
BEGIN
    -- Whoever may read the memory may read the log; whoever may write it may log queries.
    FOR grantee IN
        SELECT r.rolname,
               has_table_privilege(r.oid, 'public.nodes', 'INSERT') AS writes
        FROM pg_roles r
        WHERE NOT r.rolsuper AND r.rolname <> current_user AND r.rolname !~ '^pg_'
          AND has_table_privilege(r.oid, 'public.nodes', 'SELECT')
    LOOP
        EXECUTE format('GRANT SELECT ON public.memory_query_vectors TO %I', grantee.rolname);
        IF grantee.writes THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION '
                           'public.htm_analytics_log_query_vector(vector, bigint) TO %I',
                           grantee.rolname);
        END IF;
    END LOOP;
END
$$;
