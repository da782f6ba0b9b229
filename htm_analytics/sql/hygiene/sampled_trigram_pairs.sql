-- Pairs of a sampled memory and a memory without a vector, by pg_trgm similarity through the
-- trigram index (`%%`, at the threshold set for the transaction); memories with vectors are
-- paired by vector search (sampled_neighbours.sql). Two directions, so that the sampled
-- memories find every such pair the full check finds:
-- - a sampled memory without a vector against every memory in scope: one index probe per
--   sampled memory, so the cost follows the sample;
-- - a sampled memory with a vector against the memories without one: one probe per memory
--   without a vector (none in a memory whose every memory was embedded).
WITH sampled AS MATERIALIZED (
    SELECT id, content, embedding_dimension IS NULL AS vectorless
    FROM nodes WHERE id = ANY(%(ids)s::bigint[])),
vectorless AS MATERIALIZED (
    SELECT n.id, n.content FROM nodes n WHERE n.embedding_dimension IS NULL AND {scope})
SELECT q.id AS node_a, n.id AS node_b, similarity(q.content, n.content)::float8 AS similarity
FROM sampled q
JOIN nodes n ON n.content %% q.content AND n.id <> q.id
WHERE q.vectorless AND {scope}
  AND similarity(q.content, n.content) >= %(min_similarity)s
UNION ALL
SELECT q.id, v.id, similarity(q.content, v.content)::float8
FROM vectorless v
JOIN nodes q ON q.content %% v.content AND q.id <> v.id
WHERE q.id IN (SELECT id FROM sampled WHERE NOT vectorless)
  AND similarity(q.content, v.content) >= %(min_similarity)s
ORDER BY node_a, node_b
