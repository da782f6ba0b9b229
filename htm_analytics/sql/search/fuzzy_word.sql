-- Typo-tolerant search bounded by the lexicon: each query word's nearest words in the
-- memories' vocabulary (node_lexicon, nearest first through its GiST trigram index;
-- pg_trgm.similarity_threshold set by the store), then the memories holding the rarest of
-- those words (the bounded lexical head, fed with the corrected words), a shortlist of them
-- by ts_rank of the corrected words, and that shortlist ranked by word_similarity of the
-- whole query to each memory's text.
-- Filled in by the store: head (lexical_candidates.sql), columns.
WITH query_words AS (
    SELECT DISTINCT w FROM public.htm_analytics_lexicon_words(%(query)s) w),
corrected AS (
    -- A word of the lexicon stands for itself; only an unknown word is looked up by
    -- trigrams (each nearest-word scan costs milliseconds on a large lexicon).
    SELECT coalesce(string_agg(word, ' '), '') AS words FROM (
        SELECT q.w AS word FROM query_words q
        WHERE EXISTS (SELECT FROM node_lexicon e WHERE e.word = q.w)
        UNION ALL
        SELECT l.word FROM query_words q CROSS JOIN LATERAL (
            SELECT word FROM node_lexicon WHERE word %% q.w
            ORDER BY word <-> q.w LIMIT %(neighbours)s) l
        WHERE NOT EXISTS (SELECT FROM node_lexicon e WHERE e.word = q.w)) c),
{head},
shortlist AS (
    SELECT c.id FROM text_candidates c CROSS JOIN (
        SELECT replace(plainto_tsquery('english', words)::text, ' & ', ' | ')::tsquery AS q
        FROM corrected) tsq
    ORDER BY ts_rank(c.content_tsv, tsq.q) DESC, c.id LIMIT %(shortlist)s),
scored AS (
    SELECT s.id, word_similarity(%(query)s, n.content) AS similarity
    FROM shortlist s JOIN nodes n ON n.id = s.id)
SELECT {columns}, s.similarity
FROM scored s JOIN nodes n ON n.id = s.id
WHERE s.similarity >= %(threshold)s
ORDER BY s.similarity DESC, n.id LIMIT %(limit)s
