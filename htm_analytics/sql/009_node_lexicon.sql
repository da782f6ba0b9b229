-- htm_analytics addition (the seed tables keep their columns): the distinct words of the
-- memories, with a trigram index (GiST: it returns a word's nearest words in distance order
-- without reading every word that shares a trigram). Typo-tolerant search matches the words
-- of a query against
-- this short list instead of against every memory's whole text (a query of a few words
-- shares 30 % of its trigrams with almost any long text, so the trigram index on
-- nodes.content cannot narrow such a search). Kept current for every writer by triggers:
-- words are added as memories are written and never removed (a word of a deleted memory only
-- costs a row).

CREATE TABLE IF NOT EXISTS public.node_lexicon (
    word text PRIMARY KEY
);

CREATE INDEX IF NOT EXISTS idx_node_lexicon_word_trgm
    ON public.node_lexicon USING gist (word gist_trgm_ops);

-- Words of 3 to 40 characters from the 'simple' parser (lower case, not stemmed), inserted
-- in sorted order so that concurrent writers take their row locks in the same order.
CREATE OR REPLACE FUNCTION public.htm_analytics_lexicon_words(content text)
RETURNS SETOF text LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog AS $$
    SELECT word FROM unnest(tsvector_to_array(to_tsvector('simple', content))) AS word
    WHERE length(word) BETWEEN 3 AND 40
$$;

-- SECURITY DEFINER with a fixed search_path, as every trigger function of the toolkit
-- (migration 007): another role writing nodes needs no right on the lexicon.
CREATE OR REPLACE FUNCTION public.htm_analytics_store_lexicon() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO public.node_lexicon (word)
    SELECT DISTINCT w FROM new_nodes, public.htm_analytics_lexicon_words(new_nodes.content) w
    ORDER BY w
    ON CONFLICT (word) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION public.htm_analytics_store_lexicon_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, public AS $$
BEGIN
    INSERT INTO public.node_lexicon (word)
    SELECT DISTINCT w FROM public.htm_analytics_lexicon_words(NEW.content) w ORDER BY w
    ON CONFLICT (word) DO NOTHING;
    RETURN NULL;
END
$$;

-- One set-based insert per statement for new memories (a bulk load is one statement); a
-- row trigger for the rare rewrite of a memory's content.
DROP TRIGGER IF EXISTS htm_analytics_lexicon ON public.nodes;
CREATE TRIGGER htm_analytics_lexicon
    AFTER INSERT ON public.nodes REFERENCING NEW TABLE AS new_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION public.htm_analytics_store_lexicon();

DROP TRIGGER IF EXISTS htm_analytics_lexicon_content ON public.nodes;
CREATE TRIGGER htm_analytics_lexicon_content
    AFTER UPDATE OF content ON public.nodes
    FOR EACH ROW EXECUTE FUNCTION public.htm_analytics_store_lexicon_row();

INSERT INTO public.node_lexicon (word)
SELECT DISTINCT w FROM public.nodes, public.htm_analytics_lexicon_words(nodes.content) w
ORDER BY w
ON CONFLICT (word) DO NOTHING;

-- Whoever may read the memory may read the lexicon and the other additions made since
-- migration 007 (the cache's generation counter of 006, the import records of 005); whoever
-- may write it may record imports.
DO $$
DECLARE
    grantee record;
BEGIN
    FOR grantee IN
        SELECT r.rolname,
               has_table_privilege(r.oid, 'public.nodes', 'INSERT') AS writes
        FROM pg_roles r
        WHERE NOT r.rolsuper AND r.rolname <> current_user AND r.rolname !~ '^pg_'
          AND has_table_privilege(r.oid, 'public.nodes', 'SELECT')
    LOOP
        EXECUTE format('GRANT SELECT ON public.node_lexicon, '
                       'public.htm_analytics_cache_generation, public.import_records TO %I',
                       grantee.rolname);
        IF grantee.writes THEN
            EXECUTE format('GRANT INSERT ON public.import_records TO %I', grantee.rolname);
        END IF;
    END LOOP;
END
$$;
