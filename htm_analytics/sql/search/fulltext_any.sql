-- Any-word full text ranked by ts_rank over the bounded lexical candidates only.
-- Filled in by the store: head (lexical_candidates.sql), tsquery, columns.
WITH {head},
ranked AS (
    SELECT c.id, ts_rank(c.content_tsv, tsq.q) AS rank
    FROM text_candidates c CROSS JOIN (SELECT {tsquery} AS q) AS tsq
    ORDER BY rank DESC, c.id LIMIT %(limit)s)
SELECT {columns}, r.rank
FROM ranked r JOIN nodes n ON n.id = r.id
ORDER BY r.rank DESC, n.id
