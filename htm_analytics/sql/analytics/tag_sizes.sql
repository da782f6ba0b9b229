-- Nodes per topic in scope, optionally per period of node creation (%(unit)s NULL: no periods).
-- Counted on integer topic ids and named afterwards. Without a level each (node, tag) row is
-- one node of its topic (node_tags is unique on node_id, tag_id); at a level, several tags
-- roll into one topic, so the node-topic pairs are made distinct first. Without a scope, no
-- node is looked up (the scope test folds away); nodes are read only for the periods.
WITH {scoped},
tag_topics AS (
    SELECT t.id AS tag_id,
           CASE WHEN %(level)s::integer IS NULL THEN t.name
                ELSE array_to_string((string_to_array(t.name, ':'))[1:%(level)s::integer], ':')
           END AS topic
    FROM tags t
    WHERE %(prefix)s::text IS NULL OR t.name = %(prefix)s::text
       OR starts_with(t.name, %(prefix)s::text || ':')
),
topic_ids AS (
    SELECT tag_id, topic, dense_rank() OVER (ORDER BY topic) AS topic_id FROM tag_topics
),
tagged AS (
    SELECT nt.node_id, ti.topic_id
    FROM node_tags nt JOIN topic_ids ti ON ti.tag_id = nt.tag_id
    WHERE {in_scope:nt.node_id}
),
node_topics AS (
    SELECT node_id, topic_id FROM tagged WHERE %(level)s::integer IS NULL
    UNION ALL
    SELECT DISTINCT node_id, topic_id FROM tagged WHERE %(level)s::integer IS NOT NULL
),
counts AS (
    -- Periods of UTC, whatever the session's time zone (a gem's local-time database reads in
    -- its writer's): as DuckDB's snapshot cuts them.
    SELECT nt.topic_id,
           date_trunc(%(unit)s::text, s.created_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
               AS period,
           count(*) AS nodes
    FROM node_topics nt
    LEFT JOIN scoped_nodes s ON %(unit)s::text IS NOT NULL AND s.id = nt.node_id
    GROUP BY 1, 2
)
SELECT n.topic AS tag, c.period, c.nodes
FROM counts c JOIN (SELECT DISTINCT topic_id, topic FROM topic_ids) n ON n.topic_id = c.topic_id
