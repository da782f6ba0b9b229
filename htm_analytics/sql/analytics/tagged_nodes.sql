-- Nodes in scope that carry at least one tag in scope (each node once).
WITH {scoped},
tagged AS (
    SELECT nt.node_id
    FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
    WHERE (%(prefix)s::text IS NULL OR t.name = %(prefix)s::text
           OR starts_with(t.name, %(prefix)s::text || ':'))
      AND ((%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL
            AND %(robots)s::text[] IS NULL)
           OR nt.node_id IN (SELECT id FROM scoped_nodes))
)
SELECT count(*) AS nodes FROM (SELECT DISTINCT node_id FROM tagged) distinct_nodes
