-- htm_analytics addition: where nodes soft-deletes (the current gem's deleted_at), a forget or
-- restore bumps the query cache's generation too, whoever writes it. The gem's own forget also
-- updates node_tags, which migration 006 already watches; a writer that sets deleted_at on
-- nodes alone (plain SQL, another tool) was served from other processes' caches until their
-- entries expired (cache_ttl).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = 'public.nodes'::regclass AND attname = 'deleted_at'
                 AND NOT attisdropped) THEN
        EXECUTE 'DROP TRIGGER IF EXISTS htm_analytics_cache_generation ON public.nodes';
        EXECUTE 'CREATE TRIGGER htm_analytics_cache_generation
                     AFTER INSERT OR DELETE
                         OR UPDATE OF content, embedding, embedding_dimension, created_at,
                                      deleted_at
                     ON public.nodes FOR EACH STATEMENT
                     EXECUTE FUNCTION public.htm_analytics_bump_cache_generation()';
    END IF;
END
$$;
