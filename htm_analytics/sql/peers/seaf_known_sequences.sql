-- Tool sequences SEAF already knows: its composite tools and its learned workflow patterns.
SELECT 'composite_tool' AS kind, tool_name AS name, component_tools AS tools
FROM composite_tools
UNION ALL
SELECT 'workflow_pattern', pattern_name, tool_sequence FROM workflow_patterns
