-- Robot x robot: nodes both remember (the diagonal is each robot's own node count).
-- %(distinct_pairs)s keeps each unordered pair of distinct robots once (robot1 < robot2),
-- %(min_shared)s and %(top)s bound the result here, in the database: the full matrix has a
-- row for every ordered pair of robots, the square of their number.
-- A robot is its name here, as for the robots filter: robots registered under one name (names
-- are not unique in the table) are one robot, each node counted once for it. Names compare
-- by code point (COLLATE "C", DuckDB's order too), whatever the database's collation: the
-- pairs kept, their order and the top ones are then the same live and in a snapshot.
WITH {scoped},
membership AS (
    SELECT DISTINCT r.name, rn.node_id
    FROM robot_nodes rn
    JOIN robots r ON r.id = rn.robot_id
    WHERE (%(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL)
      AND r.name IS NOT NULL
      AND {in_scope:rn.node_id}
),
sizes AS (
    SELECT name, count(*) AS nodes FROM membership GROUP BY name
),
pairs AS (
    SELECT a.name AS name1, b.name AS name2, count(*) AS shared_nodes
    FROM membership a
    JOIN membership b ON b.node_id = a.node_id
        AND (NOT %(distinct_pairs)s::boolean OR a.name < b.name COLLATE "C")
    GROUP BY a.name, b.name
    HAVING count(*) >= %(min_shared)s::bigint
)
SELECT p.name1 AS robot1, p.name2 AS robot2, p.shared_nodes,
       s1.nodes AS nodes1, s2.nodes AS nodes2
FROM pairs p
JOIN sizes s1 ON s1.name = p.name1
JOIN sizes s2 ON s2.name = p.name2
ORDER BY p.shared_nodes DESC, p.name1 COLLATE "C", p.name2 COLLATE "C"
LIMIT %(top)s::bigint
