-- Vector + BM25 fusion, the default recall. Candidates: the %(depth)s nearest vectors (HNSW)
-- and the bounded lexical candidates. BM25 over all query lexemes (term frequencies from the
-- stored tsvector, document length = its distinct lexemes) ranks the lexical ones; the
-- %(depth)s best by BM25, the vector candidates and the memory remembered just after each of
-- the best by BM25 are shortlisted (so that only about 3 x depth vectors are read). In a
-- conversation the answer often holds no word of the question while the turn before it does,
-- so a shortlisted memory is read with the memory remembered just before it, whose words count
-- %(context)s times in its BM25; and its final score adds %(neighbour_weight)s x the best own
-- score of the memories just before and after it.
-- Filled in by the store: head (lexical_candidates.sql), distance, has_vector, timeframe,
-- columns, stats_table, stats_column.
WITH {head},
vector_candidates AS (
    SELECT n.id, 1 - ({distance}) AS similarity FROM nodes n WHERE {has_vector}{timeframe}
    ORDER BY {distance} LIMIT %(depth)s),
pool AS (
    SELECT id, content_tsv FROM text_candidates
    UNION ALL
    SELECT sv.node_id, sv.content_tsv
    FROM vector_candidates v JOIN node_search_vectors sv ON sv.node_id = v.id
    WHERE v.id NOT IN (SELECT id FROM text_candidates)),
average AS MATERIALIZED (
    SELECT coalesce((SELECT elem_count_histogram[cardinality(elem_count_histogram)]
                     FROM pg_stats
                     WHERE schemaname = 'public' AND tablename = {stats_table}
                       AND attname = {stats_column}), 50)::float8 AS lexemes),
-- BM25 of a memory's own words (term frequencies from the stored positions: weight the
-- query's lexemes A, keep the A's).
own_lexical AS (
    SELECT p.id, sum(w.idf * t.tf * (%(k1)s + 1)
                     / (t.tf + %(k1)s * (1 - %(b)s + %(b)s * length(p.content_tsv)
                                         / a.lexemes))) AS bm25
    FROM pool p CROSS JOIN average a
    CROSS JOIN LATERAL (
        SELECT u.lexeme, greatest(cardinality(u.positions), 1) AS tf
        FROM unnest(ts_filter(setweight(p.content_tsv, 'A',
                                        (SELECT array_agg(lexeme) FROM query_lexemes)),
                              ARRAY['a']::"char"[])) u) t
    JOIN weights w ON w.lexeme = t.lexeme
    GROUP BY p.id),
best_lexical AS (
    SELECT id FROM own_lexical ORDER BY bm25 DESC, id LIMIT %(depth)s),
