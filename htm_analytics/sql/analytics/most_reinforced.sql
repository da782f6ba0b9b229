-- Nodes by total remembers over all (or the given) robots.
WITH {scoped}
SELECT n.id AS node_id, n.content,
       sum(rn.remember_count)::bigint AS remembers,
       count(*) AS robots,
       min(rn.first_remembered_at) AS first_remembered_at,
       max(rn.last_remembered_at) AS last_remembered_at
FROM robot_nodes rn
JOIN robots r ON r.id = rn.robot_id
JOIN scoped_nodes s ON s.id = rn.node_id
JOIN nodes n ON n.id = rn.node_id
WHERE %(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL
GROUP BY n.id, n.content
ORDER BY remembers DESC, n.id
LIMIT %(limit)s::bigint
