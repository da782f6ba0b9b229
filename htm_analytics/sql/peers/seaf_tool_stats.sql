-- Success rate and latency per tool (latency over executions that report one).
SELECT tool_name,
       count(*) AS executions,
       count(*) FILTER (WHERE success) AS successes,
       avg(CASE WHEN success THEN 1.0 ELSE 0.0 END)::float8 AS success_rate,
       avg(execution_time_ms)::float8 AS latency_mean_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY execution_time_ms) AS latency_p50_ms,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY execution_time_ms) AS latency_p95_ms,
       count(DISTINCT session_id) AS sessions
FROM tool_executions
GROUP BY tool_name
ORDER BY executions DESC, tool_name
