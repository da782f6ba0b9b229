"""Bounded lexical searches: any-word full text, typo-tolerant search through the lexicon,
and vector similarity fused with BM25 (the default of recall).

Each looks only at the memories holding the query's rarest words (about ``LEXICAL_BUDGET``
expected matches, estimated from PostgreSQL's statistics of ``node_search_vectors``), never at
every match; the statements are in ``sql/search/``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from .._docs import share_docs
from ..validation import (
    validate_content,
    validate_duration,
    validate_number,
    validate_positive_int,
    validate_timeframe,
)
from ._base import StoreBase
from ._common import MAX_LIMIT, VECTOR_BM25_DEPTH, Timeframe, bind_timeframe
from ._dates import mentioned_dates
from ._search_sql import fulltext_text, lexical_statistics, search_statement, tsquery_sql
from ._vectors import query_vector, service_key
from .cached_search import CachedSearchMixin
from .display import SearchResults
from .search_pool import DEFAULT_EF_SEARCH
from .speakers import SPEAKER_ROWS, SpeakerIndex

__all__ = ["LexicalSearchMixin", "fulltext_any_statement", "search_fulltext_any_bounded",
           "fuzzy_word_statement", "FUZZY_WORD_SETTINGS",
           "VECTOR_BM25_DEPTH", "VECTOR_BM25_ALPHA", "BM25_K1", "BM25_B",
           "NEIGHBOUR_WEIGHT", "NEIGHBOUR_GAP", "CONTEXT_WEIGHT", "DATE_BOOST", "SPEAKER_BOOST",
           "LEXICAL_BUDGET", "FUZZY_NEIGHBOURS", "FUZZY_WORD_SIMILARITY", "FUZZY_BUDGET",
           "FUZZY_SHORTLIST", "MAX_WEIGHT"]

# search_vector_bm25 (tuned on the corpus dev queries, docs/retrieval.md) and bounded lexical
# candidates.
VECTOR_BM25_ALPHA = 0.5
MAX_WEIGHT = 1e6  # for each weight and boost of search_vector_bm25
BM25_K1 = 0.9
BM25_B = 0.4
LEXICAL_BUDGET = 500
# Conversations (tuned on LoCoMo conv-26, conv-30 and conv-41, docs/retrieval.md): a memory
# gains NEIGHBOUR_WEIGHT x the best own score of the memories remembered just before and after
# it (at most NEIGHBOUR_GAP away), SPEAKER_BOOST when a robot the question names remembered
# it, and DATE_BOOST when it was remembered on a date the question names; BM25 counts the
# words of the memory remembered just before it CONTEXT_WEIGHT times.
NEIGHBOUR_WEIGHT = 0.3
NEIGHBOUR_GAP = dt.timedelta(minutes=10)
CONTEXT_WEIGHT = 0.5
SPEAKER_BOOST = 0.2
DATE_BOOST = 0.2
# Fuzzy search through the lexicon: up to FUZZY_NEIGHBOURS vocabulary words per query word
# whose trigram similarity to it is at least FUZZY_WORD_SIMILARITY, then about FUZZY_BUDGET
# memories holding the rarest of them, of which the FUZZY_SHORTLIST best by ts_rank are
# scored over their whole text.
FUZZY_NEIGHBOURS = 5
FUZZY_WORD_SIMILARITY = 0.3
FUZZY_BUDGET = 200
FUZZY_SHORTLIST = 50


class LexicalSearchMixin(CachedSearchMixin):
    """:meth:`search_vector_bm25`; the bounded forms of any-word and fuzzy search are the
    functions of this module, which :meth:`search_fulltext` and :meth:`search_fuzzy` call."""

    @share_docs
    def search_vector_bm25(
        self,
        *,
        query: str,
        limit: int = 20,
        timeframe: Timeframe = None,
        embedding_service: Any = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        depth: int = VECTOR_BM25_DEPTH,
        text_budget: int = LEXICAL_BUDGET,
        alpha: float = VECTOR_BM25_ALPHA,
        neighbours: float = NEIGHBOUR_WEIGHT,
        neighbour_gap: dt.timedelta = NEIGHBOUR_GAP,
        context: float = CONTEXT_WEIGHT,
        speaker_boost: float = SPEAKER_BOOST,
        date_boost: float = DATE_BOOST,
    ) -> SearchResults:
        """The default recall search: vector similarity and BM25 on one bounded candidate set.

        Candidates are the ``depth`` nearest vectors (HNSW, ``ef_search`` raised to ``depth``)
        and the memories containing the query's rarest words, taken until about
        ``text_budget`` matches are expected (document frequencies estimated from
        PostgreSQL's statistics of ``node_search_vectors``, so no word list is scanned). Every
        candidate gets its cosine similarity and a BM25 score over all query words (k1 0.9,
        b 0.4; inverse document frequency from the same statistics); the result is ordered by
        ``similarity + alpha * bm25 / best bm25 among the candidates``, plus
        ``speaker_boost`` for the memories of a robot the question names and ``date_boost``
        for those remembered on a date it names ("on 3 June, 2023", "in December 2023").
        The memories remembered just before and just after each candidate (at most
        ``neighbour_gap`` away: the turns around it in a conversation) are scored too, and
        each memory adds ``neighbours`` x the best of its neighbours' scores: an answer often
        holds none of the question's words while the turn before it does. For the same
        reason BM25 reads each memory with the one remembered just before it (within
        ``neighbour_gap``), whose words count ``context`` times, and the memory after a
        lexical candidate is a candidate too. Memories remembered at the same instant have
        no order and no neighbours. On the
        60,326-memory corpus this finds the right memory more often than any single search
        and than RRF, in about the time of one any-word full-text query; on LoCoMo's
        held-out conversations it finds an evidence turn for about 0.8 of the questions
        (docs/retrieval.md).

        Parameters
        ----------
        query : str
            The question (its words feed BM25; ``embedding_service`` embeds it).
        %(search_limit)s
        %(search_timeframe)s
        %(search_vectors)s
        depth : int
            Vector candidates, ``limit`` to 1000.
        text_budget : int
            Expected lexical candidates, 1 to 100,000 (at most 10 times that are read).
        alpha : float
            Weight of the normalised BM25 score against the cosine similarity, >= 0 (this
            and the other weights and boosts at most a million).
        neighbours : float
            Share of the best neighbour's score a memory gains, >= 0 (0: no neighbours).
        neighbour_gap : datetime.timedelta
            How far apart in time two memories may be remembered and still be neighbours.
        context : float
            How many times a word of the memory remembered just before counts in a memory's
            BM25 (its document length too), >= 0 (0: each memory alone).
        speaker_boost : float
            Added for memories remembered by a robot the question names, >= 0. The store
            reads the robots' names at its first such search and again after ``cache_ttl``
            (new robots are always seen; a robot renamed meanwhile by its new name then).
        date_boost : float
            Added for memories remembered on a day (or in a month) the question names, >= 0.

        Returns
        -------
        list of dict
            ``id``, ``content``, ``access_count``, ``created_at``, ``token_count``,
            ``similarity`` (None for a memory without a vector), ``bm25`` and ``score``, best
            first.
        """
        query = validate_content(query, field="query")
        limit = validate_positive_int(limit, field="limit", maximum=MAX_LIMIT)
        depth = max(validate_positive_int(depth, field="depth", maximum=MAX_LIMIT), limit)
        text_budget = validate_positive_int(text_budget, field="text_budget", maximum=100_000)
        # Bounded so that the score, about (1 + neighbours) x (1 + alpha + boosts), stays
        # far inside float8 (1e308 overflowed on the server).
        alpha, neighbours, context, speaker_boost, date_boost = (
            validate_number(value, field=name, minimum=0, maximum=MAX_WEIGHT)
            for name, value in (("alpha", alpha), ("neighbours", neighbours),
                                ("context", context), ("speaker_boost", speaker_boost),
                                ("date_boost", date_boost)))
        neighbour_gap = validate_duration(neighbour_gap, field="neighbour_gap")
        frame = validate_timeframe(timeframe)
        target = query_vector(self, query, embedding, embedding_service)
        key = ("search_vector_bm25", query, limit, frame, depth, text_budget, alpha,
               neighbours, neighbour_gap, context, speaker_boost, date_boost,
               service_key(embedding_service) if embedding is None else target.key)
        if (neighbours or context) and not times_indexed(self):
            neighbours = context = 0.0
        params: dict[str, Any] = {"query": fulltext_text(query), "limit": limit, "depth": depth,
                                  "budget": text_budget, "cap": 10 * text_budget,
                                  "alpha": alpha, "k1": BM25_K1, "b": BM25_B,
                                  "q": target.parameter, "neighbour_weight": neighbours,
                                  "neighbour_gap": neighbour_gap, "context": context,
                                  "speaker_boost": speaker_boost, "date_boost": date_boost}
        timeframe_sql = bind_timeframe(params, frame)
        distance, has_vector = target.sql()
        statement = search_statement("vector_bm25", timeframe_sql, distance=distance,
                                     has_vector=has_vector,
                                     statistics=lexical_sources(self))

        def named_in_question() -> dict[str, Any]:  # made for a cache miss only
            speakers, newest = (speaker_candidates(self, params["query"]) if speaker_boost
                                else ([], 0))
            dates = mentioned_dates(query) if date_boost else []
            return {**params, "speakers": speakers, "speakers_newest": newest,
                    "date_from": [first for first, _ in dates],
                    "date_to": [last for _, last in dates]}

        rows = self._cached_search(key, statement, named_in_question,
                                   ef_search=max(DEFAULT_EF_SEARCH, depth),
                                   filtered=frame is not None)
        rows.query_vector = target.values
        return rows


def speaker_candidates(store: StoreBase, question: str) -> tuple[list[int] | None, int]:
    """The robots ``question`` may name (see :mod:`.speakers`; None: every robot), and the
    largest robot id the store's index knows: the search checks those robots and every
    newer one."""
    index = store._speakers
    if index is None or time.monotonic() - index.read_at > store._cache.ttl:
        rows = store._fetch(SPEAKER_ROWS, memory_operation=True)  # an agent's search
        index = store._speakers = SpeakerIndex((row["id"], row["words"]) for row in rows)
    return index.candidates(question), index.newest


def times_indexed(store: StoreBase) -> bool:
    """Whether ``nodes.created_at`` reads as stored, so that its index finds a memory's
    neighbours in time; a ``timestamp without time zone`` column (the current gem) is read
    converted from the writer's zone, which no index serves, and a search would scan every
    memory twice per candidate: such databases get no neighbour term."""
    info = store.schema_info
    return not (info.reads_local_time and "created_at" in info.local_time_columns.get("nodes", ()))


def lexical_sources(store: StoreBase) -> dict[str, sql.Composable]:
    """Where document frequencies are read: ``node_search_vectors`` where the additions are
    installed, else the seed's expression index (see :func:`lexical_statistics`)."""
    info = store.schema_info
    return lexical_statistics(None if info.has_table("node_search_vectors")
                              else info.content_fulltext_index)


def fulltext_any_statement(store: StoreBase, query: str, limit: int,
                           frame: tuple[dt.datetime, dt.datetime] | None,
                           text_budget: int = LEXICAL_BUDGET
                           ) -> tuple[sql.Composable, dict[str, Any]]:
    """The statement and parameters of any-word full text ranked by ``ts_rank`` over the
    memories holding the query's rarest words (about ``text_budget`` of them) instead of
    over every match."""
    params: dict[str, Any] = {"query": fulltext_text(query), "limit": limit,
                              "budget": text_budget, "cap": 10 * text_budget}
    statement = search_statement("fulltext_any", bind_timeframe(params, frame),
                                 tsquery=sql.SQL(tsquery_sql("any")),
                                 statistics=lexical_sources(store))
    return statement, params


def search_fulltext_any_bounded(store: StoreBase, query: str, limit: int,
                                frame: tuple[dt.datetime, dt.datetime] | None,
                                text_budget: int = LEXICAL_BUDGET) -> list[dict[str, Any]]:
    """The rows of :func:`fulltext_any_statement`, uncached."""
    return store._fetch(*fulltext_any_statement(store, query, limit, frame, text_budget),
                        memory_operation=True)


FUZZY_WORD_SETTINGS = ("SELECT set_config('pg_trgm.similarity_threshold', %s, true), "
                       "set_config('enable_seqscan', 'off', true)")
"""The lexicon's ``%`` operator reads its threshold from a setting, and the lexicon is read
through its trigram index whatever its statistics say (for one transaction)."""


def fuzzy_word_statement(store: StoreBase, query: str, limit: int,
                         frame: tuple[dt.datetime, dt.datetime] | None,
                         threshold: float) -> tuple[sql.Composable, dict[str, Any]]:
    """The statement and parameters of fuzzy word search over the memories holding words of
    the lexicon close to the query's words (about ``FUZZY_BUDGET`` of them, the
    ``FUZZY_SHORTLIST`` best by ``ts_rank``), ranked by ``word_similarity``; it runs after
    :data:`FUZZY_WORD_SETTINGS` in its transaction."""
    params: dict[str, Any] = {"query": fulltext_text(query), "limit": limit,
                              "budget": FUZZY_BUDGET, "cap": 5 * FUZZY_BUDGET,
                              "threshold": threshold,
                              "neighbours": FUZZY_NEIGHBOURS,
                              "shortlist": max(FUZZY_SHORTLIST, 2 * limit)}
    statement = search_statement("fuzzy_word", bind_timeframe(params, frame),
                                 query_text=sql.SQL("(SELECT words FROM corrected)"),
                                 statistics=lexical_sources(store))
    return statement, params
