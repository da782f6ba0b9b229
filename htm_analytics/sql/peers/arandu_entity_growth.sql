-- First fact per (agent, entity) and facts per period, for the growth of each agent's
-- entity graph.
SELECT f.agent_id, f.entity_key,
       date_trunc(%(unit)s, f.valid_from AT TIME ZONE 'UTC') AS period,
       count(*) AS facts
FROM memory_facts f
WHERE f.valid_from IS NOT NULL
GROUP BY 1, 2, 3
ORDER BY 1, 3, 2
