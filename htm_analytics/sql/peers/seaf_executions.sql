-- Tool executions in session order, for n-gram and promotion analyses.
SELECT session_id, execution_order, tool_name, success, execution_time_ms,
       "timestamp" AS executed_at
FROM tool_executions
ORDER BY session_id, execution_order, id
