-- Every stored tag and every ancestor its name implies, with node counts:
-- tagged_nodes carry the topic itself, direct_nodes carry it and nothing below it,
-- cumulative_nodes carry it or anything below it.
WITH RECURSIVE chain(tag_id, topic) AS (
    SELECT id, name FROM tags
    UNION
    SELECT tag_id, regexp_replace(topic, ':[^:]*$', '') FROM chain WHERE strpos(topic, ':') > 0
),
{scoped},
per_node AS (
    SELECT nt.node_id, c.topic,
           bool_or(c.topic = t.name) AS tagged_here,
           bool_or(c.topic <> t.name) AS tagged_below
    FROM node_tags nt
    JOIN scoped_nodes s ON s.id = nt.node_id
    JOIN tags t ON t.id = nt.tag_id
    JOIN chain c ON c.tag_id = nt.tag_id
    GROUP BY nt.node_id, c.topic
),
counts AS (
    SELECT topic,
           count(*) FILTER (WHERE tagged_here) AS tagged_nodes,
           count(*) FILTER (WHERE tagged_here AND NOT tagged_below) AS direct_nodes,
           count(*) AS cumulative_nodes
    FROM per_node GROUP BY topic
),
topics AS (
    SELECT DISTINCT c.topic, EXISTS (SELECT 1 FROM tags t WHERE t.name = c.topic) AS stored
    FROM chain c
    WHERE %(prefix)s::text IS NULL OR c.topic = %(prefix)s::text
       OR starts_with(c.topic, %(prefix)s::text || ':')
)
SELECT tp.topic AS tag,
       regexp_replace(tp.topic, '^.*:', '') AS name,
       length(tp.topic) - length(replace(tp.topic, ':', '')) + 1 AS depth,
       CASE WHEN strpos(tp.topic, ':') > 0
            THEN regexp_replace(tp.topic, ':[^:]*$', '') END AS parent,
       tp.stored,
       coalesce(c.tagged_nodes, 0) AS tagged_nodes,
       coalesce(c.direct_nodes, 0) AS direct_nodes,
       coalesce(c.cumulative_nodes, 0) AS cumulative_nodes
FROM topics tp
LEFT JOIN counts c ON c.topic = tp.topic