-- The memory remembered just after each of the best by BM25, at most %(neighbour_gap)s later
-- (the turn after it in a conversation: its context holds the query's words). Memories
-- remembered at the same instant (one bulk import) have no order, and none comes after another.
followers AS (
    SELECT f.id
    FROM best_lexical b JOIN nodes bn ON bn.id = b.id
    CROSS JOIN LATERAL (
        SELECT n.id FROM nodes n
        WHERE n.created_at > bn.created_at
          AND n.created_at <= bn.created_at + %(neighbour_gap)s::interval{timeframe}
        ORDER BY n.created_at, n.id LIMIT 1) f
    WHERE %(context)s > 0),
shortlist AS (
    SELECT id FROM best_lexical UNION SELECT id FROM vector_candidates
    UNION SELECT id FROM followers),
-- The memories remembered just before and just after each shortlisted one, at most
-- %(neighbour_gap)s away: the turns around it.
around AS MATERIALIZED (
    SELECT s.id,
           (SELECT n.id FROM nodes n
            WHERE n.created_at < sn.created_at
              AND n.created_at >= sn.created_at - %(neighbour_gap)s::interval{timeframe}
            ORDER BY n.created_at DESC, n.id DESC LIMIT 1) AS before,
           (SELECT n.id FROM nodes n
            WHERE %(neighbour_weight)s > 0 AND n.created_at > sn.created_at
              AND n.created_at <= sn.created_at + %(neighbour_gap)s::interval{timeframe}
            ORDER BY n.created_at, n.id LIMIT 1) AS after
    FROM shortlist s JOIN nodes sn ON sn.id = s.id
    WHERE %(neighbour_weight)s > 0 OR %(context)s > 0),
-- BM25 of each shortlisted memory read with the one remembered just before it, whose words
-- and length count %(context)s times; a memory with none before it keeps its own BM25.
lexical AS (
    SELECT o.id, o.bm25 FROM own_lexical o
    WHERE o.id IN (SELECT id FROM shortlist)
      AND NOT EXISTS (SELECT 1 FROM around r
                      WHERE r.id = o.id AND r.before IS NOT NULL AND %(context)s > 0)
    UNION ALL
    SELECT r.id, sum(w.idf * t.tf * (%(k1)s + 1)
                     / (t.tf + %(k1)s * (1 - %(b)s + %(b)s
                                         * (length(sv.content_tsv)
                                            + %(context)s * length(bsv.content_tsv))
                                         / a.lexemes))) AS bm25
    FROM around r JOIN node_search_vectors sv ON sv.node_id = r.id
    JOIN node_search_vectors bsv ON bsv.node_id = r.before CROSS JOIN average a
    CROSS JOIN LATERAL (
        SELECT u.lexeme, sum(u.tf) AS tf FROM (
            SELECT e.lexeme, greatest(cardinality(e.positions), 1)::float8 AS tf
            FROM unnest(ts_filter(setweight(sv.content_tsv, 'A',
                                            (SELECT array_agg(lexeme) FROM query_lexemes)),
                                  ARRAY['a']::"char"[])) e
            UNION ALL
            SELECT e.lexeme, %(context)s * greatest(cardinality(e.positions), 1)
            FROM unnest(ts_filter(setweight(bsv.content_tsv, 'A',
                                            (SELECT array_agg(lexeme) FROM query_lexemes)),
                                  ARRAY['a']::"char"[])) e) u
        GROUP BY u.lexeme) t
    JOIN weights w ON w.lexeme = t.lexeme
    WHERE %(context)s > 0
    GROUP BY r.id),
scored AS (
    SELECT {columns},
           coalesce(v.similarity,
                    CASE WHEN {has_vector} THEN 1 - ({distance}) END) AS similarity,
           coalesce(l.bm25, 0)::float8 AS bm25
    FROM shortlist s JOIN nodes n ON n.id = s.id
    LEFT JOIN vector_candidates v ON v.id = s.id LEFT JOIN lexical l ON l.id = s.id),
adjacent AS (
    SELECT id, before AS neighbour FROM around
    WHERE %(neighbour_weight)s > 0 AND before IS NOT NULL
    UNION ALL
    SELECT id, after FROM around WHERE after IS NOT NULL),
-- A neighbour that is not a candidate is scored on its vector alone (it holds none of the
-- rarest query words and is not among the best by BM25).
everyone AS (
    SELECT * FROM scored
    UNION ALL
    SELECT {columns}, CASE WHEN {has_vector} THEN 1 - ({distance}) END, 0::float8
    FROM nodes n
    WHERE n.id IN (SELECT neighbour FROM adjacent) AND n.id NOT IN (SELECT id FROM scored)),
-- A memory's own score: similarity + %(alpha)s x its BM25 / the best BM25; %(speaker_boost)s more
-- when a robot the question names (every word of the robot's name in it) remembered it ("When
-- did Caroline ..." asks about what Caroline said), %(date_boost)s more when it was remembered
-- on a date the question names (found by the store, as UTC ranges).
named_robots AS MATERIALIZED (
    SELECT r.id FROM robots r
    WHERE %(speaker_boost)s > 0 AND r.name ~ '[[:alnum:]]'
      -- only the robots the store found under a word of the question (NULL: every robot),
      -- and newer ones
      AND (%(speakers)s::bigint[] IS NULL OR r.id = ANY(%(speakers)s::bigint[])
           OR r.id > %(speakers_newest)s)
      AND to_tsvector('simple', %(query)s) @@ plainto_tsquery('simple', r.name)),
own_scores AS (
    SELECT e.*, coalesce(e.similarity, 0)
                + %(alpha)s * e.bm25 / coalesce(nullif(max(e.bm25) OVER (), 0), 1)
                + CASE WHEN EXISTS (SELECT 1 FROM robot_nodes rn
                                    WHERE rn.node_id = e.id
                                      AND rn.robot_id IN (SELECT id FROM named_robots))
                       THEN %(speaker_boost)s ELSE 0 END
                + CASE WHEN EXISTS (SELECT 1 FROM unnest(%(date_from)s::timestamptz[],
                                                         %(date_to)s::timestamptz[]) d(f, t)
                                    WHERE e.created_at >= d.f AND e.created_at < d.t)
                       THEN %(date_boost)s ELSE 0 END AS own_score
    FROM everyone e),
best_neighbour AS (
    SELECT p.id, max(m.own_score) AS score
    FROM (SELECT id, neighbour FROM adjacent UNION SELECT neighbour, id FROM adjacent) p
    JOIN own_scores m ON m.id = p.neighbour
    GROUP BY p.id)
-- A memory's score: its own, plus %(neighbour_weight)s x the best of its neighbours'.
SELECT o.id, o.content, o.access_count, o.created_at, o.token_count, o.similarity, o.bm25,
       o.own_score + %(neighbour_weight)s * coalesce(b.score, 0) AS score
FROM own_scores o LEFT JOIN best_neighbour b ON b.id = o.id
ORDER BY score DESC, id LIMIT %(limit)s
