-- Pairs of topics found on the same nodes, with the sizes needed for association measures.
-- A tag and its own ancestor always co-occur (tagging attaches ancestors): such pairs are left out.
WITH {scoped},
sizes AS (
    SELECT topic, count(*) AS nodes FROM scoped_topics GROUP BY topic
),
universe AS (
    SELECT count(DISTINCT node_id) AS total_nodes FROM scoped_topics
),
pairs AS (
    SELECT a.topic AS topic1, b.topic AS topic2, count(*) AS shared_nodes
    FROM scoped_topics a
    JOIN scoped_topics b ON b.node_id = a.node_id AND a.topic < b.topic
    WHERE NOT starts_with(b.topic, a.topic || ':') AND NOT starts_with(a.topic, b.topic || ':')
    GROUP BY a.topic, b.topic
    HAVING count(*) >= %(min_shared)s::bigint
)
SELECT p.topic1, p.topic2, p.shared_nodes, s1.nodes AS nodes1, s2.nodes AS nodes2,
       u.total_nodes,
       p.shared_nodes::double precision / (s1.nodes + s2.nodes - p.shared_nodes) AS jaccard,
       p.shared_nodes::double precision * u.total_nodes
           / (s1.nodes::double precision * s2.nodes) AS lift
FROM pairs p
JOIN sizes s1 ON s1.topic = p.topic1
JOIN sizes s2 ON s2.topic = p.topic2
CROSS JOIN universe u
