-- Robot x robot: nodes both remember (the diagonal is each robot's own node count).
-- %(distinct_pairs)s keeps each unordered pair of distinct robots once (robot1 < robot2),
-- %(min_shared)s and %(top)s bound the result here, in the database: the full matrix has a
-- row for every ordered pair of robots, the square of their number.
WITH {scoped},
membership AS (
    SELECT rn.robot_id, r.name, rn.node_id
    FROM robot_nodes rn
    JOIN robots r ON r.id = rn.robot_id
    WHERE (%(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL)
      AND {in_scope:rn.node_id}
),
sizes AS (
    SELECT robot_id, count(*) AS nodes FROM membership GROUP BY robot_id
),
pairs AS (
    SELECT a.robot_id AS id1, b.robot_id AS id2, count(*) AS shared_nodes
    FROM membership a
    JOIN membership b ON b.node_id = a.node_id
        AND (NOT %(distinct_pairs)s::boolean OR a.name < b.name)
    GROUP BY a.robot_id, b.robot_id
    HAVING count(*) >= %(min_shared)s::bigint
)
SELECT r1.name AS robot1, r2.name AS robot2, p.shared_nodes,
       s1.nodes AS nodes1, s2.nodes AS nodes2
FROM pairs p
JOIN sizes s1 ON s1.robot_id = p.id1
JOIN sizes s2 ON s2.robot_id = p.id2
JOIN robots r1 ON r1.id = p.id1
JOIN robots r2 ON r2.id = p.id2
ORDER BY p.shared_nodes DESC, r1.name, r2.name
LIMIT %(top)s::bigint
