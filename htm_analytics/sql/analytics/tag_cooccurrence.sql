-- Pairs of topics found on the same nodes, with the sizes needed for association measures.
-- A tag and its own ancestor always co-occur (tagging attaches ancestors): such pairs are left out.
-- Then one row per topic in scope, topic2 NULL, with its size in nodes1: the tag graph's nodes,
-- from the same pass.
-- work_mem: 256MB (the node-topic pairs, held once and joined with themselves: about 40 bytes
-- each, 4.5 million at a million memories tagged like the corpus)
--
-- Topics are numbered in tree order (ordering by the array of segments puts every topic right
-- before its subtree, contiguous, under any collation), so "b is below a" is
-- a.topic_id < b.topic_id <= a.last_id: the pairs are counted on integers, and a pair of a
-- topic and its descendant is never formed, with no string test per joined row. At a level,
-- the node-topic pairs are made distinct first (several tags roll into one topic); without a
-- level each (node, tag) row is already one (node_tags is unique on node_id, tag_id).
-- Sizes and the number of tagged nodes come from the same node-topic pairs. docs/benchmarks.md
-- shows the plans (bench_tag_sql.py).
WITH RECURSIVE {scoped},
tag_topics AS (
    SELECT t.id AS tag_id,
           CASE WHEN %(level)s::integer IS NULL THEN t.name
                ELSE array_to_string((string_to_array(t.name, ':'))[1:%(level)s::integer], ':')
           END AS topic
    FROM tags t
    WHERE %(prefix)s::text IS NULL OR t.name = %(prefix)s::text
       OR starts_with(t.name, %(prefix)s::text || ':')
),
topics AS (
    SELECT topic, dense_rank() OVER (ORDER BY string_to_array(topic, ':')) AS topic_id
    FROM (SELECT DISTINCT topic FROM tag_topics) named
),
-- every topic with each of its ancestors' names, to find where each subtree ends
chain(topic_id, prefix) AS (
    SELECT topic_id, topic FROM topics
    UNION ALL
    SELECT topic_id, regexp_replace(prefix, ':[^:]*$', '') FROM chain WHERE strpos(prefix, ':') > 0
),
subtrees AS (
    SELECT o.topic_id, max(c.topic_id) AS last_id
    FROM chain c JOIN topics o ON o.topic = c.prefix
    GROUP BY o.topic_id
),
tag_ids AS (
    SELECT tt.tag_id, o.topic_id, s.last_id
    FROM tag_topics tt
    JOIN topics o ON o.topic = tt.topic
    JOIN subtrees s ON s.topic_id = o.topic_id
),
tagged AS (
    SELECT nt.node_id, ti.topic_id, ti.last_id
    FROM node_tags nt JOIN tag_ids ti ON ti.tag_id = nt.tag_id
    WHERE (%(start)s::timestamptz IS NULL AND %(end)s::timestamptz IS NULL
           AND %(robots)s::text[] IS NULL)
       OR nt.node_id IN (SELECT id FROM scoped_nodes)
),
node_topics AS (
    SELECT node_id, topic_id, last_id FROM tagged WHERE %(level)s::integer IS NULL
    UNION ALL
    SELECT DISTINCT node_id, topic_id, last_id FROM tagged WHERE %(level)s::integer IS NOT NULL
),
sizes AS (
    SELECT topic_id, count(*) AS nodes FROM node_topics GROUP BY topic_id
),
universe AS (
    SELECT count(*) AS total_nodes FROM (SELECT DISTINCT node_id FROM node_topics) tagged_nodes
),
pairs AS (
    SELECT a.topic_id AS id1, b.topic_id AS id2, count(*) AS shared_nodes
    FROM node_topics a
    JOIN node_topics b ON b.node_id = a.node_id AND b.topic_id > a.last_id
    GROUP BY a.topic_id, b.topic_id
    HAVING count(*) >= %(min_shared)s::bigint
)
SELECT n1.topic AS topic1, n2.topic AS topic2, p.shared_nodes, s1.nodes AS nodes1,
       s2.nodes AS nodes2, u.total_nodes,
       p.shared_nodes::double precision / (s1.nodes + s2.nodes - p.shared_nodes) AS jaccard,
       p.shared_nodes::double precision * u.total_nodes
           / (s1.nodes::double precision * s2.nodes) AS lift
FROM pairs p
JOIN topics n1 ON n1.topic_id = p.id1
JOIN topics n2 ON n2.topic_id = p.id2
JOIN sizes s1 ON s1.topic_id = p.id1
JOIN sizes s2 ON s2.topic_id = p.id2
CROSS JOIN universe u
UNION ALL
SELECT n.topic, NULL::text, 0::bigint, s.nodes, 0::bigint, u.total_nodes,
       NULL::double precision, NULL::double precision
FROM sizes s JOIN topics n ON n.topic_id = s.topic_id CROSS JOIN universe u
