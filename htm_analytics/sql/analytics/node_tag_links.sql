-- The (node, tag) links of the nodes in scope with ids in [page_from, page_to), of the tags
-- under the prefix: the incidence matrix whose product with itself counts co-occurring tags
-- (analysis/cooccurrence.py), read a range of node ids at a time so that every link of a
-- node is in one page. idx_node_tags_unique (node_id, tag_id) serves a page.
WITH {scoped}
SELECT nt.node_id, nt.tag_id
FROM node_tags nt
WHERE nt.node_id >= %(page_from)s::bigint AND nt.node_id < %(page_to)s::bigint
  AND ((%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL
        AND %(robots)s::text[] IS NULL)
       OR nt.node_id IN (SELECT id FROM scoped_nodes))
  AND (%(prefix)s::text IS NULL
       OR nt.tag_id IN (SELECT t.id FROM tags t WHERE t.name = %(prefix)s::text
                        OR starts_with(t.name, %(prefix)s::text || ':')))
