-- Nodes by total remembers over all (or the given) robots. Aggregated on node_id alone,
-- then the top rows get their content: carrying content through the aggregate made its
-- hash table 4x larger (39 MB against 10 MB at 100k memories) and the statement 1.5-2x slower.
-- work_mem: 128MB (the node_id hash table: 61 MB at a million memories; under 32 MB the
-- planner reads a million rows in node order through their index instead: 1.27 against
-- 1.08 s there, median of three)
WITH {scoped},
reinforced AS (
    SELECT rn.node_id,
           sum(rn.remember_count)::bigint AS remembers,
           count(*) AS robots,
           min(rn.first_remembered_at) AS first_remembered_at,
           max(rn.last_remembered_at) AS last_remembered_at
    FROM robot_nodes rn
    JOIN robots r ON r.id = rn.robot_id
    WHERE (%(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL)
      AND {in_scope:rn.node_id}
    GROUP BY rn.node_id
    ORDER BY remembers DESC, rn.node_id
    LIMIT %(limit)s::bigint
)
SELECT n.id AS node_id, n.content, f.remembers, f.robots, f.first_remembered_at,
       f.last_remembered_at
FROM reinforced f
JOIN nodes n ON n.id = f.node_id
ORDER BY f.remembers DESC, n.id
