-- Arandu facts with their place in their supersedes chain: each chain starts at a fact that
-- supersedes nothing; version 1 is that root, and each UPDATE adds the next version.
WITH RECURSIVE chain AS (
    SELECT f.id, f.id AS root_id, 1 AS version
    FROM memory_facts f WHERE f.supersedes_fact_id IS NULL
    UNION ALL
    SELECT f.id, c.root_id, c.version + 1
    FROM memory_facts f JOIN chain c ON f.supersedes_fact_id = c.id
    WHERE c.version < 10000
)
SELECT f.id::text AS fact_id, f.agent_id, f.entity_key, f.entity_name, f.attribute_key,
       f.fact_text, f.supersedes_fact_id::text AS supersedes_fact_id,
       c.root_id::text AS chain_id, c.version,
       count(*) OVER (PARTITION BY c.root_id) AS chain_length,
       f.valid_from AT TIME ZONE 'UTC' AS valid_from, f.valid_to AT TIME ZONE 'UTC' AS valid_to,
       f.invalidated_at AT TIME ZONE 'UTC' AS invalidated_at,
       coalesce(f.is_stale, false) AS is_stale,
       -- An open validity interval ends at NULL, or at infinity for some writers.
       (coalesce(f.valid_to = 'infinity', true) AND f.invalidated_at IS NULL) AS is_active,
       f.confidence, coalesce(f.times_retrieved, 0) AS times_retrieved,
       f.last_confirmed_at AT TIME ZONE 'UTC' AS last_confirmed_at
FROM memory_facts f JOIN chain c ON c.id = f.id
ORDER BY f.agent_id, f.entity_key, c.root_id, c.version
