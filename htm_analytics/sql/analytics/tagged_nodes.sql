-- Nodes in scope that carry at least one tag in scope.
WITH {scoped}
SELECT count(DISTINCT node_id) AS nodes FROM scoped_topics
