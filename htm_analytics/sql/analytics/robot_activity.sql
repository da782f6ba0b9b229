-- Per robot: its nodes, remembers, and how many of its nodes other robots remember too.
-- Shared nodes are a hashed set joined in, not a window over robot_nodes by node: the planner
-- fed that window through the node index, one buffer visit per row (3.6 s at a million
-- memories, against 2.7 s for this form; docs/benchmarks.md).
-- work_mem: 128MB (the shared-node aggregate's hash table: 74 MB at a million memories)
WITH {scoped},
shared AS (
    SELECT rn.node_id
    FROM robot_nodes rn
    WHERE {in_scope:rn.node_id}
    GROUP BY rn.node_id
    HAVING count(*) > 1
)
SELECT r.id AS robot_id, r.name AS robot, r.created_at, r.last_active,
       count(rn.node_id) AS nodes,
       coalesce(sum(rn.remember_count), 0)::bigint AS remembers,
       count(s.node_id) AS shared_nodes,
       min(rn.first_remembered_at) AS first_remembered_at,
       max(rn.last_remembered_at) AS last_remembered_at
FROM robots r
LEFT JOIN robot_nodes rn ON rn.robot_id = r.id AND {in_scope:rn.node_id}
LEFT JOIN shared s ON s.node_id = rn.node_id
WHERE %(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL
GROUP BY r.id, r.name, r.created_at, r.last_active
