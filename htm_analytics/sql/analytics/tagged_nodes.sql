-- Nodes in scope that carry at least one tag in scope (each node once).
WITH {scoped},
tagged AS (
    SELECT nt.node_id
    FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
    WHERE (%(prefix)s::text IS NULL OR t.name = %(prefix)s::text
           OR starts_with(t.name, %(prefix)s::text || ':'))
      AND {in_scope:nt.node_id}
)
SELECT count(*) AS nodes FROM (SELECT DISTINCT node_id FROM tagged) distinct_nodes
