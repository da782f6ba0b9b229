"""The store's floor: the connection pool, transactions, statement tracing and the cache.

Every other module of the store is a mixin over :class:`StoreBase`: it runs its SQL through
:meth:`StoreBase._transaction` (one transaction, errors mapped to the ``HTMError`` tree) or
:meth:`StoreBase._fetch`, and nothing else opens connections.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self

import pandas as pd
import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from ..cache import QueryCache
from ..connection import mask_url, resolve_database_url
from ..display import SearchResults
from ..errors import (
    DatabaseConnectionError,
    DatabaseError,
    SchemaError,
    ValidationError,
    translate_database_error,
)
from ..frames import coerce_frame, load_analytics_query
from ..validation import validate_positive_int
from ._common import LOG_EVENTS
from .cache_generation import has_shared_generation, read_shared_generation
from .schema import apply_migrations, native_index_dimensions
from .schema_info import SchemaInfo, detect_schema
from .server import missing_schema_error, read_overview
from .tracing import Tracer, tracing_cursor_class

__all__ = ["StoreBase"]

Rows = list[dict[str, Any]]

_LEADING_COMMENTS = re.compile(r"^(?:\s+|--[^\n]*\n)*")
_WITH = re.compile(r"^WITH(\s+RECURSIVE)?\s", re.IGNORECASE)


def prefix_read(statement: str | sql.Composable, prefix: str) -> str | sql.Composable:
    """``statement`` (a SELECT or WITH ... SELECT) with the CTEs of ``prefix`` before its own.

    Other statements, and every statement when ``prefix`` is empty, come back unchanged.
    """
    if not prefix:
        return statement
    text = statement.as_string(None) if isinstance(statement, sql.Composable) else statement
    leading = _LEADING_COMMENTS.match(text)
    body = text[leading.end():] if leading else text
    if match := _WITH.match(body):
        return f"WITH{match.group(1) or ''} {prefix}, {body[match.end():]}"
    if body[:6].upper() == "SELECT":
        return f"WITH {prefix} {body}"
    return statement


class StoreBase:
    """Pool, transactions, tracing and cache; see :class:`~htm_analytics.LongTermMemory`."""

    def __init__(
        self,
        config_or_url: str | Mapping[str, Any] | None = None,
        *,
        pool_size: int | None = None,
        query_timeout: int = 30_000,
        cache_size: int = 1000,
        cache_ttl: float = 300,
        init_schema: bool = False,
        tracer: Tracer | None = None,
    ) -> None:
        if pool_size is not None:
            pool_size = validate_positive_int(pool_size, field="pool_size", maximum=1000)
        # statement_timeout is an int of milliseconds on the server
        self.query_timeout = validate_positive_int(query_timeout, field="query_timeout",
                                                   maximum=2**31 - 1)
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValidationError(f"must be an integer >= 0, got {cache_size!r}",
                                  field="cache_size")
        if isinstance(cache_ttl, bool) or not isinstance(cache_ttl, (int, float)) \
                or not cache_ttl > 0:
            raise ValidationError(f"must be a number of seconds > 0, got {cache_ttl!r}",
                                  field="cache_ttl")
        if tracer is not None and not callable(tracer):
            raise ValidationError("must be callable as tracer(sql, params, seconds)",
                                  field="tracer")
        self._cursor_class = tracing_cursor_class(tracer)
        self._url = resolve_database_url(config_or_url)
        self.url = mask_url(self._url)
        self.schema_info: SchemaInfo
        self.server_info = self._prepare_database(init_schema)
        self._read_prefix = self.schema_info.read_prefix()
        self._native_dimensions = set(self.server_info.pop("native_dimensions"))
        # cache of embedding_models() as (provider, model, dimension, nodes) tuples
        self._embedding_models: list[tuple[Any, Any, int, int]] | None = None
        self._pool = psycopg_pool.ConnectionPool(
            self._url,
            min_size=1,
            max_size=pool_size or 5,
            configure=self._configure_connection,
            # A connection left from before a server restart is dead; checking it at checkout
            # (one empty round trip) replaces it instead of failing the caller's call.
            check=psycopg_pool.ConnectionPool.check_connection,
            open=False,
            name="htm_analytics",
        )
        try:
            self._pool.open(wait=True, timeout=30)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise DatabaseConnectionError(
                f"could not open a connection pool to {self.url}: {exc}") from exc
        self._cache = QueryCache(cache_size, cache_ttl)
        self._atomic = threading.local()  # the cursor of this thread's atomic() block
        self._has_shared_generation: bool | None = None
        self._closed = False

    # -- connections ----------------------------------------------------------------------

    def _prepare_database(self, init_schema: bool) -> dict[str, Any]:
        try:
            with psycopg.connect(self._url, autocommit=True, connect_timeout=10,
                                 cursor_factory=self._cursor_class) as conn:
                overview = read_overview(conn)
                if init_schema and overview["pgvector_available"] is None:
                    raise missing_schema_error(overview, self._url) or SchemaError("pgvector")
                applied = apply_migrations(conn) if init_schema else []
                info = conn.execute(
                    """SELECT current_setting('server_version') AS server_version,
                              current_setting('server_version_num')::int AS server_version_num,
                              current_database() AS database,
                              (SELECT extversion FROM pg_extension WHERE extname = 'vector')
                                  AS pgvector_version,
                              (SELECT extversion FROM pg_extension WHERE extname = 'pg_trgm')
                                  AS pg_trgm_version""").fetchone()
                assert info is not None
                names = ["server_version", "server_version_num", "database",
                         "pgvector_version", "pg_trgm_version"]
                result = dict(zip(names, info))
                if not init_schema:
                    problem = missing_schema_error(overview, self._url)
                    if problem is not None:
                        raise problem
                self.schema_info = detect_schema(conn)
                result["schema_version"] = self.schema_info.additions_version
                result["native_dimensions"] = native_index_dimensions(conn)
                result["migrations_applied"] = applied
                return result
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc

    def _log_events(self, cur: psycopg.Cursor[Any], kind: str, robot_id: int | None,
                    node_ids: list[int]) -> None:
        """Append events to the log, where there is one and the database does not already.

        From migration 7 on, triggers log remembers and deletes for every writer; logging them
        here too would count them twice.
        """
        info = self.schema_info
        if not info.has_event_log or (kind in ("remember", "delete") and info.event_triggers):
            return
        cur.execute(LOG_EVENTS, {"kind": kind, "robot_id": robot_id, "node_ids": node_ids})

    def _claim_event_logging(self, cur: psycopg.Cursor[Any]) -> None:
        """When this store logs remembers and deletes itself, tell the triggers not to.

        The triggers of migration 7 may have been installed after this store opened (by
        ``init-db`` elsewhere); without this, this transaction's events would count twice.
        """
        if self.schema_info.has_event_log and not self.schema_info.event_triggers:
            cur.execute("SELECT set_config('htm_analytics.events_written', 'on', true)")

    def _configure_connection(self, conn: psycopg.Connection[Any]) -> None:
        conn.cursor_factory = self._cursor_class
        register_vector(conn)
        conn.execute("SELECT set_config('statement_timeout', %s, false),"
                     "       set_config('TimeZone', 'UTC', false)",
                     (str(self.query_timeout),))
        conn.commit()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[dict[str, Any]]]:
        """A cursor in one transaction: committed on success, rolled back on any error.

        Inside :meth:`atomic` (on this thread) it is a savepoint of the atomic transaction.
        """
        self._check_open()
        outer: psycopg.Cursor[dict[str, Any]] | None = getattr(self._atomic, "cursor", None)
        with self._translated_errors():
            if outer is not None:
                with outer.connection.transaction():
                    yield outer
                return
            with self._pool.connection() as conn, conn.cursor(row_factory=dict_row) as cur:
                yield cur

    def _check_open(self) -> None:
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")

    @contextmanager
    def _translated_errors(self, connection: str = "pooled connection") -> Iterator[None]:
        """Driver and pool errors raised inside, as the ``HTMError`` tree (by SQLSTATE)."""
        try:
            yield
        except psycopg.Error as exc:
            raise translate_database_error(exc, url=self.url) from exc
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseConnectionError(
                f"no {connection} to {self.url} became free: {exc}") from exc

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """Run the store calls made inside the block, on this thread, in one transaction.

        Everything is committed when the block ends, or nothing if it raises: for writes that
        belong together across several calls (an importer's memories and the records of
        their source rows). Calls inside run on one pooled connection, each as a savepoint;
        an ``atomic`` inside another is a savepoint too. Other threads are not affected, and
        searches, which run on connections of their own, see the block's writes only once
        it has committed.
        """
        if getattr(self._atomic, "cursor", None) is not None:
            with self._transaction():
                yield
            return
        # An explicit transaction block, so that the calls inside are its savepoints.
        with self._transaction() as cur, cur.connection.transaction():
            self._atomic.cursor = cur
            try:
                yield
            finally:
                self._atomic.cursor = None
        # Searches that ran while the block was uncommitted may have cached what it changed.
        self._cache.clear()
    def _read(self, query: str | sql.Composable) -> Any:
        """A read statement as this database needs it: see :meth:`SchemaInfo.read_prefix`."""
        return prefix_read(query, self._read_prefix)

    def _fetch(self, query: str | sql.Composable, params: Any = None) -> list[dict[str, Any]]:
        with self._transaction() as cur:
            cur.execute(self._read(query), params)
            return cur.fetchall() if cur.description else []

    def fetch_frame(self, query: str | sql.Composable, params: Any = None,
                    *, dtypes: Mapping[str, Any] | None = None) -> pd.DataFrame:
        """Run one read-only statement and return its rows as a DataFrame.

        For the analysis helpers of this package; ``params`` are bound, never interpolated.
        Columns keep the statement's order even when there are no rows; ``dtypes`` is applied
        with :meth:`pandas.DataFrame.astype`.
        """
        with self._transaction() as cur:
            cur.execute(self._read(query), params)
            columns = [c.name for c in cur.description or []]
            frame = pd.DataFrame(cur.fetchall(), columns=columns)
        return coerce_frame(frame, dtypes) if dtypes else frame

    def analytics_frame(self, name: str, params: Mapping[str, Any],
                        dtypes: Mapping[str, Any]) -> pd.DataFrame:
        """Run the analytics query ``sql/analytics/<name>.sql``; see :mod:`htm_analytics.frames`."""
        return self.fetch_frame(load_analytics_query(name), params, dtypes=dtypes)

    def close(self) -> None:
        """Close the connection pool. The embedded server stops when the process exits."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(url={self.url!r}, "
                f"postgresql={self.server_info['server_version']!r}, "
                f"pgvector={self.server_info['pgvector_version']!r})")

    def ensure_pool_size(self, size: int) -> int:
        """Let the connection pool hold at least ``size`` connections.

        For measurements with several client threads, each taking its own pooled connection
        (:func:`htm_analytics.concurrency_sweep`); a smaller pool would make threads queue.

        Returns
        -------
        int
            The pool's maximum size now.
        """
        size = validate_positive_int(size, field="size", maximum=1000)
        if self._closed:
            raise DatabaseError("this LongTermMemory is closed")
        if size > self._pool.max_size:
            self._pool.resize(self._pool.min_size, size)
        return self._pool.max_size

    @functools.cached_property
    def supports_iterative_scan(self) -> bool:
        """Whether the server's pgvector (>= 0.8.0) has ``hnsw.iterative_scan`` (filtered
        searches ask on every call: parsed once)."""
        version = tuple(int(p) for p in re.findall(r"\d+", self.server_info["pgvector_version"]))
        return version >= (0, 8, 0)

    @property
    def native_dimensions(self) -> frozenset[int]:
        """Dimensions that have a native HNSW index (:meth:`create_native_index`)."""
        return frozenset(self._native_dimensions)

    @property
    def _server_version_num(self) -> int:
        return int(self.server_info["server_version_num"])

    # -- the query cache ------------------------------------------------------------------

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
        return "database" if self._shared_generation_readable() else "process"

    def _shared_generation_readable(self) -> bool:
        if self._has_shared_generation is None:
            self._has_shared_generation = has_shared_generation(self._fetch)
        return self._has_shared_generation

    def _cached(self, key: tuple[Any, ...], compute: Callable[[], Rows]) -> SearchResults:
        if not self._cache.enabled:
            return SearchResults(compute())
        # Both generations are read before the search runs, so its result reflects at least
        # every write they count; a write committed later changes them and misses the entry.
        generation: tuple[int, int | None] = (self._cache.generation, None)
        if self._shared_generation_readable():
            try:
                generation = (generation[0], read_shared_generation(self._fetch))
            except SchemaError:  # the counter was dropped under this store: fall back
                self._has_shared_generation = False
        key = (*key, generation)
        hit, value = self._cache.get(key)
        if not hit:
            value = compute()
            self._cache.put(key, value)
        return SearchResults(dict(row) for row in value)  # callers may mutate their rows
