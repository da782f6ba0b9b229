-- How often content is reinforced: robot-node pairs (by robot) or nodes (all robots summed)
-- per remember count.
WITH {scoped},
counts AS (
    SELECT CASE WHEN %(by)s::text = 'robot' THEN r.name END AS grp,
           rn.node_id, sum(rn.remember_count)::bigint AS remember_count
    FROM robot_nodes rn
    JOIN robots r ON r.id = rn.robot_id
    WHERE (%(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL)
      AND {in_scope:rn.node_id}
    GROUP BY 1, 2
)
SELECT grp AS "group", remember_count, count(*) AS memories
FROM counts
GROUP BY grp, remember_count
