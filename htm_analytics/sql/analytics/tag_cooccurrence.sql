-- Pairs of topics found on the same nodes, with the sizes needed for association measures.
-- A tag and its own ancestor always co-occur (tagging attaches ancestors): such pairs are left out.
-- The pairs are counted on integer topic ids (one per topic, numbered in the collation's order,
-- so id order is name order) and the names joined back after grouping: the self-join and its
-- hash aggregate move integers instead of strings, and the ancestor test runs once per pair,
-- not once per joined row. docs/benchmarks.md shows the plans (bench_tag_sql.py).
WITH {scoped},
tag_topics AS (
    SELECT t.id AS tag_id, x.topic, dense_rank() OVER (ORDER BY x.topic) AS topic_id
    FROM tags t
    CROSS JOIN LATERAL (SELECT CASE WHEN %(level)s::integer IS NULL THEN t.name
        ELSE array_to_string((string_to_array(t.name, ':'))[1:%(level)s::integer], ':')
        END AS topic) x
    WHERE %(prefix)s::text IS NULL OR t.name = %(prefix)s::text
       OR starts_with(t.name, %(prefix)s::text || ':')
),
topic_names AS (
    SELECT DISTINCT topic_id, topic FROM tag_topics
),
node_topics AS (
    SELECT DISTINCT nt.node_id, tt.topic_id
    FROM node_tags nt
    JOIN tag_topics tt ON tt.tag_id = nt.tag_id
    JOIN scoped_nodes s ON s.id = nt.node_id
),
sizes AS (
    SELECT topic_id, count(*) AS nodes FROM node_topics GROUP BY topic_id
),
universe AS (
    SELECT count(DISTINCT node_id) AS total_nodes FROM node_topics
),
pairs AS (
    SELECT a.topic_id AS id1, b.topic_id AS id2, count(*) AS shared_nodes
    FROM node_topics a
    JOIN node_topics b ON b.node_id = a.node_id AND a.topic_id < b.topic_id
    GROUP BY a.topic_id, b.topic_id
    HAVING count(*) >= %(min_shared)s::bigint
)
SELECT n1.topic AS topic1, n2.topic AS topic2, p.shared_nodes, s1.nodes AS nodes1,
       s2.nodes AS nodes2, u.total_nodes,
       p.shared_nodes::double precision / (s1.nodes + s2.nodes - p.shared_nodes) AS jaccard,
       p.shared_nodes::double precision * u.total_nodes
           / (s1.nodes::double precision * s2.nodes) AS lift
FROM pairs p
JOIN topic_names n1 ON n1.topic_id = p.id1
JOIN topic_names n2 ON n2.topic_id = p.id2
JOIN sizes s1 ON s1.topic_id = p.id1
JOIN sizes s2 ON s2.topic_id = p.id2
CROSS JOIN universe u
WHERE NOT starts_with(n2.topic, n1.topic || ':') AND NOT starts_with(n1.topic, n2.topic || ':')
