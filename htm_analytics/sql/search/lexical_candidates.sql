-- Shared head of the bounded lexical searches: the query's lexemes, their document
-- frequencies estimated from the planner's statistics (ANALYZE keeps the most common lexemes
-- of node_search_vectors.content_tsv with their frequencies; a lexeme missing from that list
-- is rarer than the least frequent one kept), and the nodes matching the rarest lexemes up
-- to %(budget)s estimated matches (never fewer than the rarest lexeme's, never more than
-- %(cap)s rows). The store fills in query_text (the query, or the words fuzzy search corrected
-- it to), nodes_join and timeframe (a join of nodes n and a condition on it, or nothing), and
-- where the statistics are: stats_table and stats_column (node_search_vectors.content_tsv, or
-- on a database without the toolkit's additions the seed's expression index on nodes) and
-- corpus_table (the relation whose row count is the number of documents), and uncounted: the
-- document frequency of a lexeme when there are no statistics at all (0, or where statistics
-- may be out of this role's sight, a count of its matches up to %(cap)s).
query_lexemes AS (
    SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', {query_text}))),
statistics AS MATERIALIZED (
    SELECT most_common_elems::text::text[] AS lexemes, most_common_elem_freqs AS frequencies
    FROM pg_stats
    WHERE schemaname = 'public' AND tablename = {stats_table} AND attname = {stats_column}),
corpus AS (
    SELECT greatest(reltuples, 1)::float8 AS documents FROM pg_class
    WHERE oid = to_regclass({corpus_table})),
weights AS (
    SELECT q.lexeme, d.df,
           ln(1 + (c.documents - d.df + 0.5) / (d.df + 0.5)) AS idf
    FROM query_lexemes q CROSS JOIN corpus c
    LEFT JOIN statistics s ON true
    CROSS JOIN LATERAL (SELECT least(c.documents, coalesce(c.documents * coalesce(
        s.frequencies[array_position(s.lexemes, q.lexeme)],
        s.frequencies[cardinality(s.lexemes) + 1]),  -- the least frequency kept
        {uncounted})) AS df) d),
chosen AS (
    SELECT lexeme FROM (
        SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) - df AS rarer_matches
        FROM weights) w
    WHERE rarer_matches < %(budget)s),
text_candidates AS (
    SELECT sv.node_id AS id, sv.content_tsv
    FROM node_search_vectors sv{nodes_join}
    WHERE sv.content_tsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery
                             FROM chosen){timeframe}
    LIMIT %(cap)s)
