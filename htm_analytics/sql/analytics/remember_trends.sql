-- Remembers per period (and per robot or topic): new content, content another robot already
-- had, and reinforcement of content the robot already had.
WITH {remember_events},
grouped AS (
    SELECT m.*,
           CASE %(by)s::text
               WHEN 'robot' THEN m.robot
               WHEN 'tag' THEN st.topic
           END AS grp
    FROM scoped_remembers m
    LEFT JOIN (
        SELECT DISTINCT nt.node_id,
               CASE WHEN %(level)s::integer IS NULL THEN t.name
                    ELSE array_to_string((string_to_array(t.name, ':'))[1:%(level)s::integer], ':')
               END AS topic
        FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
        WHERE %(by)s::text = 'tag'
          AND (%(prefix)s::text IS NULL OR t.name = %(prefix)s::text
               OR starts_with(t.name, %(prefix)s::text || ':'))
    ) st ON st.node_id = m.node_id
    WHERE %(by)s::text IS DISTINCT FROM 'tag' OR st.topic IS NOT NULL
)
-- Periods of UTC, whatever the session's time zone (a gem's local-time database reads in
-- its writer's): as DuckDB's snapshot cuts them.
SELECT date_trunc(%(unit)s::text, occurred_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS period,
       grp AS "group",
       sum(weight)::bigint AS remembers,
       count(*) FILTER (WHERE node_rank = 1) AS new_memories,
       count(*) FILTER (WHERE robot_rank = 1 AND node_rank > 1) AS shared_remembers,
       coalesce(sum(weight) FILTER (WHERE robot_rank > 1), 0)::bigint AS repeated_remembers,
       count(DISTINCT robot_id) AS active_robots,
       bool_and(h.exact) AS exact,
       max(h.missing_remembers) AS missing_remembers
FROM grouped, history h
GROUP BY 1, 2
