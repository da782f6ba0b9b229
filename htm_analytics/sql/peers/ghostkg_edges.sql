SELECT owner_id, source, target, relation, weight, sentiment, created_at, sim_day, sim_hour
FROM edges
ORDER BY owner_id, source, target, relation
