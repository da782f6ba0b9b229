-- htm_analytics addition: a generation counter for the query cache. Every statement that can
-- change a search result (nodes added, deleted, re-embedded or re-dated; tags attached or
-- removed; tags renamed) bumps it, whoever the writer is, and each cached search is keyed by
-- the value read before it ran: a delete committed in another process is seen by the next
-- search in every process. One row per server process (its pid), so concurrent writers never
-- wait for each other; the generation is the sum of the rows, which a snapshot sees grow by
-- exactly the transactions committed before it.

CREATE TABLE IF NOT EXISTS public.htm_analytics_cache_generation (
    backend_pid integer PRIMARY KEY,
    writes bigint NOT NULL
);

-- SECURITY DEFINER: writers that may change nodes need no rights on this table.
CREATE OR REPLACE FUNCTION public.htm_analytics_bump_cache_generation() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO public.htm_analytics_cache_generation AS g (backend_pid, writes)
    VALUES (pg_backend_pid(), 1)
    ON CONFLICT (backend_pid) DO UPDATE SET writes = g.writes + 1;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS htm_analytics_cache_generation ON public.nodes;
CREATE TRIGGER htm_analytics_cache_generation
    AFTER INSERT OR DELETE OR UPDATE OF content, embedding, embedding_dimension, created_at
    ON public.nodes FOR EACH STATEMENT
    EXECUTE FUNCTION public.htm_analytics_bump_cache_generation();
DROP TRIGGER IF EXISTS htm_analytics_cache_generation_truncate ON public.nodes;
CREATE TRIGGER htm_analytics_cache_generation_truncate
    AFTER TRUNCATE ON public.nodes FOR EACH STATEMENT
    EXECUTE FUNCTION public.htm_analytics_bump_cache_generation();

DROP TRIGGER IF EXISTS htm_analytics_cache_generation ON public.node_tags;
CREATE TRIGGER htm_analytics_cache_generation
    AFTER INSERT OR DELETE OR UPDATE OR TRUNCATE ON public.node_tags FOR EACH STATEMENT
    EXECUTE FUNCTION public.htm_analytics_bump_cache_generation();

DROP TRIGGER IF EXISTS htm_analytics_cache_generation ON public.tags;
CREATE TRIGGER htm_analytics_cache_generation
    AFTER INSERT OR DELETE OR UPDATE OF name OR TRUNCATE ON public.tags FOR EACH STATEMENT
    EXECUTE FUNCTION public.htm_analytics_bump_cache_generation();
