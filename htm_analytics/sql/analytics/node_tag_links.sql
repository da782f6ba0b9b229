-- The (node, tag) links of the nodes in scope with ids in [page_from, page_to), of the tags
-- under the prefix: the incidence matrix whose product with itself counts co-occurring tags
-- (analysis/cooccurrence.py), read a range of node ids at a time so that every link of a
-- node is in one page. idx_node_tags_unique (node_id, tag_id) serves a page.
-- The scope is _scoped_nodes.sql's, written out here with the page's bounds: that fragment's
-- scoped_nodes, referenced twice, is materialized whole, and so read once per page.
SELECT nt.node_id, nt.tag_id
FROM node_tags nt
WHERE nt.node_id >= %(page_from)s::bigint AND nt.node_id < %(page_to)s::bigint
  AND ((%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL
        AND %(robots)s::text[] IS NULL)
       OR EXISTS (
           SELECT 1 FROM nodes n
           WHERE n.id = nt.node_id
             AND n.id >= %(page_from)s::bigint AND n.id < %(page_to)s::bigint
             AND (%(start)s::timestamptz IS NULL OR n.created_at >= %(start)s::timestamptz)
             AND (%(end)s::timestamptz IS NULL OR n.created_at <= %(end)s::timestamptz)
             AND (%(robots)s::text[] IS NULL OR EXISTS (
                   SELECT 1 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
                   WHERE rn.node_id = n.id
                     AND array_position(%(robots)s::text[], r.name) IS NOT NULL))))
  AND (%(prefix)s::text IS NULL
       OR nt.tag_id IN (SELECT t.id FROM tags t WHERE t.name = %(prefix)s::text
                        OR starts_with(t.name, %(prefix)s::text || ':')))
