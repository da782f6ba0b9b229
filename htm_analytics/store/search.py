"""Search: vector, full text, fuzzy, hybrid, and the one vocabulary of strategies by name."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal, cast, get_args

import numpy as np
import psycopg
from psycopg import sql

from .._docs import share_docs
from ..errors import ValidationError
from ..validation import (
    validate_content,
    validate_flag,
    validate_number,
    validate_positive_int,
    validate_timeframe,
)
from ._common import (
    MAX_LIMIT,
    SEARCH_COLUMNS,
    TIMEFRAME,
    TextMatch,
    Timeframe,
    bind_timeframe,
)
from ._search_sql import fulltext_text, hybrid_rrf_sql, hybrid_weighted_sql, tsquery_sql
from ._vectors import distance_sql, query_vector, service_key
from .cached_search import CachedSearchMixin
from .display import SearchResults
from .lexical import (
    FUZZY_WORD_SETTINGS,
    FUZZY_WORD_SIMILARITY,
    fulltext_any_statement,
    fuzzy_word_statement,
)
from .search_pool import DEFAULT_EF_SEARCH
from .tagging import matching_tags

__all__ = ["SearchMixin", "SearchStrategy", "SEARCH_STRATEGIES", "VECTOR_STRATEGIES",
           "check_strategy"]

SearchStrategy = Literal["vector", "fulltext", "fulltext_any", "fuzzy", "hybrid", "rrf",
                         "vector_bm25"]
"""Every search by name, as :meth:`LongTermMemory.search_by_strategy` runs it."""

SEARCH_STRATEGIES: tuple[SearchStrategy, ...] = get_args(SearchStrategy)
VECTOR_STRATEGIES: frozenset[SearchStrategy] = frozenset({"vector", "hybrid", "rrf",
                                                           "vector_bm25"})
"""The strategies that need a query vector (``embedding`` or ``embedding_service``)."""


@lru_cache(maxsize=64)
def _vector_statement(native_dimension: int | None, filtered: bool) -> str:
    """The vector search statement, composed once per (index, timeframe or not)."""
    distance, has_vector = distance_sql(native_dimension)
    timeframe = sql.SQL(TIMEFRAME if filtered else "")
    return sql.SQL("""
            SELECT {columns}, 1 - ({distance}) AS similarity
            FROM nodes n WHERE {has_vector}{timeframe}
            ORDER BY {distance} LIMIT %(limit)s""").format(
        columns=sql.SQL(SEARCH_COLUMNS), distance=distance, has_vector=has_vector,
        timeframe=timeframe).as_string(None)


def check_strategy(strategy: Any) -> SearchStrategy:
    """``strategy`` if it names a search of :data:`SEARCH_STRATEGIES`."""
    if strategy not in SEARCH_STRATEGIES:
        raise ValidationError(f"must be one of {', '.join(SEARCH_STRATEGIES)}, got "
                              f"{strategy!r}", field="strategy")
    return cast(SearchStrategy, strategy)


class SearchMixin(CachedSearchMixin):
    """Every search, and every search by name (see :class:`~htm_analytics.LongTermMemory`)."""

    @share_docs
    def search(
        self,
        *,
        query: str | None = None,
        limit: int = 20,
        timeframe: Timeframe = None,
        embedding_service: Any = None,
        embedding: Sequence[float] | np.ndarray | None = None,
    ) -> SearchResults:
        """Vector similarity search (cosine) through the HNSW index.

        Parameters
        ----------
        query : str
            Text to embed with ``embedding_service``.
        limit : int
            Most results, 1 to 1000. ``hnsw.ef_search`` is raised to at least ``limit`` for
            this query, since an HNSW scan returns at most ``ef_search`` rows.
        timeframe : (start, end), optional
            Only nodes whose ``created_at`` is in the range. The filter runs with pgvector's
            iterative scan (``relaxed_order``) so that it does not starve the result.
        %(search_vectors)s

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``similarity`` (``1 - cosine distance``), most similar first. Searching does not
            count as an access (see :meth:`track_access`).
        """
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        if embedding is None:
            query = validate_content(query, field="query")
        target = query_vector(self, query, embedding, embedding_service)
        key = ("search", query if embedding is None else target.key, limit, frame,
               service_key(embedding_service) if embedding is None else None)
        params: dict[str, Any] = {"limit": limit, "q": target.parameter}
        bind_timeframe(params, frame)
        rows = self._cached_search(
            key, _vector_statement(target.native_dimension, frame is not None), params,
            ef_search=max(DEFAULT_EF_SEARCH, limit), filtered=frame is not None)
        if frame:  # relaxed_order may return neighbours slightly out of order
            rows.sort(key=lambda r: -r["similarity"])
        rows.query_vector = target.values
        return rows

    @share_docs
    def search_fulltext(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        match: TextMatch = "all",
    ) -> SearchResults:
        """Full-text search with PostgreSQL's English text search (GIN index).

        Parameters
        ----------
        query : str
            Words to look for.
        %(search_limit)s
        %(search_timeframe)s
        match : {"all", "any", "websearch"}
            ``"all"`` (the reference behaviour, ``plainto_tsquery``) needs every word;
            ``"any"`` needs one and ranks by how many match, which finds far more on natural
            questions; it ranks the memories holding the query's rarest words (about
            ``LEXICAL_BUDGET`` expected matches, from PostgreSQL's lexeme statistics) rather
            than every match, so common words do not make it slow; ``"websearch"``
            understands quotes, ``or`` and ``-``.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``rank`` (``ts_rank``), best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        tsquery = tsquery_sql(match)
        key = ("search_fulltext", query, limit, frame, match)
        if match == "any":  # rank a bounded candidate set, not every match
            return self._cached_read(key, *fulltext_any_statement(self, query, limit, frame))
        params: dict[str, Any] = {"query": fulltext_text(query), "limit": limit}
        where = bind_timeframe(params, frame)
        statement = f"""
            SELECT {SEARCH_COLUMNS}, ts_rank(sv.content_tsv, q) AS rank
            FROM nodes n JOIN node_search_vectors sv ON sv.node_id = n.id
                CROSS JOIN (SELECT {tsquery} AS q) AS tsq
            WHERE sv.content_tsv @@ q{where}
            ORDER BY rank DESC, n.id LIMIT %(limit)s"""
        return self._cached_read(key, statement, params)

    @share_docs
    def search_fuzzy(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        threshold: float = 0.3,
        method: Literal["word", "whole"] = "word",
        exhaustive: bool = False,
    ) -> SearchResults:
        """Typo-tolerant search with pg_trgm trigrams (GIN trigram index).

        With the toolkit's lexicon installed (``node_lexicon``, the memories' distinct words
        with a trigram index; ``htm-analytics init-db``), ``method="word"`` first corrects
        each query word to its nearest words of the lexicon and scores only the memories
        holding the rarest of those, so it stays fast on long memories, where every long
        text shares a third of its trigrams with a short query and the index cannot narrow
        the search. ``exhaustive=True``, or a database without the lexicon, scores every
        memory the trigram index lets through instead: exact, and seconds per query on tens
        of thousands of long memories.

        Parameters
        ----------
        query : str
            Text to match, typos and all ("semantic retreval").
        %(search_limit)s
        %(search_timeframe)s
        threshold : float
            Lowest trigram similarity kept, in (0, 1].
        method : {"word", "whole"}
            ``"word"`` scores the best-matching stretch of the content
            (``word_similarity``, operator ``<%``), right for a short query against long
            memories; ``"whole"`` compares the whole content (``similarity``, operator ``%``).
        exhaustive : bool
            Score every memory the trigram index lets through, even where the lexicon could
            bound the search.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count`` and
            ``similarity`` (0 to 1), best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        threshold = validate_number(threshold, field="threshold", minimum=0, exclusive=True,
                                    maximum=1)
        if method == "word":
            setting, score, test = ("pg_trgm.word_similarity_threshold",
                                    "word_similarity(%(query)s, n.content)",
                                    "%(query)s <%% n.content")
        elif method == "whole":
            setting, score, test = ("pg_trgm.similarity_threshold",
                                    "similarity(n.content, %(query)s)",
                                    "n.content %% %(query)s")
        else:
            raise ValidationError(f"must be 'word' or 'whole', got {method!r}", field="method")
        exhaustive = validate_flag(exhaustive, field="exhaustive")
        bounded = (method == "word" and not exhaustive
                   and self.schema_info.has_table("node_lexicon"))
        key = ("search_fuzzy", query, limit, frame, threshold, method, bool(bounded))
        if bounded:
            return self._cached_read(
                key, *fuzzy_word_statement(self, query, limit, frame, threshold),
                before=lambda cur: cur.execute(FUZZY_WORD_SETTINGS,
                                               (str(FUZZY_WORD_SIMILARITY),)))
        params: dict[str, Any] = {"query": query, "limit": limit}
        where = bind_timeframe(params, frame)
        statement = f"""
            SELECT {SEARCH_COLUMNS}, {score} AS similarity
            FROM nodes n WHERE {test}{where}
            ORDER BY similarity DESC, n.id LIMIT %(limit)s"""
        # The operators read the threshold from a setting: set it for this transaction only.
        return self._cached_read(key, statement, params, before=lambda cur: cur.execute(
            "SELECT set_config(%s, %s, true)", (setting, str(float(threshold)))))

    @share_docs
    def search_hybrid(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        embedding_service: Any = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        prefilter_limit: int = 100,
        fusion: Literal["weighted", "rrf"] = "weighted",
        match: TextMatch | None = None,
    ) -> SearchResults:
        """Hybrid search: full text and tags find candidates, vectors (and tags) rank them.

        ``fusion="weighted"`` is the reference algorithm: candidates are up to
        ``prefilter_limit`` full-text matches plus up to ``prefilter_limit`` nodes carrying a
        tag that matches a query word (:meth:`find_query_matching_tags`), all with embeddings;
        each gets ``combined_score = 0.7 * similarity + 0.3 * tag_boost`` where ``tag_boost`` is
        the share of the matching tags the node carries.

        ``fusion="rrf"`` is Reciprocal Rank Fusion (k = 60, the method HTM moved to): the top
        ``prefilter_limit`` of each of three lists (vector neighbours, full-text matches, tag
        matches) are fused by ``sum(1 / (60 + rank))``, so semantically close nodes are found
        even when no word matches.

        Parameters
        ----------
        query : str
            The question.
        %(search_limit)s
        %(search_timeframe)s
        %(search_vectors)s
        prefilter_limit : int
            Candidates taken from each list, 1 to 1000.
        fusion : {"weighted", "rrf"}
            The scoring method.
        match : {"all", "any", "websearch"}, optional
            Full-text matching (see :meth:`search_fulltext`); defaults to ``"all"`` for
            ``"weighted"`` (as the reference) and ``"any"`` for ``"rrf"``.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count``,
            ``similarity``, then for ``"weighted"``: ``tag_boost``, ``combined_score``; for
            ``"rrf"``: ``rrf_score``, ``vector_rank``, ``fulltext_rank``, ``tag_rank`` (None
            where the node was not in that list) and ``sources``. Best first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        prefilter_limit = validate_positive_int(prefilter_limit, field="prefilter_limit",
                                                maximum=MAX_LIMIT)
        frame = validate_timeframe(timeframe)
        if fusion not in ("weighted", "rrf"):
            raise ValidationError(f"must be 'weighted' or 'rrf', got {fusion!r}", field="fusion")
        match = match or ("all" if fusion == "weighted" else "any")
        tsquery = tsquery_sql(match)
        target = query_vector(self, query, embedding, embedding_service)
        key = ("search_hybrid", query, limit, frame, prefilter_limit, fusion, match,
               service_key(embedding_service) if embedding is None else target.key)
        padded = target.vector
        params: dict[str, Any] = {"query": fulltext_text(query), "limit": limit, "tags": [],
                                  "prefilter": prefilter_limit, "q": padded,
                                  "q_padded": padded}
        where = bind_timeframe(params, frame)

        def find_tags(cur: psycopg.Cursor[Any]) -> None:
            # on the search's connection: one round trip less than a call of its own
            params["tags"] = matching_tags(cur, query)

        statement: str | sql.Composed
        if fusion == "weighted":
            statement = hybrid_weighted_sql(tsquery, where)
            ef_search = DEFAULT_EF_SEARCH
        else:
            params["q"] = target.parameter
            statement = hybrid_rrf_sql(tsquery, where, target.native_dimension)
            ef_search = max(DEFAULT_EF_SEARCH, prefilter_limit)
        rows = self._cached_search(key, statement, params, ef_search=ef_search,
                                   filtered=frame is not None, before=find_tags)
        if fusion == "rrf":
            for row in rows:
                row["sources"] = [name for name, rank in (("vector", "vector_rank"),
                                                          ("fulltext", "fulltext_rank"),
                                                          ("tags", "tag_rank"))
                                  if row[rank] is not None]
        rows.query_vector = target.values
        return rows
