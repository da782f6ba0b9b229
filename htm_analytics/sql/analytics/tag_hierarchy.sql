-- Every stored tag and every ancestor its name implies, with node counts:
-- tagged_nodes carry the topic itself, direct_nodes carry it and nothing below it,
-- cumulative_nodes carry it or anything below it.
-- work_mem: 256MB (one sort of the node-tag rows in scope, by node then tree order: about
-- 50 bytes each, 4.5 million at a million memories tagged like the corpus)
--
-- Without a (node, topic) aggregate: topics are numbered in tree order (the array of
-- segments puts every topic right before its subtree, contiguous, under any collation), and
-- each node's tags are read in that order. The topics a tag brings to its node are its
-- ancestors-or-self numbered above the node's previous tag: the others are ancestors of the
-- previous tag too (its subtree holds this tag), so each (node, topic) is counted once. A
-- node carries its tag and nothing below it when its next tag lies past the tag's subtree.
-- The node-tag rows are then counted per (tag, previous tag, nothing below), a few rows per
-- tag, and only those are expanded to the ancestors.
WITH RECURSIVE chain(tag_id, topic) AS (
    SELECT id, name FROM tags
    WHERE %(prefix)s::text IS NULL OR name = %(prefix)s::text
       OR starts_with(name, %(prefix)s::text || ':')
    UNION
    SELECT tag_id, regexp_replace(topic, ':[^:]*$', '') FROM chain WHERE strpos(topic, ':') > 0
),
{scoped},
topics AS (
    SELECT topic, dense_rank() OVER (ORDER BY string_to_array(topic, ':')) AS topic_id
    FROM (SELECT DISTINCT topic FROM chain) named
),
ancestry AS (
    SELECT c.tag_id, o.topic_id FROM chain c JOIN topics o ON o.topic = c.topic
),
tag_ids AS (
    SELECT t.id AS tag_id, o.topic_id FROM tags t JOIN topics o ON o.topic = t.name
    WHERE t.id IN (SELECT tag_id FROM chain)
),
subtrees AS (
    SELECT a.topic_id, max(ti.topic_id) AS last_id
    FROM ancestry a JOIN tag_ids ti ON ti.tag_id = a.tag_id
    GROUP BY a.topic_id
),
node_tag_order AS (
    SELECT nt.tag_id, ti.topic_id,
           lag(ti.topic_id) OVER in_tree_order AS previous_id,
           lead(ti.topic_id) OVER in_tree_order AS next_id
    FROM node_tags nt JOIN tag_ids ti ON ti.tag_id = nt.tag_id
    WHERE {in_scope:nt.node_id}
    WINDOW in_tree_order AS (PARTITION BY nt.node_id ORDER BY ti.topic_id)
),
-- nodes per (tag, previous tag, whether a tag below it follows): a few rows per tag
per_tag AS (
    SELECT o.tag_id, o.topic_id, o.previous_id,
           o.next_id IS NULL OR o.next_id > s.last_id AS nothing_below, count(*) AS nodes
    FROM node_tag_order o JOIN subtrees s ON s.topic_id = o.topic_id
    GROUP BY 1, 2, 3, 4
),
counts AS (
    SELECT a.topic_id,
           sum(p.nodes) FILTER (WHERE a.topic_id = p.topic_id) AS tagged_nodes,
           sum(p.nodes) FILTER (WHERE a.topic_id = p.topic_id AND p.nothing_below)
               AS direct_nodes,
           sum(p.nodes) AS cumulative_nodes
    FROM per_tag p
    JOIN ancestry a ON a.tag_id = p.tag_id AND a.topic_id > coalesce(p.previous_id, 0)
    GROUP BY a.topic_id
)
SELECT tp.topic AS tag,
       regexp_replace(tp.topic, '^.*:', '') AS name,
       length(tp.topic) - length(replace(tp.topic, ':', '')) + 1 AS depth,
       CASE WHEN strpos(tp.topic, ':') > 0
            THEN regexp_replace(tp.topic, ':[^:]*$', '') END AS parent,
       EXISTS (SELECT 1 FROM tags t WHERE t.name = tp.topic) AS stored,
       coalesce(c.tagged_nodes, 0)::bigint AS tagged_nodes,
       coalesce(c.direct_nodes, 0)::bigint AS direct_nodes,
       coalesce(c.cumulative_nodes, 0)::bigint AS cumulative_nodes
FROM topics tp
LEFT JOIN counts c ON c.topic_id = tp.topic_id
WHERE %(prefix)s::text IS NULL OR tp.topic = %(prefix)s::text
   OR starts_with(tp.topic, %(prefix)s::text || ':')
