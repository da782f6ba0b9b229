-- Fact ids named by active 'contradiction' meta observations (supporting_fact_ids is a
-- JSON array of ids).
SELECT DISTINCT o.agent_id, jsonb_array_elements_text(o.supporting_fact_ids) AS fact_id
FROM memory_meta_observations o
WHERE o.observation_type = 'contradiction' AND coalesce(o.is_active, true)
  AND jsonb_typeof(o.supporting_fact_ids) = 'array'
