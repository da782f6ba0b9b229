-- Every remember, ranked per node and per robot-node. From the event log when it has any
-- remember; otherwise (databases older than the log) approximated from robot_nodes: the first
-- remember at first_remembered_at and the other remember_count - 1 at last_remembered_at.
history AS (
    SELECT EXISTS (SELECT 1 FROM memory_events WHERE kind = 'remember') AS exact
),
raw_remembers AS (
    SELECT e.occurred_at, e.id AS seq, e.robot_id, e.node_id, 1::bigint AS weight
    FROM memory_events e WHERE e.kind = 'remember'
    UNION ALL
    SELECT rn.first_remembered_at, 0, rn.robot_id, rn.node_id, 1::bigint
    FROM robot_nodes rn, history h WHERE NOT h.exact
    UNION ALL
    SELECT rn.last_remembered_at, 1, rn.robot_id, rn.node_id, rn.remember_count::bigint - 1
    FROM robot_nodes rn, history h WHERE NOT h.exact AND rn.remember_count > 1
),
remembers AS (
    SELECT occurred_at, robot_id, node_id, weight,
           row_number() OVER (PARTITION BY node_id ORDER BY occurred_at, seq, robot_id) AS node_rank,
           row_number() OVER (PARTITION BY node_id, robot_id ORDER BY occurred_at, seq) AS robot_rank
    FROM raw_remembers
),
scoped_remembers AS (
    SELECT m.*, coalesce(r.name, '#' || m.robot_id::text) AS robot
    FROM remembers m
    LEFT JOIN robots r ON r.id = m.robot_id
    WHERE (%(start)s::timestamptz IS NULL OR m.occurred_at >= %(start)s::timestamptz)
      AND (%(end)s::timestamptz IS NULL OR m.occurred_at <= %(end)s::timestamptz)
      AND (%(robots)s::text[] IS NULL OR array_position(%(robots)s::text[], r.name) IS NOT NULL)
)
