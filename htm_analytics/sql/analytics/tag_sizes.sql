-- Nodes per topic in scope, optionally per period of node creation (%(unit)s NULL: no periods).
WITH {scoped}
SELECT st.topic AS tag,
       CASE WHEN %(unit)s::text IS NULL THEN NULL
            ELSE date_trunc(%(unit)s::text, s.created_at) END AS period,
       count(*) AS nodes
FROM scoped_topics st
JOIN scoped_nodes s ON s.id = st.node_id
GROUP BY 1, 2
