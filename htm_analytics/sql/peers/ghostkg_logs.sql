SELECT id, agent_name, action_type, content, content_uuid, annotations, timestamp,
       sim_day, sim_hour
FROM logs
ORDER BY id
