"""The statements of full-text and hybrid search, built from fixed fragments.

Only constants and validated choices reach these builders; user text is always a bound
parameter (``%(query)s``, ``%(q)s``, ``%(tags)s``...).
"""

from __future__ import annotations

import re

from psycopg import sql

from .._sql import read_sql
from ..errors import ValidationError
from ._common import SEARCH_COLUMNS
from ._vectors import distance_sql

__all__ = ["RRF_K", "HYBRID_SIMILARITY_WEIGHT", "HYBRID_TAG_WEIGHT", "MAX_QUERY_WORDS",
           "fulltext_text", "tsquery_sql", "tag_matches_sql", "hybrid_weighted_sql",
           "hybrid_rrf_sql", "lexical_statistics", "search_statement"]

RRF_K = 60
HYBRID_SIMILARITY_WEIGHT = 0.7
HYBRID_TAG_WEIGHT = 0.3

_TSQUERY = {
    "all": "plainto_tsquery('english', %(query)s)",
    # plainto_tsquery's lexemes joined by OR; the ::tsquery cast keeps them as stemmed.
    "any": "replace(plainto_tsquery('english', %(query)s)::text, ' & ', ' | ')::tsquery",
    "websearch": "websearch_to_tsquery('english', %(query)s)",
}


MAX_QUERY_WORDS = 4096
_WORD = re.compile(r"\w+")


def fulltext_text(query: str) -> str:
    """The query cut after its first ``MAX_QUERY_WORDS`` words, for the tsquery functions.

    A tsquery of tens of thousands of terms is a tree too deep for the server's stack
    ("stack depth limit exceeded"); its first 4,096 words are more than any ranking uses.
    """
    for count, match in enumerate(_WORD.finditer(query), start=1):
        if count == MAX_QUERY_WORDS:
            return query[:match.end()]
    return query


def tsquery_sql(match: str) -> str:
    """The tsquery expression of a ``match`` mode ("all", "any" or "websearch")."""
    try:
        return _TSQUERY[match]
    except (KeyError, TypeError):
        raise ValidationError(f"must be one of 'all', 'any', 'websearch', got {match!r}",
                              field="match") from None


def tag_matches_sql(where: str, condition: str = "") -> str:
    """The nodes carrying the most of the tags ``%(tags)s``: ``id`` and ``matches`` (how many
    of them), best first (ties by id), up to ``%(prefilter)s`` nodes ``n`` that pass
    ``condition`` (a fixed ``AND ...`` fragment) and the timeframe condition ``where``."""
    if where:
        # The timeframe's nodes first (idx_nodes_created_at), then their links.
        return f"""
            SELECT nt.node_id AS id, count(*) AS matches
            FROM node_tags nt JOIN tags t ON t.id = nt.tag_id JOIN nodes n ON n.id = nt.node_id
            WHERE t.name = ANY(%(tags)s::text[]){condition}{where}
            GROUP BY nt.node_id ORDER BY matches DESC, nt.node_id LIMIT %(prefilter)s"""
    # Every node: the links of the matching tags through idx_node_tags_tag_id (a join to
    # tags there led the planner to read every link and hash every node), counted, then
    # checked against `nodes` one by one in rank order until enough pass.
    return f"""
            SELECT a.id, a.matches FROM (
                SELECT nt.node_id AS id, count(*) AS matches FROM node_tags nt
                WHERE nt.tag_id = ANY(ARRAY(SELECT t.id FROM tags t
                                            WHERE t.name = ANY(%(tags)s::text[])))
                GROUP BY nt.node_id ORDER BY matches DESC, nt.node_id) a
            WHERE EXISTS (SELECT FROM nodes n WHERE n.id = a.id{condition})
            ORDER BY a.matches DESC, a.id LIMIT %(prefilter)s"""


def hybrid_weighted_sql(tsquery: str, where: str) -> str:
    return f"""
        WITH fulltext AS (
            SELECT n.id FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
            WHERE sv.content_tsv @@ q AND n.embedding IS NOT NULL{where}
            ORDER BY ts_rank(sv.content_tsv, q) DESC, n.id
            LIMIT %(prefilter)s),
        tagged AS ({tag_matches_sql(where, " AND n.embedding IS NOT NULL")}),
        candidates AS (SELECT id FROM fulltext UNION SELECT id FROM tagged),
        scored AS (
            SELECT {SEARCH_COLUMNS}, 1 - (n.embedding <=> %(q)s) AS similarity,
                   (SELECT count(DISTINCT nt.tag_id) FROM node_tags nt
                    JOIN tags t ON t.id = nt.tag_id
                    WHERE nt.node_id = n.id AND t.name = ANY(%(tags)s::text[]))::float8
                   / greatest(cardinality(%(tags)s::text[]), 1) AS tag_boost
            FROM candidates c JOIN nodes n ON n.id = c.id)
        SELECT *, {HYBRID_SIMILARITY_WEIGHT} * similarity + {HYBRID_TAG_WEIGHT} * tag_boost
                  AS combined_score
        FROM scored ORDER BY combined_score DESC, id LIMIT %(limit)s"""


