-- The end of both supersession statements (the full one and the sampled one), after their `pairs`
-- (node_a, node_b, shared_tags): each pair's cosine similarity where both vectors have one
-- dimension and one model (one label, as store.display.model_label, whichever of its names it is
-- recorded under; a vector stored without a model's name compares with any). Each vector is read
-- out of TOAST once, cut to its dimension (`vectors`), and each distance computed once
-- (`compared`): a distance in the filter on the stored columns read both padded vectors per pair
-- and per test.
vectors AS MATERIALIZED (
    SELECT n.id, n.embedding_dimension AS dimension, m.node_id IS NOT NULL AS named,
           {label} AS model_label,
           subvector(n.embedding, 1, n.embedding_dimension) AS embedding
    FROM nodes n LEFT JOIN node_embedding_models m ON m.node_id = n.id
    WHERE n.embedding_dimension IS NOT NULL
      AND n.id IN (SELECT node_a FROM pairs UNION SELECT node_b FROM pairs)),
compared AS MATERIALIZED (
    SELECT p.node_a, p.node_b, p.shared_tags,
           (1 - (va.embedding <=> vb.embedding))::float8 AS similarity
    FROM pairs p JOIN vectors va ON va.id = p.node_a JOIN vectors vb ON vb.id = p.node_b
    WHERE va.dimension = vb.dimension
      AND (NOT va.named OR NOT vb.named OR va.model_label = vb.model_label))
SELECT node_a, node_b, shared_tags, similarity FROM compared
WHERE similarity >= %(min_similarity)s AND similarity <= 1.000001
ORDER BY node_a, node_b
