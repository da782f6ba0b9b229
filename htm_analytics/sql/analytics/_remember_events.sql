-- Every remember, ranked per node and per robot-node. A robot-node pair's remembers come from
-- the event log when the log holds exactly its remember_count of them; otherwise (remembers
-- written before the log existed, or by a writer it did not see) they are approximated from
-- robot_nodes: the first at first_remembered_at, the other remember_count - 1 at
-- last_remembered_at. history.exact says whether every pair agreed; missing_remembers is
-- sum(remember_count) minus the logged remembers of those pairs. Only the remembers of pairs
-- that are still there count: those of a memory deleted since, or soft-deleted (the current
-- gem's forget, which robot_nodes here leaves out), are left out as the memory is.
-- One sort of the log by pair and time gives each logged remember its pair's count and its
-- place in the pair (its rank within the robot-node, where the pair agrees); only the rank
-- within the node needs a second sort.
logged AS (
    SELECT e.occurred_at, e.id AS seq, e.robot_id, e.node_id,
           count(*) OVER (PARTITION BY e.node_id, e.robot_id) AS logged,
           row_number() OVER (PARTITION BY e.node_id, e.robot_id
                              ORDER BY e.occurred_at, e.id) AS pair_place
    FROM memory_events e
    WHERE e.kind = 'remember'
),
pair_remembers AS (
    -- Each pair of robot_nodes once per logged remember of it (once when it has none).
    SELECT rn.robot_id, rn.node_id, rn.remember_count, rn.first_remembered_at,
           rn.last_remembered_at, l.occurred_at, l.seq, l.pair_place,
           coalesce(l.logged, 0) AS logged,
           coalesce(l.logged, 0) = rn.remember_count AS agrees
    FROM robot_nodes rn
    LEFT JOIN logged l ON l.robot_id = rn.robot_id AND l.node_id = rn.node_id
),
history AS (
    SELECT coalesce(bool_and(agrees), true) AS exact,
           coalesce(sum(remember_count - logged), 0)::bigint AS missing_remembers
    FROM pair_remembers
    WHERE coalesce(pair_place, 1) = 1
),
raw_remembers AS (
    SELECT occurred_at, seq, robot_id, node_id, 1::bigint AS weight, pair_place AS robot_rank
    FROM pair_remembers
    WHERE agrees AND pair_place IS NOT NULL
    UNION ALL
    -- The approximation's two remembers, ranked within the pair as their times order them.
    SELECT first_remembered_at, 0, robot_id, node_id, 1::bigint,
           CASE WHEN remember_count > 1 AND (last_remembered_at < first_remembered_at
                OR (first_remembered_at IS NULL AND last_remembered_at IS NOT NULL))
                THEN 2 ELSE 1 END
    FROM pair_remembers
    WHERE NOT agrees AND coalesce(pair_place, 1) = 1
    UNION ALL
    SELECT last_remembered_at, 1, robot_id, node_id, remember_count::bigint - 1,
           CASE WHEN last_remembered_at < first_remembered_at
                OR (first_remembered_at IS NULL AND last_remembered_at IS NOT NULL)
                THEN 1 ELSE 2 END
    FROM pair_remembers
    WHERE NOT agrees AND coalesce(pair_place, 1) = 1 AND remember_count > 1
),
remembers AS (
    SELECT occurred_at, robot_id, node_id, weight, robot_rank,
           row_number() OVER (PARTITION BY node_id ORDER BY occurred_at, seq, robot_id) AS node_rank
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
