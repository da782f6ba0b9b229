-- GhostKG entities with their FSRS state, one row per (owner, entity); read by the importer
-- (in key order, for streaming) and by the retrievability analysis.
SELECT owner_id, id, stability, difficulty, last_review, reps, state, created_at,
       sim_day, sim_hour
FROM nodes
ORDER BY owner_id, id