def _timeframe_nodes(where: str) -> str:
    """The join of ``nodes n`` to the search vectors ``sv`` that the timeframe condition
    ``where`` needs, or nothing: every search vector has its node (and the read prefix hides
    a forgotten memory's with it), and joined anyway, a sort of the matches carries each
    one's whole tsvector."""
    return " JOIN nodes n ON n.id = sv.node_id" if where else ""


def hybrid_rrf_sql(tsquery: str, where: str, native_dimension: int | None) -> sql.Composed:
    distance, has_vector = distance_sql(native_dimension)
    nodes_join = _timeframe_nodes(where)
    return sql.SQL(f"""
        WITH vector_arm AS (
            SELECT id, row_number() OVER (ORDER BY distance, id) AS r FROM (
                SELECT n.id, {{distance}} AS distance FROM nodes n
                WHERE {{has_vector}}{where}
                ORDER BY {{distance}} LIMIT %(prefilter)s) s),
        fulltext_arm AS (
            SELECT id, row_number() OVER (ORDER BY rank DESC, id) AS r FROM (
                SELECT sv.node_id AS id, ts_rank(sv.content_tsv, q) AS rank
                FROM node_search_vectors sv{nodes_join}
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
                WHERE sv.content_tsv @@ q{where}
                ORDER BY rank DESC, sv.node_id LIMIT %(prefilter)s) s),
        tag_arm AS (
            SELECT id, row_number() OVER (ORDER BY matches DESC, id) AS r FROM (
                {tag_matches_sql(where)}) s),
        fused AS (
            SELECT id, sum(1.0 / ({RRF_K} + r))::float8 AS rrf_score,
                   min(r) FILTER (WHERE arm = 'v') AS vector_rank,
                   min(r) FILTER (WHERE arm = 'f') AS fulltext_rank,
                   min(r) FILTER (WHERE arm = 't') AS tag_rank
            FROM (SELECT id, r, 'v' AS arm FROM vector_arm
                  UNION ALL SELECT id, r, 'f' FROM fulltext_arm
                  UNION ALL SELECT id, r, 't' FROM tag_arm) arms
            GROUP BY id)
        SELECT {SEARCH_COLUMNS},
               CASE WHEN n.embedding IS NOT NULL THEN 1 - (n.embedding <=> %(q_padded)s) END
                   AS similarity,
               f.rrf_score, f.vector_rank, f.fulltext_rank, f.tag_rank
        FROM fused f JOIN nodes n ON n.id = f.id
        ORDER BY f.rrf_score DESC, n.id LIMIT %(limit)s""").format(
        distance=distance, has_vector=has_vector)


_QUERY_TEXT = sql.SQL("%(query)s")


def lexical_statistics(content_index: str | None) -> dict[str, sql.Composable]:
    """Where the bounded lexical searches read document frequencies: the statistics of
    ``node_search_vectors.content_tsv`` (the toolkit's additions), else, given its name, those
    PostgreSQL keeps for the seed's expression index ``to_tsvector('english', content)``
    (its column is named after the function), over the rows of ``nodes``."""
    if content_index is None:
        table, column, corpus = "node_search_vectors", "content_tsv", "public.node_search_vectors"
        uncounted: sql.Composable = sql.SQL("0")
    else:
        table, column, corpus = content_index, "to_tsvector", "public.nodes"
        # An index's statistics are shown to the table's owner only: other roles count the
        # lexeme's matches through the same index, up to the candidates' cap.
        uncounted = _CAPPED_MATCHES
    return {"stats_table": sql.Literal(table), "stats_column": sql.Literal(column),
            "corpus_table": sql.Literal(corpus), "uncounted": uncounted}


_CAPPED_MATCHES = sql.SQL(
    "(SELECT count(*) FROM (SELECT 1 FROM node_search_vectors m WHERE m.content_tsv @@ "
    "quote_literal(q.lexeme)::tsquery LIMIT %(cap)s) matches)")


def search_statement(name: str, timeframe: str, *, statistics: dict[str, sql.Composable],
                     query_text: sql.Composable = _QUERY_TEXT,
                     **parts: sql.Composable) -> sql.Composed:
    """A statement of ``sql/search/`` with the shared lexical head and ``parts`` filled in.

    ``query_text`` is the SQL expression whose words the head looks up (the query itself
    by default); ``statistics`` says where its document frequencies are
    (:func:`lexical_statistics`).
    """
    condition = sql.SQL(timeframe)  # a fixed fragment, not input
    head = sql.SQL(read_sql("search", "lexical_candidates.sql")).format(
        query_text=query_text, timeframe=condition,
        nodes_join=sql.SQL(_timeframe_nodes(timeframe)),
        **statistics)
    used = {k: v for k, v in statistics.items() if k in ("stats_table", "stats_column")}
    return sql.SQL(read_sql("search", f"{name}.sql")).format(
        head=head, timeframe=condition, columns=sql.SQL(SEARCH_COLUMNS), **parts, **used)
