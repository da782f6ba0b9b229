-- The sampled memories' near-duplicates anywhere in the memory: each sampled memory's own vector
-- searched through the HNSW index that recall uses (one LATERAL top-{k} search per memory), and the
-- neighbours that reach %(min_similarity)s kept, itself left out. Both sides hold vectors of one
-- model group (as iter_vectors selects them: that model, by its label (as
-- store.display.model_label_sql) whichever of its names it is recorded under, plus the vectors stored
-- without a model when %(unnamed)s), and the neighbour is in scope. The search runs on public.nodes
-- itself, as the reachability check's does: the planner must see the index's own expression to walk
-- it.
SELECT q.id AS node_a, found.id AS node_b, found.similarity
FROM public.nodes q
LEFT JOIN node_embedding_models qm ON qm.node_id = q.id
CROSS JOIN LATERAL (
    SELECT n.id, (1 - ({distance}))::float8 AS similarity
    FROM public.nodes n
    WHERE {n_dimension} = {d}{live}
    ORDER BY {distance}
    LIMIT {k}
) found
LEFT JOIN node_embedding_models fm ON fm.node_id = found.id
WHERE q.id = ANY(%(ids)s::bigint[]) AND {q_dimension} = {d}
  AND found.id <> q.id
  AND found.similarity >= %(min_similarity)s
  AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = found.id AND {scope})
  AND ((qm.node_id IS NULL AND %(unnamed)s)
       OR ({qm_label} IS NOT DISTINCT FROM %(label)s::text
           AND qm.node_id IS NOT NULL))
  AND ((fm.node_id IS NULL AND %(unnamed)s)
       OR ({fm_label} IS NOT DISTINCT FROM %(label)s::text
           AND fm.node_id IS NOT NULL))
ORDER BY node_a, node_b
