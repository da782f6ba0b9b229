-- Nodes inside the caller's scope: created within the timeframe (inclusive, like BETWEEN)
-- and remembered by at least one of the given robots. NULL parameters mean "no filter".
-- Queries test `{in_scope:alias.node_id}`, which frames.load_analytics_query writes out as
-- `(start IS NULL AND end IS NULL AND robots IS NULL) OR node_id IN (SELECT id FROM
-- scoped_nodes)`: without a scope the test folds away at planning and no node is read. A
-- join to scoped_nodes read, materialized and hashed every node: 0.5-0.9 s of
-- robot_activity's 2 s at a million memories.
scoped_nodes AS (
    SELECT n.id, n.created_at
    FROM nodes n
    WHERE (%(start)s::timestamptz IS NULL OR n.created_at >= %(start)s::timestamptz)
      AND (%(end)s::timestamptz IS NULL OR n.created_at <= %(end)s::timestamptz)
      AND (%(robots)s::text[] IS NULL OR EXISTS (
            SELECT 1 FROM robot_nodes rn JOIN robots r ON r.id = rn.robot_id
            WHERE rn.node_id = n.id AND array_position(%(robots)s::text[], r.name) IS NOT NULL))
),
-- Tags of scoped nodes under the prefix, rolled up to their first %(level)s segments.
scoped_topics AS (
    SELECT DISTINCT nt.node_id,
           CASE WHEN %(level)s::integer IS NULL THEN t.name
                ELSE array_to_string((string_to_array(t.name, ':'))[1:%(level)s::integer], ':')
           END AS topic
    FROM node_tags nt
    JOIN tags t ON t.id = nt.tag_id
    JOIN scoped_nodes s ON s.id = nt.node_id
    WHERE %(prefix)s::text IS NULL OR t.name = %(prefix)s::text
       OR starts_with(t.name, %(prefix)s::text || ':')
)
