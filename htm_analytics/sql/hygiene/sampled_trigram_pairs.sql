-- The sampled memories without a vector against every memory in scope, by pg_trgm
-- similarity through the trigram index (`%%`, at the threshold set for the transaction):
-- one index probe per sampled memory, so the cost follows the sample, not the memory.
SELECT q.id AS node_a, n.id AS node_b, similarity(q.content, n.content)::float8 AS similarity
FROM nodes q
JOIN nodes n ON n.content %% q.content AND n.id <> q.id
WHERE q.id = ANY(%(ids)s::bigint[]) AND q.embedding_dimension IS NULL
  AND {scope}
  AND similarity(q.content, n.content) >= %(min_similarity)s
ORDER BY node_a, node_b
