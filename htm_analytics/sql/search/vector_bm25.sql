-- Vector + BM25 fusion. Candidates: the %(depth)s nearest vectors (HNSW) and the bounded
-- lexical candidates. BM25 over all query lexemes (term frequencies from the stored tsvector,
-- document length = its distinct lexemes) is computed for all of them; the %(depth)s best by
-- BM25 and the vector candidates are then scored by
-- similarity + %(alpha)s * bm25 / (best bm25 among them), so that only about 2 x depth
-- vectors are read.
-- Filled in by the store: head (lexical_candidates.sql), distance, has_vector, timeframe,
-- columns, stats_table, stats_column.
WITH {head},
vector_candidates AS (
    SELECT n.id, 1 - ({distance}) AS similarity FROM nodes n WHERE {has_vector}{timeframe}
    ORDER BY {distance} LIMIT %(depth)s),
pool AS (
    SELECT id, content_tsv FROM text_candidates
    UNION ALL
    SELECT sv.node_id, sv.content_tsv
    FROM vector_candidates v JOIN node_search_vectors sv ON sv.node_id = v.id
    WHERE v.id NOT IN (SELECT id FROM text_candidates)),
average AS MATERIALIZED (
    SELECT coalesce((SELECT elem_count_histogram[cardinality(elem_count_histogram)]
                     FROM pg_stats
                     WHERE schemaname = 'public' AND tablename = {stats_table}
                       AND attname = {stats_column}), 50)::float8 AS lexemes),
lexical AS (
    SELECT p.id, sum(w.idf * t.tf * (%(k1)s + 1)
                     / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * length(p.content_tsv)
                                         / a.lexemes))) AS bm25
    FROM pool p CROSS JOIN average a
    CROSS JOIN LATERAL (
        -- Only the query's lexemes, with their positions: weight them A, keep the A's.
        SELECT u.lexeme, greatest(cardinality(u.positions), 1) AS tf
        FROM unnest(ts_filter(setweight(p.content_tsv, 'A',
                                        (SELECT array_agg(lexeme) FROM query_lexemes)),
                              ARRAY['a']::"char"[])) u) t
    JOIN weights w ON w.lexeme = t.lexeme
    GROUP BY p.id),
shortlist AS (
    SELECT id FROM (SELECT id FROM lexical ORDER BY bm25 DESC, id LIMIT %(depth)s) best
    UNION SELECT id FROM vector_candidates),
scored AS (
    SELECT {columns},
           coalesce(v.similarity,
                    CASE WHEN {has_vector} THEN 1 - ({distance}) END) AS similarity,
           coalesce(l.bm25, 0)::float8 AS bm25
    FROM shortlist s JOIN nodes n ON n.id = s.id
    LEFT JOIN vector_candidates v ON v.id = s.id LEFT JOIN lexical l ON l.id = s.id)
SELECT *, coalesce(similarity, 0)
          + %(alpha)s * bm25 / coalesce(nullif(max(bm25) OVER (), 0), 1) AS score
FROM scored
ORDER BY score DESC, id LIMIT %(limit)s
