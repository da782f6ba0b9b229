-- Robot x robot: nodes both remember (the diagonal is each robot's own node count).
WITH {scoped},
membership AS (
    SELECT rn.robot_id, rn.node_id
    FROM robot_nodes rn JOIN scoped_nodes s ON s.id = rn.node_id
),
sizes AS (
    SELECT robot_id, count(*) AS nodes FROM membership GROUP BY robot_id
),
pairs AS (
    SELECT a.robot_id AS id1, b.robot_id AS id2, count(*) AS shared_nodes
    FROM membership a JOIN membership b ON b.node_id = a.node_id
    GROUP BY a.robot_id, b.robot_id
)
SELECT r1.name AS robot1, r2.name AS robot2, p.shared_nodes,
       s1.nodes AS nodes1, s2.nodes AS nodes2
FROM pairs p
JOIN sizes s1 ON s1.robot_id = p.id1
JOIN sizes s2 ON s2.robot_id = p.id2
JOIN robots r1 ON r1.id = p.id1
JOIN robots r2 ON r2.id = p.id2
WHERE %(robots)s::text[] IS NULL OR (array_position(%(robots)s::text[], r1.name) IS NOT NULL
                                     AND array_position(%(robots)s::text[], r2.name) IS NOT NULL)
