-- The lowest and highest node id and the number of nodes: how to cut the node ids into
-- pages of about the same number of nodes.
SELECT min(id) AS low, max(id) AS high, count(*) AS nodes FROM nodes
