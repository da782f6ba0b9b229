"""The entry object: :class:`LongTermMemory`, composed from the store's focused modules."""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ._common import Timeframe
from .activity import ActivityMixin
from .bulk import BulkMixin
from .catalog import CatalogMixin
from .display import SearchResults
from .forgetting import ForgettingMixin
from .hygiene import HygieneMixin
from .hygiene_sample import SampledHygieneMixin
from .imports import ImportsMixin
from .indexing import IndexingMixin
from .lexical import LexicalSearchMixin
from .nodes import NodesMixin
from .query_log import QueryLogMixin
from .reindex_check import ReindexCheckMixin
from .search import SearchMixin, check_strategy
from .stale import StaleMixin
from .tagging import TaggingMixin
from .vitals import VitalsMixin

__all__ = ["LongTermMemory", "live_store"]


class LongTermMemory(NodesMixin, ActivityMixin, TaggingMixin, SearchMixin, LexicalSearchMixin,
                     BulkMixin, CatalogMixin, IndexingMixin, ImportsMixin, ForgettingMixin,
                     HygieneMixin, SampledHygieneMixin, StaleMixin, ReindexCheckMixin,
                     VitalsMixin, QueryLogMixin):
    """PostgreSQL-backed permanent memory with deduplication, tags, search and a query cache.

    Each group of methods lives in its own module of :mod:`htm_analytics.store`, a mixin
    directly over ``_base.StoreBase`` (pool, transactions, tracing, cache, search
    connections, recall writes): ``nodes`` (add, retrieve, delete, embedding models),
    ``forgetting`` (forget, restore, purge_deleted as each HTM era does), ``activity``
    (robots, accesses, working memory, written directly or behind), ``tagging`` (tags and
    topics), ``search`` (vector, full text, fuzzy, hybrid), ``lexical``
    (:meth:`search_vector_bm25` and the bounded lexical searches), ``bulk``
    (:meth:`bulk_add`), ``catalog`` (statistics, exports), ``indexing`` (native indexes,
    tuning sessions), ``imports`` (records of imports from other memory systems),
    ``hygiene`` and ``hygiene_sample`` (the reads of the memory-hygiene checks, on every
    memory or on a sample), ``stale`` (the list of memories not recalled for a while),
    ``query_log`` (the query vectors recalls searched with, where
    ``init-db`` installed the log). No mixin inherits from another or
    overrides another's method; :meth:`search_by_strategy`, which needs them all, is defined
    here.

    Parameters
    ----------
    config_or_url : str, mapping or None
        A PostgreSQL URL, a mapping of libpq settings (``host``, ``port``, ``dbname``, ``user``,
        ``password``, ``sslmode``), or None: then ``HTM_DBURL``, ``HTM_DATABASE__URL`` or
        ``DATABASE_URL`` is used, else an embedded PostgreSQL is started and reused.
    pool_size : int, optional
        Most pooled connections (default 5); searches have a pool of their own of the same
        size, opened at the first search (see :mod:`htm_analytics.store.search_pool`).
    query_timeout : int
        Milliseconds a statement may run (PostgreSQL ``statement_timeout``) before it is
        cancelled with :class:`~htm_analytics.QueryTimeoutError`.
    cache_size : int
        Entries in the LRU query cache for searches; 0 disables it.
    cache_ttl : float
        Seconds a cached search result stays valid.
    init_schema : bool
        Install the toolkit's additions: create the extensions and tables and apply pending
        migrations (idempotent, additive; needs the rights of the tables' owner). Off by
        default: opening a database for analysis writes nothing to it, whichever HTM
        version wrote it (see ``store.schema_info`` and docs/production.md).
    tracer : callable, optional
        ``tracer(sql, params, seconds)``, called after every statement the store runs (e.g.
        ``tracer=print``). The logger ``htm_analytics.sql`` also logs each statement at DEBUG
        level, with its duration and the parameters masked; see
        :mod:`htm_analytics.store.tracing`.
    writer_timezone : str, optional
        The time zone (``"America/Chicago"``) of the writer of ``timestamp without time
        zone`` columns: the current gem's migrations make them and it writes its process's
        local time into them. Such columns are read as local times of this zone (default:
        ``HTM_WRITER_TIMEZONE``, else the server's ``TimeZone``); ``schema_info.describe()``
        says which. Ignored where every column has a time zone.
    read_only : bool
        Every transaction of the store's connections is read-only
        (``default_transaction_read_only``): any write, by any method, is refused by the
        server (``DatabaseError``). For servers that must not change the memory (the MCP
        server).

    Notes
    -----
    Connections run in UTC and with the given statement timeout. Cached search results are
    served only while no write that could change them has been committed, by any process
    where the database has the toolkit's cache counter (``cache_scope``).

    Examples
    --------
    >>> with LongTermMemory() as ltm:                                  # doctest: +SKIP
    ...     robot = ltm.register_robot("planner")
    ...     ltm.add(content="PostgreSQL is our primary database", robot_id=robot)
    """

    def search_by_strategy(self, strategy: str, *, query: str, limit: int = 20,
                           timeframe: Timeframe = None, embedding: Any = None,
                           embedding_service: Any = None) -> SearchResults:
        """Any search, by name: what recall, the evaluation and the widgets choose from.

        ``vector`` (:meth:`search`), ``fulltext`` (every word), ``fulltext_any`` (any word,
        ranked), ``fuzzy`` (:meth:`search_fuzzy`), ``hybrid`` (the reference 0.7/0.3
        weighting), ``rrf`` (reciprocal rank fusion) and ``vector_bm25``
        (:meth:`search_vector_bm25`, the default of recall). ``embedding`` or
        ``embedding_service`` is needed by vector, hybrid, rrf and vector_bm25
        (``VECTOR_STRATEGIES``) and ignored by the others.
        """
        options: dict[str, Any] = {"query": query, "limit": limit, "timeframe": timeframe}
        vectors = {"embedding": embedding, "embedding_service": embedding_service}
        match check_strategy(strategy):
            case "vector":
                return self.search(**options, **vectors)
            case "fulltext" | "fulltext_any":
                return self.search_fulltext(
                    **options, match="any" if strategy == "fulltext_any" else "all")
            case "fuzzy":
                return self.search_fuzzy(**options)
            case "hybrid" | "rrf":
                return self.search_hybrid(
                    **options, **vectors, fusion="rrf" if strategy == "rrf" else "weighted")
            case "vector_bm25":
                return self.search_vector_bm25(**options, **vectors)


def live_store(store: Any, *, field: str = "store") -> LongTermMemory:
    """``store`` if it is a live :class:`LongTermMemory` (a helper that reads vectors,
    indexes, server statistics or whole texts, which a snapshot does not answer)."""
    if not isinstance(store, LongTermMemory):
        raise ValidationError(f"must be a LongTermMemory, got {type(store).__name__}",
                              field=field)
    return store
