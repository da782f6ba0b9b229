"""Search connections: a pool whose sessions are set up for HNSW searches once.

A vector search needs ``hnsw.ef_search`` and ``enable_seqscan = off`` (the planner
under-costs scans of TOASTed vectors). Setting them per search costs a transaction and a
statement around every query; setting them on the session of a shared connection would leak
them into whatever that connection runs next. So searches get connections of their own:
a second, lazily opened pool whose connections run in autocommit with these settings at the
session level and are used for nothing but searches. A search at the default ``ef_search``
without a timeframe is then one prepared statement, as raw SQL on a dedicated connection
would be; any other setting (a larger ``ef_search``, the iterative scan of a filtered search)
is set with ``set_config(..., true)`` for one transaction and returns to the session's value
at its end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from ..errors import DatabaseConnectionError, DatabaseError
from .tagging import TaggingMixin

__all__ = ["SearchPoolMixin", "DEFAULT_EF_SEARCH", "SEARCH_SESSION_SETTINGS"]

DEFAULT_EF_SEARCH = 40

SEARCH_SESSION_SETTINGS = {"hnsw.ef_search": str(DEFAULT_EF_SEARCH), "enable_seqscan": "off"}
"""What a search connection's session is set to (only search connections have them)."""

_SEARCH_SETTINGS = ("SELECT set_config('hnsw.ef_search', %s, true),"
                    "       set_config('enable_seqscan', 'off', true)")
_ITERATIVE_SCAN = "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"
_SESSION_SETTINGS = ("SELECT set_config('hnsw.ef_search', %s, false),"
                     "       set_config('enable_seqscan', 'off', false)")

_OPENING = threading.Lock()  # only taken when a store opens its search pool


class SearchPoolMixin(TaggingMixin):
    """The search connections (see the module's documentation)."""

    _search_pool: psycopg_pool.ConnectionPool | None = None

    def _search_settings(self, cur: psycopg.Cursor[Any], *, ef_search: int,
                         filtered: bool) -> None:
        """Per-transaction HNSW settings: ``SET LOCAL`` never leaks to pooled connections.

        Sequential scans are disabled too: the planner under-costs scans of TOASTed vectors
        (every padded 2000-d vector is TOASTed), and picks an exact scan + sort that reads
        every vector, 30k rows in, instead of the HNSW index.
        """
        cur.execute(_SEARCH_SETTINGS, (str(ef_search),), prepare=True)
        if filtered and self.supports_iterative_scan:
            cur.execute(_ITERATIVE_SCAN, prepare=True)

    def _configure_search_connection(self, conn: psycopg.Connection[Any]) -> None:
        self._configure_connection(conn)
        conn.execute(_SESSION_SETTINGS, (str(DEFAULT_EF_SEARCH),))

    def _open_search_pool(self) -> psycopg_pool.ConnectionPool:
        with _OPENING:
            if self._closed:
                raise DatabaseError("this LongTermMemory is closed")
            if self._search_pool is None:
                pool = psycopg_pool.ConnectionPool(
                    self._url, min_size=1, max_size=self._pool.max_size,
                    kwargs={"autocommit": True}, configure=self._configure_search_connection,
                    open=False, name="htm_analytics_search")
                try:
                    pool.open(wait=True, timeout=30)
                except psycopg_pool.PoolTimeout as exc:
                    pool.close()
                    raise DatabaseConnectionError(
                        f"could not open a search connection to {self.url}: {exc}") from exc
                self._search_pool = pool
            return self._search_pool

    @contextmanager
    def _search_cursor(self, *, ef_search: int = DEFAULT_EF_SEARCH,
                       filtered: bool = False) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on a search connection, with ``ef_search`` and the iterative scan of a
        filtered search set for its use only."""
        self._check_open()
        pool = self._search_pool or self._open_search_pool()
        with self._translated_errors("search connection"), pool.connection() as conn, \
                conn.cursor(row_factory=dict_row) as cur:
            if ef_search == DEFAULT_EF_SEARCH and not filtered:
                yield cur
            else:
                with conn.transaction():
                    self._search_settings(cur, ef_search=ef_search, filtered=filtered)
                    yield cur

    def close(self) -> None:
        """Close the connection pools. The embedded server stops when the process exits."""
        super().close()
        with _OPENING:
            if self._search_pool is not None:
                self._search_pool.close()
