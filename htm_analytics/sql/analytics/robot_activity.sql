-- Per robot: its nodes, remembers, and how many of its nodes other robots remember too.
WITH {scoped},
membership AS (
    SELECT rn.robot_id, rn.node_id, rn.remember_count, rn.first_remembered_at,
           rn.last_remembered_at,
           count(*) OVER (PARTITION BY rn.node_id) > 1 AS shared
    FROM robot_nodes rn
    WHERE {in_scope:rn.node_id}
)
SELECT r.id AS robot_id, r.name AS robot, r.created_at, r.last_active,
       count(m.node_id) AS nodes,
       coalesce(sum(m.remember_count), 0)::bigint AS remembers,
       count(*) FILTER (WHERE m.shared) AS shared_nodes,
       min(m.first_remembered_at) AS first_remembered_at,
       max(m.last_remembered_at) AS last_remembered_at
FROM robots r
LEFT JOIN membership m ON m.robot_id = r.id
WHERE %(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL
GROUP BY r.id, r.name, r.created_at, r.last_active
