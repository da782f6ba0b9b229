"""The entry object: :class:`LongTermMemory`, composed from the store's focused modules."""

from __future__ import annotations

from .bulk import BulkMixin
from .catalog import CatalogMixin
from .hygiene import HygieneMixin
from .imports import ImportsMixin
from .indexing import IndexingMixin
from .nodes import NodesMixin
from .recall_buffer import RecallBufferMixin
from .search import SearchMixin

__all__ = ["LongTermMemory"]


class LongTermMemory(NodesMixin, RecallBufferMixin, SearchMixin, BulkMixin, CatalogMixin,
                     IndexingMixin, ImportsMixin, HygieneMixin):
    """PostgreSQL-backed permanent memory with deduplication, tags, search and a query cache.

    Each group of methods lives in its own module of :mod:`htm_analytics.store`: ``nodes``
    (add, retrieve, delete), ``activity`` (robots, accesses, working memory),
    ``recall_buffer`` (working-memory steps written behind, in sets), ``search``
    (every search; ``lexical``: the bounded lexical ones; ``search_pool``: the connections
    searches run on), ``tagging`` (tags and topics), ``bulk`` (:meth:`bulk_add`), ``catalog``
    (statistics, exports), ``indexing`` (native indexes, tuning sessions), ``imports``
    (records of imports from other memory systems), ``hygiene`` (the reads of the
    memory-hygiene checks), over ``_base``
    (pool, transactions, tracing, cache).

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

    Notes
    -----
    Connections run in UTC and with the given statement timeout. The cache is per process:
    writes from other processes become visible when entries expire (``cache_ttl``).

    Examples
    --------
    >>> with LongTermMemory() as ltm:                                  # doctest: +SKIP
    ...     robot = ltm.register_robot("planner")
    ...     ltm.add(content="PostgreSQL is our primary database", robot_id=robot)
    """
