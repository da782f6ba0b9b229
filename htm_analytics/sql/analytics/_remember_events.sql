-- Every remember, ranked per node and per robot-node. A robot-node pair's remembers come from
-- the event log when the log holds exactly its remember_count of them; otherwise (remembers
-- written before the log existed, or by a writer it did not see) they are approximated from
-- robot_nodes: the first at first_remembered_at, the other remember_count - 1 at
-- last_remembered_at. history.exact says whether every pair agreed; missing_remembers is
-- sum(remember_count) minus the logged remembers of those pairs. Only the remembers of pairs
-- that are still there count: those of a memory deleted since, or soft-deleted (the current
-- gem's forget, which robot_nodes here leaves out), are left out as the memory is.
logged_pairs AS (
    SELECT robot_id, node_id, count(*) AS logged
    FROM memory_events WHERE kind = 'remember'
    GROUP BY robot_id, node_id
),
pairs AS (
    SELECT rn.robot_id, rn.node_id, rn.first_remembered_at, rn.last_remembered_at,
           rn.remember_count, coalesce(l.logged, 0) AS logged,
           coalesce(l.logged, 0) = rn.remember_count AS agrees
    FROM robot_nodes rn
    LEFT JOIN logged_pairs l ON l.robot_id = rn.robot_id AND l.node_id = rn.node_id
),
history AS (
    SELECT coalesce(bool_and(agrees), true) AS exact,
           coalesce(sum(remember_count - logged), 0)::bigint AS missing_remembers
    FROM pairs
),
raw_remembers AS (
    SELECT e.occurred_at, e.id AS seq, e.robot_id, e.node_id, 1::bigint AS weight
    FROM memory_events e
    WHERE e.kind = 'remember' AND EXISTS (
        SELECT 1 FROM pairs p
        WHERE p.robot_id = e.robot_id AND p.node_id = e.node_id AND p.agrees)
    UNION ALL
    SELECT p.first_remembered_at, 0, p.robot_id, p.node_id, 1::bigint
    FROM pairs p WHERE NOT p.agrees
    UNION ALL
    SELECT p.last_remembered_at, 1, p.robot_id, p.node_id, p.remember_count::bigint - 1
    FROM pairs p WHERE NOT p.agrees AND p.remember_count > 1
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
