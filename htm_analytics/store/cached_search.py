"""Searches through the query cache: a search's rows are kept under its arguments and served
again while no write they could miss was committed, by this process or (with the counter of
migration 006) by any.

:class:`CachedSearchMixin` is the base of the search mixins: it runs a search statement on a
search connection (one round trip that also reads the cache generation) or in a pooled
transaction, and keeps its rows in :class:`~.cache.QueryCache`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql

from ..errors import SchemaError
from ._base import StoreBase
from .cache import QueryCache
from .cache_generation import GENERATION_COLUMN, SHARED_GENERATION, with_generation_column
from .display import SearchResults
from .schema_info import prefix_read
from .search_pool import DEFAULT_EF_SEARCH

__all__ = ["CachedSearchMixin"]

Rows = list[dict[str, Any]]


@functools.lru_cache(maxsize=256)
def _search_text(statement: str, with_generation: bool, prefix: str) -> str:
    """See :meth:`CachedSearchMixin._search_text` (text in, text out: psycopg then finds its parsed
    form in its own cache)."""
    text = prefix_read(with_generation_column(statement) if with_generation else statement,
                       prefix)
    return text if isinstance(text, str) else text.as_string(None)


def _pop_generation(rows: Rows) -> int | None:
    """Take the generation column out of each row; its value (None without rows)."""
    generation = None
    for row in rows:
        generation = row.pop(GENERATION_COLUMN)
    return generation


class CachedSearchMixin(StoreBase):
    """The query cache and the search statements' runners (see
    :class:`~htm_analytics.LongTermMemory`)."""

    @property
    def cache(self) -> QueryCache:
        """The query cache (``cache.stats()``, ``cache.clear()``)."""
        return self._cache

    def clear_cache(self) -> None:
        """Drop every cached search result."""
        self._cache.clear()

    @property
    def cache_scope(self) -> str:
        """What invalidates the query cache: ``"database"`` (writes by any process, through
        the counter of migration 006) or ``"process"`` (writes by this store only: the
        database lacks the counter, so another process's delete is seen after ``cache_ttl``;
        run ``htm-analytics init-db``, or pass ``cache_size=0``)."""
        return "database" if self._has_shared_generation else "process"

    def _cached_search(self, key: tuple[Any, ...], statement: str | sql.Composable,
                       params: dict[str, Any] | Callable[[], dict[str, Any]], *,
                       ef_search: int = DEFAULT_EF_SEARCH, filtered: bool = False,
                       before: Callable[[psycopg.Cursor[Any]], object] | None = None
                       ) -> SearchResults:
        """:meth:`_run_search` through the cache; on a miss the database's generation is
        read in the search's own round trip. ``params`` may be a function, called on a miss
        only (for parameters that take work to make)."""
        return self._from_cache(key, lambda with_generation: self._run_search(
            statement, params() if callable(params) else params, ef_search=ef_search,
            filtered=filtered, before=before, with_generation=with_generation))

    def _cached_read(self, key: tuple[Any, ...], statement: str | sql.Composable,
                     params: dict[str, Any],
                     before: Callable[[psycopg.Cursor[Any]], object] | None = None
                     ) -> SearchResults:
        """A search run on a pooled connection, in a transaction (``before(cur)`` first:
        e.g. a setting for the transaction), through the cache; on a miss the generation is
        read by the statement itself, as in :meth:`_cached_search`."""

        def run(with_generation: bool) -> tuple[Rows, int | None]:
            text = self._search_text(statement, with_generation)
            with self._transaction(memory_operation=True) as cur:
                if before is not None:
                    before(cur)
                rows = cur.execute(text, params).fetchall()
            return rows, _pop_generation(rows) if with_generation else None

        return self._from_cache(key, run)

    def _from_cache(self, key: tuple[Any, ...],
                    search: Callable[[bool], tuple[Rows, int | None]]) -> SearchResults:
        cache = self._cache
        if not cache.enabled:
            return SearchResults(search(False)[0])
        shared = self._has_shared_generation
        local = cache.generation  # read before the search: a clear() meanwhile wins

        def still_valid(entry: tuple[tuple[int, int | None], Rows]) -> bool:
            # A result is served while no write it could miss was committed since it was
            # computed: by this process (local) or by anyone (the database's counter).
            (entry_local, entry_shared), _ = entry
            return entry_local == local and (not shared or entry_shared
                                              == self._shared_generation())

        try:
            hit, entry = cache.get(key, still_valid)
            if hit:
                return SearchResults(map(dict, entry[1]))
            rows, generation = search(shared)
            if shared and generation is None:  # no row carried it: nothing worth keeping
                return SearchResults(rows)
        except SchemaError:
            if not shared:
                raise
            # The counter was dropped under this store: fall back to the process generation.
            self._has_shared_generation = False
            return self._from_cache(key, search)
        cache.put(key, ((local, generation), rows))
        return SearchResults(map(dict, rows))  # callers may mutate their rows

    def _shared_generation(self) -> int:
        with self._search_cursor(ef_search=None) as cur:
            row = cur.execute(SHARED_GENERATION, prepare=True).fetchone()
            return int(row["g"]) if row else 0

    # -- searches -------------------------------------------------------------------------

    @contextmanager
    def _search_cursor(self, *, ef_search: int | None = DEFAULT_EF_SEARCH,
                       filtered: bool = False) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor on a search connection (:class:`.search_pool.SearchConnections`)."""
        self._check_open()
        with self._translated_errors("search connection"), self._search.cursor(
                ef_search=ef_search, filtered=filtered) as cur:
            yield cur

    def _search_text(self, statement: str | sql.Composable, with_generation: bool
                     ) -> str | sql.Composed:
        """The text a search runs: ``statement`` read through this database's view of the
        tables (:meth:`_read`), with the cache generation as a last column when asked;
        composed once per statement text."""
        if isinstance(statement, str):
            return _search_text(statement, with_generation, self._read_prefix)
        return self._read(with_generation_column(statement) if with_generation
                          else statement)

    def _run_search(self, statement: str | sql.Composable, params: dict[str, Any], *,
                    ef_search: int = DEFAULT_EF_SEARCH, filtered: bool = False,
                    before: Callable[[psycopg.Cursor[Any]], object] | None = None,
                    with_generation: bool = False) -> tuple[Rows, int | None]:
        """Run a search statement on a search connection (:meth:`_search_text`); returns its
        rows and, with ``with_generation``, the cache generation its snapshot saw (None when
        there are no rows to carry it).

        The generation is read by the statement itself, as a column of each row, so the
        search stays one round trip and its result and generation come from one snapshot.
        ``before(cur)`` runs first on the same connection (e.g. to compute a parameter).
        """
        text = self._search_text(statement, with_generation)
        self._check_open()
        try:
            rows = self._search.fetch(text, params, ef_search=ef_search, filtered=filtered,
                                      before=before)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise self._translated(exc, "search connection") from exc
        return rows, _pop_generation(rows) if with_generation else None
