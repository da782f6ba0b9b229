-- Supersession pairs with a sampled side: the same pairs as the full check
-- (shared_tag_pairs) restricted to those touching a sampled memory, without reading every
-- memory's tags. A sampled memory's specific tags are its deepest ones (no tag of the memory
-- below them) that 2 to %(max_tag_memories)s memories in scope hold as their deepest; the
-- holders of each are read through the tag's index and counted only up to one past the cap
-- (a tag held by more is not specific, however many more).
WITH sampled_leaves AS (
    SELECT nt.node_id, nt.tag_id
    FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
    WHERE nt.node_id = ANY(%(ids)s::bigint[])
      AND NOT EXISTS (SELECT 1 FROM node_tags deeper JOIN tags d ON d.id = deeper.tag_id
                      WHERE deeper.node_id = nt.node_id
                        AND starts_with(d.name, t.name || ':'))),
holders AS (
    SELECT c.tag_id, h.node_id
    FROM (SELECT DISTINCT tag_id FROM sampled_leaves) c
    CROSS JOIN LATERAL (
        SELECT nt.node_id FROM node_tags nt JOIN tags t ON t.id = nt.tag_id
        WHERE nt.tag_id = c.tag_id
          AND EXISTS (SELECT 1 FROM nodes n WHERE n.id = nt.node_id AND {scope})
          AND NOT EXISTS (SELECT 1 FROM node_tags deeper JOIN tags d ON d.id = deeper.tag_id
                          WHERE deeper.node_id = nt.node_id
                            AND starts_with(d.name, t.name || ':'))
        LIMIT %(max_tag_memories)s::bigint + 1) h),
specific AS (
    SELECT tag_id FROM holders GROUP BY tag_id
    HAVING count(*) BETWEEN 2 AND %(max_tag_memories)s::bigint),
pairs AS (
    SELECT least(s.node_id, h.node_id) AS node_a, greatest(s.node_id, h.node_id) AS node_b,
           array_agg(DISTINCT t.name ORDER BY t.name) AS shared_tags
    FROM sampled_leaves s
    JOIN specific USING (tag_id)
    JOIN holders h ON h.tag_id = s.tag_id AND h.node_id <> s.node_id
    JOIN tags t ON t.id = s.tag_id
    GROUP BY 1, 2),
{compared}
